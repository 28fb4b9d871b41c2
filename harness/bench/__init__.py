"""`make bench`: scheduler_perf-style workloads run against our scheduler, kube-scheduler and a null
binder, one after another on fresh control planes, with results written to bench-results/.

workloads.py says what each workload creates; schedulers.py starts the schedulers under test;
rawapi.py creates objects and watches pods over raw HTTP; runner.py measures one run and drives the
command line; report.py turns observations into statistics, JSON, markdown and plots.
"""

import signal


def interruptible() -> None:
    """Let SIGINT stop a benchmark even when it was started in the background of a script: such a
    job inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so `kill
    -INT` (the stop that closes the control plane and keeps the rows written) did nothing."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
