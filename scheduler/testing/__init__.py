"""Test and demo support: a real local control plane for tests, `make demo` and benchmarks.

This package is never imported by the scheduler itself (nothing under scheduler/ outside
scheduler/testing may import it); it starts local processes and writes files under temp dirs.
"""
