"""`make bench`: scheduler_perf-style workloads run against our scheduler, kube-scheduler and a null
binder, one after another on fresh control planes, with results written to bench-results/.

workloads.py says what each workload creates; schedulers.py starts the schedulers under test;
rawapi.py creates objects and watches pods over raw HTTP; runner.py measures one run and drives the
command line; report.py turns observations into statistics, JSON, markdown and plots.
"""
