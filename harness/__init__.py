"""The harness: a real local control plane for tests, `make demo`, the agreement runs and benchmarks.

Lives beside the runtime, outside the wheel and the image (pyproject packages only `scheduler` and
`plugins`). The scheduler never imports it (tests/unit/test_layers.py checks that); tests, the
Makefile and the benchmarks do. It starts local processes and writes files under temp dirs.
"""
