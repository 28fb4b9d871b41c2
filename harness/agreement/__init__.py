"""Agreement harness: the same scenarios through the real kube-scheduler and through ours.

- `scenarios`: the scenario format, the shared PROFILES, loading and generating scenarios;
- `run`: the two drivers (one control plane each, side by side) and `run_agreement`;
- `compare`: what a run observed, kube's scores from its log, our replay, the comparison;
- `report`: the table and the verdict (`publish`: non-zero on any disagreement or error);
- `cli`: the command line, `python -m harness.agreement` (`__main__` calls it).
"""
