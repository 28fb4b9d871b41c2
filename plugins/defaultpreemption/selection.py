"""SelectCandidate: upstream's rules, applied in order until one candidate is left.

1. fewest PodDisruptionBudget violations; 2. lowest highest-priority victim; 3. smallest sum of
victim priorities (each shifted by 2^31 so that negative priorities count as small, not as
savings); 4. fewest victims; 5. the latest start among the highest-priority victims;
6. otherwise the first candidate in the order the dry run found them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from plugins.defaultpreemption.candidates import Candidate
from plugins.defaultpreemption.victims import start_time

PRIORITY_SHIFT = 2**31


def _fewest_violations(c: Candidate) -> float:
    return -c.victims.num_pdb_violations


def _lowest_top_priority(c: Candidate) -> float:
    return -c.victims.pods[0].priority


def _smallest_priority_sum(c: Candidate) -> float:
    return -sum(p.priority + PRIORITY_SHIFT for p in c.victims.pods)


def _fewest_victims(c: Candidate) -> float:
    return -len(c.victims.pods)


def _latest_start_of_top_priority(c: Candidate) -> float:
    top = max(p.priority for p in c.victims.pods)
    return min(start_time(p) for p in c.victims.pods if p.priority == top)


RULES: tuple[Callable[[Candidate], float], ...] = (
    _fewest_violations,
    _lowest_top_priority,
    _smallest_priority_sum,
    _fewest_victims,
    _latest_start_of_top_priority,
)


def select_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
    remaining = list(candidates)
    if len(remaining) <= 1:
        return remaining[0] if remaining else None
    for rule in RULES:
        scores = [rule(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, score in zip(remaining, scores, strict=True) if score == best]
        if len(remaining) == 1:
            break
    return remaining[0]
