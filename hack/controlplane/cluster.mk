# A long-lived local control plane (etcd, kube-apiserver, kwok) for demos and poking around by
# hand; included from the main Makefile. Tests do not need it: their fixture starts its own.
#   make cluster-up      # prints `export KUBECONFIG=…/.cache/cluster/kubeconfig`
#   make cluster-down    # stops everything it started
CLUSTER_DIR ?= .cache/cluster
CLUSTER_PY ?= .venv/bin/python

.PHONY: cluster-up cluster-down cluster-status

cluster-up: $(STAMP)
	$(CLUSTER_PY) -m harness.controlplane up --dir $(CLUSTER_DIR)

cluster-down:
	$(CLUSTER_PY) -m harness.controlplane down --dir $(CLUSTER_DIR)

cluster-status:
	$(CLUSTER_PY) -m harness.controlplane status --dir $(CLUSTER_DIR)
