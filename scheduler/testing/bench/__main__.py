"""`python -m scheduler.testing.bench [--workloads a,b] [--schedulers ours,kube,null] [--full]`."""

from scheduler.testing.bench.runner import main

raise SystemExit(main())
