# One entry point for people and CI. Control-plane binaries are built from Go modules into
# ~/.cache/secondary-scheduler when a command first needs one (hack/controlplane/build.sh NAME...)
# and reused afterwards: `make demo` builds etcd, kube-apiserver, kwok and kube-controller-manager
# only, showing the build's log; the test targets build what their tests run up front (pytest would
# hide that log).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all install lock controlplane lint typecheck test test-unit test-cluster demo bench bench-own clean deploy image-test image-lock agreement readme gotemplate-golden

all: test

# The dev set from its lock (exact versions, hashes checked), then the project alone: what CI tests
# is what the lock says, whatever PyPI published since.
$(STAMP): pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements/dev.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# requirements/*.lock: pyproject's ranges (kept as ranges for library users) resolved for Python
# 3.11 with hashes. runtime.lock (dependencies + the build backend) is what the image installs,
# dev.lock (+ the dev extra, constrained to runtime.lock's versions) what `make install` and CI do;
# tests/unit/test_locks.py fails when either drifts from pyproject. Pins that still fit stay;
# LOCK_ARGS=--upgrade moves everything to the newest versions.
LOCK_ARGS ?=
PIP_COMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile -q --generate-hashes --allow-unsafe \
	--strip-extras --no-emit-find-links $(LOCK_ARGS)
lock: $(STAMP)
	$(PIP_COMPILE) --build-deps-for wheel -o requirements/runtime.lock pyproject.toml
	$(PIP_COMPILE) --extra dev --build-deps-for editable -c requirements/runtime.lock -o requirements/dev.lock pyproject.toml

BUILD_CONTROLPLANE := bash hack/controlplane/build.sh
controlplane:
	$(BUILD_CONTROLPLANE) all >/dev/null

lint: $(STAMP)
	$(VENV)/bin/ruff check scheduler plugins harness tests
	$(VENV)/bin/ruff format --check scheduler plugins harness tests
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/unit/test_layers.py

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test-unit: $(STAMP)
	$(VENV)/bin/pytest -m "not cluster" -q

test-cluster: $(STAMP) controlplane
	$(VENV)/bin/pytest -m "cluster and not image" -q

# The fault suite rewrites its result files (tests/faults/RESULTS.json, PARTITION.md) in every run;
# README.md's tables follow them afterwards, pass or fail, so the next run's README check holds.
test: $(STAMP) controlplane lint typecheck
	$(VENV)/bin/pytest -q -m "not image"; status=$$?; $(PY) -m harness.readme; exit $$status

# The Dockerfile built with podman on a Debian bookworm base (mmdebstrap) and run read-only as
# UID 65532 against a test apiserver until it binds a pod (hack/image/build.sh, tests/image/).
image-test: $(STAMP)
	$(BUILD_CONTROLPLANE) etcd kube-apiserver kwok helm kubectl >/dev/null
	$(VENV)/bin/pytest -q -m image tests/image

# hack/image/bookworm.lock from a fresh base (when Debian moved on and image-test refuses the base).
image-lock:
	bash hack/image/build.sh --relock >/dev/null

demo: $(STAMP)
	$(PY) -m harness.demo

# The full agreement table (the scenario files + 300 generated, seed 137) into
# tests/agreement/RESULTS.md; `make test` runs the files + the first 100 generated.
AGREEMENT_ARGS ?= --seed 137 --generated 300
agreement: $(STAMP)
	$(PY) -m harness.agreement $(AGREEMENT_ARGS)


# Upstream's own scheduler_perf test cases (read from the k8s.io/kubernetes module) against ours,
# kube-scheduler and a null binder; BENCH_ARGS="--full", "--cases SchedulingBasic/5000Nodes_10000Pods",
# "--label performance --label short", "--list", "--scaling" (plot: matplotlib), "--profile" (py-spy),
# "--ours-variant stdjson:SECONDARY_SCHEDULER_JSON=stdlib". bench-own: the project's own scheduler_perf-style workloads.
BENCH_ARGS ?= --label performance
bench: $(STAMP)
	$(PY) -c "import matplotlib" 2>/dev/null && [ -x $(VENV)/bin/py-spy ] || $(PY) -m pip install -q -e ".[dev,bench]"
	$(PY) -m harness.bench upstream $(BENCH_ARGS)

# Go's own renderings of upstream's scheduler_perf templates, which tests/unit/test_gotemplate.py holds
# harness/bench/gotemplate.py to; rerun when K8S_VERSION moves (needs Go).
gotemplate-golden: $(STAMP)
	$(PY) -m harness.bench.gotemplate_golden

bench-own: $(STAMP)
	$(PY) -c "import matplotlib" 2>/dev/null && [ -x $(VENV)/bin/py-spy ] || $(PY) -m pip install -q -e ".[dev,bench]"
	$(PY) -m harness.bench $(OWN_BENCH_ARGS)

# README.md's tables, rewritten from the result files (bench-results/, tests/faults/, tests/agreement/);
# tests/unit/test_readme_tables.py fails when they differ. Run after a benchmark, fault or agreement run.
readme: $(STAMP)
	$(PY) -m harness.readme

# deploy/: the chart rendered with its default values (tests/cluster/test_chart.py checks it is current).
deploy: $(STAMP)
	$(PY) -m harness.chart

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache

-include hack/controlplane/cluster.mk
