"""`python -m harness.bench [--workloads a,b] [--schedulers ours,kube,null] [--full]`, or
`python -m harness.bench upstream [--cases Case/Workload] [--label performance] [--full]`
for upstream's own scheduler_perf test cases."""

import sys

from harness.bench import interruptible


def _main() -> int:
    interruptible()
    if sys.argv[1:2] == ["upstream"]:
        from harness.bench.upstream_run import main as upstream_main

        return upstream_main(sys.argv[2:])
    from harness.bench.runner import main

    return main()


raise SystemExit(_main())
