# One entry point for people and CI. The first run builds the control plane from Go
# modules (~8 min on 2 cores) into ~/.cache/secondary-scheduler; later runs reuse it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all install controlplane lint typecheck test test-unit test-cluster demo bench clean agreement

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

controlplane:
	bash hack/controlplane/build.sh >/dev/null

lint: $(STAMP)
	$(VENV)/bin/ruff check scheduler plugins tests
	$(VENV)/bin/ruff format --check scheduler plugins tests

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test-unit: $(STAMP)
	$(VENV)/bin/pytest -m "not cluster" -q

test-cluster: $(STAMP) controlplane
	$(VENV)/bin/pytest -m cluster -q

test: $(STAMP) controlplane lint typecheck
	$(VENV)/bin/pytest -q

demo: $(STAMP) controlplane
	$(PY) -m scheduler.testing.demo

# The full agreement table (the 59 scenario files + 300 generated, seed 137) into
# tests/agreement/RESULTS.md; `make test` runs the files + the first 100 generated.
AGREEMENT_ARGS ?= --seed 137 --generated 300
agreement: $(STAMP) controlplane
	$(PY) -m scheduler.testing.agreement $(AGREEMENT_ARGS)

# ours vs kube-scheduler vs a null binder, scheduler_perf-style; BENCH_ARGS="--full", "--workloads ...".
bench: $(STAMP) controlplane
	$(PY) -c "import matplotlib" 2>/dev/null && [ -x $(VENV)/bin/py-spy ] || $(PY) -m pip install -q -e ".[dev,bench]"
	$(PY) -m scheduler.testing.bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache

-include hack/controlplane/cluster.mk
