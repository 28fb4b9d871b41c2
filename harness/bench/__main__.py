"""`python -m harness.bench [--workloads a,b] [--schedulers ours,kube,null] [--full]`, or
`python -m harness.bench upstream [--cases Case/Workload] [--label performance] [--full]`
for upstream's own scheduler_perf test cases."""

import sys

if sys.argv[1:2] == ["upstream"]:
    from harness.bench.upstream_run import main as upstream_main

    raise SystemExit(upstream_main(sys.argv[2:]))

from harness.bench.runner import main

raise SystemExit(main())
