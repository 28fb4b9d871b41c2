"""The objects upstream scheduler_perf makes around its templates, as pure functions.

Owns: what k8s.io/kubernetes' test/integration/scheduler_perf and test/utils add to a template
before they send it: a node's name (generateName plus five random characters) and its
kubernetes.io/hostname label; the one node prepare strategy a createNodes op applies
(nodeAllocatableStrategy, else labelNodePrepareStrategy, else uniqueNodeLabelStrategy), with the
allocatable patch and per-node CSINode of NodeAllocatableStrategy; and, for a createPods op with
persistentVolume[Claim]TemplatePath, the pre-bound PersistentVolume, claim and pod of
CreatePodWithPersistentVolume; and a createPodGroups object's version (as_pod_group). (The
base pod of a createPods op without a template is upstream_run's BASE_POD.)

Must never: talk to the API (the executor sends what these return, in upstream's order), or add
anything to an object that upstream does not.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Mapping
from typing import Any

HOSTNAME_LABEL = "kubernetes.io/hostname"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
# k8s.io/apimachinery's rand.String alphabet (no vowels, no look-alike characters).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NODE_STRATEGIES = ("nodeAllocatableStrategy", "labelNodePrepareStrategy", "uniqueNodeLabelStrategy")
CLAIM_VOLUME = "vol"  # the pod volume's name CreatePodWithPersistentVolume gives every claim
POD_GROUP_API_VERSION = "scheduling.k8s.io/v1beta1"  # the typed client createPodGroups creates with

Raw = dict[str, Any]


def named_nodes(template: Mapping[str, Any], count: int, rng: random.Random) -> list[Raw]:
    """`count` nodes from one `template`; see name_nodes."""
    return name_nodes([copy.deepcopy(dict(template)) for _ in range(count)], rng)


def name_nodes(nodes: list[Raw], rng: random.Random) -> list[Raw]:
    """Each node named as upstream's node preparer names it (its own name, else generateName plus
    five random characters, drawn again on a clash as upstream's create retry does) and labelled
    kubernetes.io/hostname=<name>; the nodes are changed in place and returned."""
    taken: set[str] = set()
    for node in nodes:
        meta = node.setdefault("metadata", {})
        name = meta.get("name") or ""
        while not name or (not meta.get("name") and name in taken):
            name = meta.get("generateName", "") + "".join(rng.choices(NAME_ALPHABET, k=5))
        taken.add(name)
        meta["name"] = name
        meta.pop("generateName", None)
        meta.setdefault("labels", {})[HOSTNAME_LABEL] = name
    return nodes


def node_strategy(op: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The prepare strategy a createNodes op applies: upstream uses only the first one set."""
    for key in NODE_STRATEGIES:
        if op.get(key) is not None:
            return key, op[key]
    return None


def strategy_labels(strategy: tuple[str, Mapping[str, Any]] | None, index: int) -> dict[str, str]:
    """The labels the label strategies patch onto the index-th node (round robin over the values,
    or a fresh UUID per node); {} for the other strategies."""
    if strategy is None:
        return {}
    key, spec = strategy
    if key == "labelNodePrepareStrategy":
        values = spec["labelValues"]
        return {spec["labelKey"]: values[index % len(values)]}
    if key == "uniqueNodeLabelStrategy":
        return {spec["labelKey"]: str(uuid.uuid4())}
    return {}


def allocatable_patch(node: Mapping[str, Any], spec: Mapping[str, Any]) -> Raw | None:
    """NodeAllocatableStrategy's merge patch of a created node: each nodeAllocatable value that
    differs from the node's. Upstream sends it to the node itself, not its status subresource,
    and the apiserver keeps a node's status on such updates: it changes nothing, and the executor
    sends it only so that the cluster sees what upstream's sees."""
    current = (node.get("status") or {}).get("allocatable") or {}
    changed = {k: str(v) for k, v in (spec.get("nodeAllocatable") or {}).items() if current.get(k) != str(v)}
    return {"status": {"allocatable": changed}} if changed else None


def csi_node(node_name: str, spec: Mapping[str, Any]) -> Raw:
    """NodeAllocatableStrategy's CSINode of a node: one driver per csiNodeAllocatable entry with
    that allocatable, and the migrated-plugins annotation (empty when none are named)."""
    drivers = [
        {"name": driver, "nodeID": node_name, "allocatable": dict(allocatable or {})}
        for driver, allocatable in (spec.get("csiNodeAllocatable") or {}).items()
    ]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": node_name,
            "annotations": {MIGRATED_PLUGINS_ANNOTATION: ",".join(spec.get("migratedPlugins") or ())},
        },
        "spec": {"drivers": drivers},
    }


def pod_with_volume(
    pv_template: Mapping[str, Any],
    pvc_template: Mapping[str, Any],
    pod_template: Mapping[str, Any],
    namespace: str,
    index: int,
) -> tuple[Raw, Raw, Raw]:
    """(PersistentVolume, claim, pod) for the index-th pod of a createPods op in `namespace`, as
    CreatePodWithPersistentVolume makes them: claim pvc-<index> bound to PV <namespace>-vol-<index>
    (spec.volumeName), the PV pre-bound to the claim (claimRef without uid), a CSI PV's
    volumeHandle its name, an AWS EBS PV's volumeID vol-<index>, and the pod's volumes replaced by
    one volume of that claim. Statuses are left out: the apiserver resets them on create, and the
    executor sets both phases to Bound afterwards, as upstream does."""
    claim_name = f"pvc-{index}"
    pv = copy.deepcopy(dict(pv_template))
    pv_name = f"{namespace}-vol-{index}"
    pv.setdefault("metadata", {})["name"] = pv_name
    spec = pv.setdefault("spec", {})
    if spec.get("csi") is not None:
        spec["csi"]["volumeHandle"] = pv_name
    elif spec.get("awsElasticBlockStore") is not None:
        spec["awsElasticBlockStore"]["volumeID"] = f"vol-{index}"
    spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim_name, "apiVersion": "v1"}
    pv.pop("status", None)

    pvc = copy.deepcopy(dict(pvc_template))
    pvc.setdefault("metadata", {})["name"] = claim_name
    pvc["metadata"].pop("generateName", None)
    pvc.setdefault("spec", {})["volumeName"] = pv_name
    pvc.pop("status", None)

    pod = copy.deepcopy(dict(pod_template))
    pod.setdefault("spec", {})["volumes"] = [{"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": claim_name}}]
    return pv, pvc, pod


def bound(created: Mapping[str, Any]) -> Raw:
    """A created PV or claim with the status upstream writes next: phase Bound, nothing else."""
    return {**created, "status": {"phase": "Bound"}}


def with_signature(pod: Mapping[str, Any], index: int, batch_size: int) -> dict[str, Any]:
    """The pod with upstream's `signature` label (podTemplateWithParams): pods index // batch_size
    of one createPods op share a value, so with the default batch size of 1 every pod has its own."""
    signed = dict(pod)
    meta = dict(pod.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), "signature": f"signature-label-{index // batch_size}"}
    signed["metadata"] = meta
    return signed


def as_pod_group(obj: Mapping[str, Any]) -> Raw:
    """A rendered createPodGroups template as upstream sends it: decoded into the v1beta1
    PodGroup type and created through that version's client, so whatever apiVersion the template
    names (default_preemption's says v1alpha3) the object is a scheduling.k8s.io/v1beta1 PodGroup."""
    return {**obj, "apiVersion": POD_GROUP_API_VERSION, "kind": "PodGroup"}
