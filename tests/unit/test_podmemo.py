"""PodVersionMemo: one derivation per pod version, none cached for a pod without a resourceVersion."""

from __future__ import annotations

from scheduler.framework.podmemo import PodVersionMemo
from scheduler.model.objects import Pod


def pod(name: str, rv: str) -> Pod:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if rv:
        meta["resourceVersion"] = rv
    return Pod.from_raw({"metadata": meta, "spec": {"containers": []}})


class Counter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, p: Pod) -> str:
        self.calls.append((p.name, p.resource_version))
        return f"{p.name}@{p.resource_version}"


def test_one_derivation_per_version() -> None:
    memo: PodVersionMemo[str] = PodVersionMemo(16)
    derive = Counter()
    assert memo.get(pod("a", "1"), derive) == "a@1"
    assert memo.get(pod("a", "1"), derive) == "a@1"
    assert derive.calls == [("a", "1")]
    assert memo.get(pod("a", "2"), derive) == "a@2"
    assert memo.get(pod("b", "1"), derive) == "b@1"
    assert derive.calls == [("a", "1"), ("a", "2"), ("b", "1")]


def test_pod_without_resource_version_is_derived_every_time() -> None:
    memo: PodVersionMemo[str] = PodVersionMemo(16)
    derive = Counter()
    memo.get(pod("a", ""), derive)
    memo.get(pod("a", ""), derive)
    assert derive.calls == [("a", ""), ("a", "")]


def test_past_the_limit_the_memo_starts_again() -> None:
    memo: PodVersionMemo[str] = PodVersionMemo(2)
    derive = Counter()
    memo.get(pod("a", "1"), derive)
    memo.get(pod("b", "1"), derive)
    memo.get(pod("c", "1"), derive)  # clears a and b
    memo.get(pod("c", "1"), derive)
    memo.get(pod("a", "1"), derive)
    assert derive.calls == [("a", "1"), ("b", "1"), ("c", "1"), ("a", "1")]
