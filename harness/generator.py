"""Seeded random scenarios for the agreement harness, in the scenario file format.

generate(seed, index) returns one scenario as the mapping a tests/agreement/scenarios/*.yaml file
holds (agreement.parse_scenario reads both): 3-10 nodes with random capacity, labels, zones,
taints of all three effects, images and `unschedulable`; existing pods bound to them with
requests, host ports and pod (anti-)affinity; and one pending pod that mixes node selectors,
required and preferred node affinity, tolerations, required and preferred pod (anti-)affinity,
topology spread constraints of both kinds, host ports, images, init containers and sidecars,
pod-level resources and overhead (through a RuntimeClass).

Scenario `index` of `seed` depends on nothing else (not on how many are generated), so any one
of them can be run again alone: `python -m harness.agreement --seed N --generated K
--only gen-N-I`, or dumped as YAML with `--dump DIR` and kept as a hand-written scenario.

Owns: the vocabulary (labels, taints, images, apps) and the probabilities. Must never: produce an
object the apiserver rejects (pod-level requests cover the containers' aggregate, Gt/Lt values
are integers, one spread constraint per topologyKey and whenUnsatisfiable), or depend on any
global random state.
"""

from __future__ import annotations

import random
from typing import Any

Raw = dict[str, Any]

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONES = ("zone-a", "zone-b", "zone-c")
APPS = ("web", "db", "cache", "batch")
# Node labels: key -> values (rank is numeric, for Gt/Lt).
NODE_LABELS: dict[str, tuple[str, ...]] = {
    "disk": ("ssd", "hdd"),
    "tier": ("gold", "silver"),
    "rank": tuple(str(i) for i in range(1, 10)),
    "gpu": ("true",),
}
TAINT_KEYS: dict[str, tuple[str, ...]] = {
    "dedicated": ("infra", "batch"),
    "gpu": ("true",),
    "maintenance": ("true",),
}
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
IMAGES = (
    "registry.example/agreement/app-a:1",
    "registry.example/agreement/app-b:1",
    "registry.example/agreement/app-c:2",
    "registry.example/agreement/tools:3",
)
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
HOST_PORTS = (8080, 9000)
RUNTIME_CLASS = "agreement-overhead"
PROFILES = (("default", 0.7), ("most-allocated", 0.15), ("requested-to-capacity", 0.15))
MIB = 1 << 20


def scenario_name(seed: int, index: int) -> str:
    return f"gen-{seed}-{index}"


def generate(seed: int, index: int) -> Raw:
    """Scenario `index` of `seed`, as a scenario file's mapping (plus its `name`)."""
    return _Generator(random.Random(f"agreement/{seed}/{index}")).scenario(scenario_name(seed, index))


def generate_many(seed: int, count: int) -> list[Raw]:
    return [generate(seed, index) for index in range(count)]


class _Generator:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.features: list[str] = []
        self.plugins: set[str] = {"NodeResourcesFit", "DefaultBinder"}

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ---- quantities --------------------------------------------------------------------------

    def cpu(self, low: int, high: int, step: int = 100) -> str:
        return f"{self.rng.randrange(low, high + 1, step)}m"

    def memory(self, low_mi: int, high_mi: int, step_mi: int = 64) -> str:
        return f"{self.rng.randrange(low_mi, high_mi + 1, step_mi)}Mi"

    def requests(self, cpu_high: int = 1500, memory_high: int = 3072, p_each: float = 0.8) -> Raw:
        out: Raw = {}
        if self.chance(p_each):
            out["cpu"] = self.cpu(50, cpu_high, 50)
        if self.chance(p_each):
            out["memory"] = self.memory(64, memory_high)
        return out

    # ---- the scenario ------------------------------------------------------------------------

    def scenario(self, name: str) -> Raw:
        images = {image: self.rng.randrange(20, 1500) * MIB for image in IMAGES}
        nodes = [self.node(f"n{i}", images) for i in range(self.rng.randint(3, 10))]
        existing = [self.existing_pod(f"e{i}", nodes) for i in range(self.rng.randint(0, 8))]
        pending, objects = self.pending_pod("p", nodes)
        profile = self.rng.choices([p for p, _ in PROFILES], [w for _, w in PROFILES])[0]
        summary = self.summary(nodes, existing, profile)
        out: Raw = {
            "name": name,
            "description": summary,
            "plugins": sorted(self.plugins),
            "profile": profile,
            "nodes": nodes,
            "existingPods": existing,
            "pods": [pending],
        }
        if objects:
            out["objects"] = objects
        if profile == "default":
            del out["profile"]
        return out

    def summary(self, nodes: list[Raw], existing: list[Raw], profile: str) -> str:
        tainted = sum(1 for node in nodes if node.get("taints"))
        cordoned = sum(1 for node in nodes if node.get("unschedulable"))
        parts = [f"{len(nodes)} nodes ({tainted} tainted, {cordoned} unschedulable)", f"{len(existing)} existing pods"]
        if profile != "default":
            parts.append(f"profile {profile}")
        features = ", ".join(self.features) if self.features else "plain requests"
        return f"{'; '.join(parts)}; pending pod: {features}."

    def node(self, name: str, images: dict[str, int]) -> Raw:
        rng = self.rng
        node: Raw = {
            "name": name,
            "cpu": rng.choice(("1", "2", "2500m", "4", "8")),
            "memory": rng.choice(("2Gi", "4Gi", "8Gi", "16Gi")),
        }
        if self.chance(0.1):
            node["pods"] = str(rng.randint(1, 4))
        if self.chance(0.85):
            node["zone"] = rng.choice(ZONES)
        labels = {key: rng.choice(values) for key, values in NODE_LABELS.items() if self.chance(0.45)}
        if labels:
            node["labels"] = labels
        taints = []
        for key in rng.sample(sorted(TAINT_KEYS), k=rng.choices((0, 1, 2), (0.55, 0.3, 0.15))[0]):
            taint = {"key": key, "effect": rng.choice(EFFECTS)}
            if self.chance(0.8):
                taint["value"] = rng.choice(TAINT_KEYS[key])
            taints.append(taint)
        if taints:
            node["taints"] = taints
        if self.chance(0.1):
            node["unschedulable"] = True
        held = [image for image in IMAGES if self.chance(0.35)]
        if held:
            # Mostly one size per image name, as registries report; sometimes a node reports its own.
            node["images"] = {
                image: images[image] if self.chance(0.85) else rng.randrange(20, 1500) * MIB for image in held
            }
        return node

    def selector(self, app: str) -> Raw:
        if self.chance(0.7):
            return {"matchLabels": {"app": app}}
        values = sorted({app, self.rng.choice(APPS)})
        return {"matchExpressions": [{"key": "app", "operator": "In", "values": values}]}

    def topology_key(self) -> str:
        return HOSTNAME_LABEL if self.chance(0.5) else ZONE_LABEL

    def affinity_term(self) -> Raw:
        return {"labelSelector": self.selector(self.rng.choice(APPS)), "topologyKey": self.topology_key()}

    def weighted_terms(self) -> list[Raw]:
        return [
            {"weight": self.rng.randint(1, 100), "podAffinityTerm": self.affinity_term()}
            for _ in range(self.rng.randint(1, 2))
        ]

    def existing_pod(self, name: str, nodes: list[Raw]) -> Raw:
        rng = self.rng
        pod: Raw = {
            "name": name,
            "node": rng.choice(nodes)["name"],
            "labels": {"app": rng.choice(APPS)},
        }
        pod.update(self.requests(cpu_high=2000, memory_high=4096, p_each=0.75))
        if self.chance(0.15):
            pod["hostPort"] = rng.choice(HOST_PORTS)
        affinity: Raw = {}
        if self.chance(0.15):
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [self.affinity_term()]}
        if self.chance(0.1):
            affinity.setdefault("podAntiAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = (
                self.weighted_terms()
            )
        if self.chance(0.1):
            affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": self.weighted_terms()}
        if self.chance(0.05):
            affinity.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
                self.affinity_term()
            ]
        if affinity:
            pod["spec"] = {"affinity": affinity}
        return pod

    # ---- the pending pod ---------------------------------------------------------------------

    def container(self, name: str, *, image: bool, cpu_high: int, memory_high: int) -> Raw:
        container: Raw = {"name": name, "image": self.rng.choice(IMAGES) if image else PAUSE_IMAGE}
        requests = self.requests(cpu_high, memory_high)
        if requests:
            container["resources"] = {"requests": requests}
        return container

    def node_expression(self) -> Raw:
        rng = self.rng
        key = rng.choice((*NODE_LABELS, ZONE_LABEL))
        operator = rng.choice(
            ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
            if key == "rank"
            else ("In", "NotIn", "Exists", "DoesNotExist")
        )
        expression: Raw = {"key": key, "operator": operator}
        if operator in ("Gt", "Lt"):
            expression["values"] = [str(rng.randint(1, 9))]
        elif operator in ("In", "NotIn"):
            pool = ZONES if key == ZONE_LABEL else NODE_LABELS[key]
            expression["values"] = sorted(set(rng.sample(pool, k=rng.randint(1, min(2, len(pool))))))
        return expression

    def node_term(self) -> Raw:
        return {"matchExpressions": [self.node_expression() for _ in range(self.rng.randint(1, 2))]}

    def toleration(self, nodes: list[Raw]) -> Raw:
        rng = self.rng
        taints = [taint for node in nodes for taint in node.get("taints") or ()]
        if self.chance(0.05):
            return {"operator": "Exists"}
        if taints and self.chance(0.75):
            taint = rng.choice(taints)
            key, value, effect = taint["key"], taint.get("value"), taint["effect"]
        else:
            key = rng.choice(sorted(TAINT_KEYS))
            value, effect = rng.choice(TAINT_KEYS[key]), rng.choice(EFFECTS)
        toleration: Raw = {"key": key}
        if value is None or self.chance(0.3):
            toleration["operator"] = "Exists"
        else:
            toleration.update(operator="Equal", value=value)
        if self.chance(0.7):
            toleration["effect"] = effect
            if effect == "NoExecute" and self.chance(0.3):
                toleration["tolerationSeconds"] = rng.randint(0, 600)
        return toleration

    def spread_constraints(self, app: str) -> list[Raw]:
        rng = self.rng
        constraints = []
        seen: set[tuple[str, str]] = set()
        for _ in range(rng.randint(1, 2)):
            key, when = self.topology_key(), rng.choice(("DoNotSchedule", "ScheduleAnyway"))
            if (key, when) in seen:
                continue
            seen.add((key, when))
            constraint: Raw = {
                "maxSkew": rng.randint(1, 2),
                "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": self.selector(app if self.chance(0.7) else rng.choice(APPS)),
            }
            if when == "DoNotSchedule" and self.chance(0.2):
                constraint["minDomains"] = rng.randint(1, 4)
            if self.chance(0.2):
                constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
            if self.chance(0.2):
                constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
            if self.chance(0.1):
                constraint["matchLabelKeys"] = ["tier"]
            constraints.append(constraint)
        return constraints

    def pending_pod(self, name: str, nodes: list[Raw]) -> tuple[Raw, list[Raw]]:
        rng, features, plugins = self.rng, self.features, self.plugins
        app = rng.choice(APPS)
        labels = {"app": app}
        spec: Raw = {}
        objects: list[Raw] = []
        with_images = self.chance(0.5)
        containers = [
            self.container(f"c{i}", image=with_images, cpu_high=1500, memory_high=3072)
            for i in range(rng.randint(1, 2))
        ]
        if with_images:
            features.append("images")
            plugins.add("ImageLocality")
        init: list[Raw] = []
        if self.chance(0.2):
            sidecar = self.container("sidecar", image=False, cpu_high=800, memory_high=1024)
            init.append({**sidecar, "restartPolicy": "Always"})
            features.append("sidecar")
        if self.chance(0.25):
            init.append(self.container("init", image=False, cpu_high=3000, memory_high=4096))
            features.append("init container")
        if init:
            rng.shuffle(init)
            spec["initContainers"] = init
        spec["containers"] = containers
        if self.chance(0.15):
            port = rng.choice(HOST_PORTS)
            containers[0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
            features.append("host port")
            plugins.add("NodePorts")
        if self.chance(0.2):
            spec["resources"] = {"requests": self.pod_level_requests(containers, init)}
            features.append("pod-level resources")
        if self.chance(0.15):
            objects.append(
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": {"name": RUNTIME_CLASS},
                    "handler": "runc",
                    "overhead": {"podFixed": {"cpu": self.cpu(50, 500, 50), "memory": self.memory(32, 512, 32)}},
                }
            )
            spec["runtimeClassName"] = RUNTIME_CLASS
            features.append("overhead")
        if self.chance(0.25):
            node = rng.choice(nodes)
            choices = {**(node.get("labels") or {}), **({ZONE_LABEL: node["zone"]} if "zone" in node else {})}
            if choices and self.chance(0.8):
                key = rng.choice(sorted(choices))
                spec["nodeSelector"] = {key: choices[key]}
            else:
                key = rng.choice(sorted(NODE_LABELS))
                spec["nodeSelector"] = {key: rng.choice(NODE_LABELS[key])}
            features.append("nodeSelector")
            plugins.add("NodeAffinity")
        affinity: Raw = {}
        if self.chance(0.25):
            terms = [self.node_term() for _ in range(rng.randint(1, 2))]
            affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
            features.append("required node affinity")
            plugins.add("NodeAffinity")
        if self.chance(0.3):
            preferred = [
                {"weight": rng.randint(1, 100), "preference": self.node_term()} for _ in range(rng.randint(1, 3))
            ]
            affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
            features.append("preferred node affinity")
            plugins.add("NodeAffinity")
        for kind, p_required, p_preferred in (("podAffinity", 0.15, 0.2), ("podAntiAffinity", 0.2, 0.2)):
            if self.chance(p_required):
                affinity.setdefault(kind, {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
                    self.affinity_term() for _ in range(rng.randint(1, 2))
                ]
                features.append(f"required {kind}")
                plugins.add("InterPodAffinity")
            if self.chance(p_preferred):
                affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = self.weighted_terms()
                features.append(f"preferred {kind}")
                plugins.add("InterPodAffinity")
        if affinity:
            spec["affinity"] = affinity
        if self.chance(0.5):
            spec["tolerations"] = [self.toleration(nodes) for _ in range(rng.randint(1, 3))]
            features.append("tolerations")
        if self.chance(0.35):
            constraints = self.spread_constraints(app)
            spec["topologySpreadConstraints"] = constraints
            if any(c.get("matchLabelKeys") for c in constraints):
                labels["tier"] = rng.choice(NODE_LABELS["tier"])
            kinds = sorted({c["whenUnsatisfiable"] for c in constraints})
            features.append(f"topology spread ({', '.join(kinds)})")
            plugins.add("PodTopologySpread")
        plugins.update(("TaintToleration", "NodeUnschedulable"))
        return {"name": name, "labels": labels, "spec": spec}, objects

    def pod_level_requests(self, containers: list[Raw], init: list[Raw]) -> Raw:
        """Pod-level requests at least the containers' aggregate (validation demands it) and some
        more; for one or both of cpu and memory."""
        out: Raw = {}
        resources = [r for r in ("cpu", "memory") if self.chance(0.7)] or ["cpu"]
        for resource in resources:
            # A bound that covers any aggregate: the sum of every container and init container.
            total = sum(_amount(c, resource) for c in (*containers, *init))
            extra = self.rng.randint(0, 1500) if resource == "cpu" else self.rng.randint(0, 2048)
            out[resource] = f"{total + extra}m" if resource == "cpu" else f"{total + extra}Mi"
        return out


def _amount(container: Raw, resource: str) -> int:
    """A container's request in millicores (cpu) or MiB (memory) as this module writes them."""
    value = str(((container.get("resources") or {}).get("requests") or {}).get(resource, "0"))
    for suffix in ("m", "Mi"):
        if value.endswith(suffix):
            return int(value[: -len(suffix)])
    return int(value)
