"""Nominator: pods nominated to a node by preemption, counted when filtering lower-priority pods."""

from __future__ import annotations

from scheduler.model.objects import Pod


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: Pod, node_name: str) -> None:
        self.delete(pod.uid)
        if not node_name:
            return
        self._by_node.setdefault(node_name, {})[pod.uid] = pod
        self._node_of[pod.uid] = node_name

    def delete(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._by_node[node]
            pods.pop(uid, None)
            if not pods:
                del self._by_node[node]

    def update(self, old: Pod | None, pod: Pod) -> None:
        """An unscheduled pod changed: its nomination follows status.nominatedNodeName.

        Only when neither version carries one is an in-memory nomination kept (the scheduler may
        have nominated the pod before the apiserver saw the status patch); a nominatedNodeName that
        was cleared deletes the nomination, as kube-scheduler's nominator does.
        """
        nominated = _nominated_node_name(pod)
        if not nominated and (old is None or not _nominated_node_name(old)):
            nominated = self._node_of.get(pod.uid, "")
        self.add(pod, nominated)

    def nominated_node(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def nodes(self) -> list[str]:
        """The nodes some pod is nominated to."""
        return list(self._by_node)

    def pods_for_node(self, node_name: str) -> list[Pod]:
        return list(self._by_node.get(node_name, {}).values())

    def __bool__(self) -> bool:
        return bool(self._node_of)


def _nominated_node_name(pod: Pod) -> str:
    nominated: str = (pod.raw.get("status") or {}).get("nominatedNodeName") or ""
    return nominated
