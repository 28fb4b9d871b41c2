"""secondary-scheduler: a Kubernetes secondary scheduler that schedules the way kube-scheduler does."""

__version__ = "0.1.0"
