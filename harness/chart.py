"""The Helm chart (charts/secondary-scheduler) against a real control plane, for the cluster tests.

Owns: rendering the chart with the helm the control-plane build makes (`helm template`), applying
rendered manifests with kubectl (the apiserver validates every object), minting a ServiceAccount
token (TokenRequest), and reading the rendered Deployment's container and ConfigMap.
Must never: install anything but into the given control plane, or change the chart's output (a test
that runs "what the chart says" must run exactly that).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import REPO_ROOT, ControlPlane, ControlPlaneError, binary

CHART_DIR = REPO_ROOT / "charts" / "secondary-scheduler"
DEPLOY_DIR = REPO_ROOT / "deploy"
# What deploy/ is rendered with (and the drift test compares against).
DEPLOY_RELEASE = "secondary-scheduler"
DEPLOY_NAMESPACE = "secondary-scheduler"


def helm(*args: str) -> str:
    """Run the pinned helm (built on first use); its stdout. Fails with helm's own message."""
    proc = subprocess.run(
        [str(binary("helm")), *args], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise ControlPlaneError(f"helm {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def render(
    release: str = DEPLOY_RELEASE,
    namespace: str = DEPLOY_NAMESPACE,
    values: Mapping[str, Any] | None = None,
) -> str:
    """`helm template` of the chart; `values` as a values file on top of values.yaml."""
    args = ["template", release, str(CHART_DIR), "--namespace", namespace]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as extra:
        if values:
            yaml.safe_dump(dict(values), extra)
            extra.flush()
            args += ["--values", extra.name]
        return helm(*args)


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(docs: Sequence[Mapping[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if len(matches) != 1:
        raise LookupError(f"{len(matches)} rendered {kind} objects named {name or '*'}")
    return dict(matches[0])


def apply(plane: ControlPlane, docs: Sequence[Mapping[str, Any]], namespace: str) -> None:
    """Create `namespace` and apply `docs` there with the admin kubeconfig."""
    plane.http_request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    proc = subprocess.run(
        [str(binary("kubectl")), f"--kubeconfig={plane.kubeconfig}", "apply", "--server-side", "-f", "-"],
        input=yaml.safe_dump_all(list(docs)),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise ControlPlaneError(f"kubectl apply failed: {proc.stderr.strip()}")


def service_account_token(plane: ControlPlane, namespace: str, name: str, seconds: int = 3600) -> str:
    """A bound token for the ServiceAccount, as the kubelet gets one for a pod (TokenRequest)."""
    status, body = plane.http_request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}},
    )
    if status != 201:
        raise ControlPlaneError(f"TokenRequest for {namespace}/{name}: HTTP {status}: {body.decode(errors='replace')}")
    token: str = json.loads(body)["status"]["token"]
    return token


def token_kubeconfig(plane: ControlPlane, token: str, path: Path) -> Path:
    """A kubeconfig for `token` (TLS verified against the plane's CA)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": plane.server, "certificate-authority": str(plane.ca_file)}}
        ],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "sa"}}],
        "current-context": "local",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def scheduler_container(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    deployment = find(docs, "Deployment")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "scheduler"]
    return dict(container)


def config_file(docs: Sequence[Mapping[str, Any]]) -> str:
    """The KubeSchedulerConfiguration the chart's ConfigMap carries."""
    configmaps = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in (d.get("data") or {})]
    (configmap,) = configmaps
    text: str = configmap["data"]["config.yaml"]
    return text


def promql(docs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(where, expression) for every PromQL expression in rendered manifests: each rule of each
    PrometheusRule, and of each Grafana dashboard ConfigMap every panel target and every query
    variable's `label_values(<selector>, <label>)` selector. Grafana's `$variables` stay as written.
    A variable query of another form is a LookupError (a check over "every expression" would
    otherwise pass over it silently)."""
    found: list[tuple[str, str]] = []
    for doc in docs:
        if doc["kind"] == "PrometheusRule":
            for group in doc["spec"]["groups"]:
                for rule in group["rules"]:
                    found.append((f"rule {rule.get('alert') or rule.get('record')}", rule["expr"]))
        elif doc["kind"] == "ConfigMap":
            for key, text in (doc.get("data") or {}).items():
                if not key.endswith(".json"):
                    continue
                dashboard = json.loads(text)
                for variable in dashboard.get("templating", {}).get("list", []):
                    if variable["type"] != "query":
                        continue
                    query = variable["query"]
                    query = query["query"] if isinstance(query, Mapping) else query
                    selector = re.fullmatch(r"label_values\((.+),\s*\w+\)", query.strip())
                    if selector is None:
                        raise LookupError(
                            f"dashboard {key} variable {variable['name']}: query {query!r} not understood"
                        )
                    found.append((f"variable {variable['name']}", selector.group(1)))
                for panel in dashboard.get("panels", []):
                    for target in panel.get("targets", []):
                        found.append((f"panel {panel['title']}", target["expr"]))
    return found


DEPLOY_HEADER = (
    "# Rendered from charts/secondary-scheduler with its default values (release and namespace\n"
    f"# {DEPLOY_RELEASE!r}) by `make deploy`; do not edit by hand: tests/cluster/test_chart.py fails on drift.\n"
)


def deploy_manifests() -> str:
    """What deploy/secondary-scheduler.yaml must contain."""
    return DEPLOY_HEADER + render()


def main() -> None:
    """`make deploy`: write deploy/secondary-scheduler.yaml."""
    DEPLOY_DIR.mkdir(exist_ok=True)
    (DEPLOY_DIR / "secondary-scheduler.yaml").write_text(deploy_manifests())


if __name__ == "__main__":
    main()


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _container_env(container: Mapping[str, Any], pod_name: str, namespace: str) -> dict[str, str]:
    """The container's env, with the downward-API fields a kubelet fills in."""
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def mount_paths(docs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [SERVICE_ACCOUNT_DIR, *(m["mountPath"] for m in scheduler_container(docs).get("volumeMounts") or [])]


@contextlib.contextmanager
def host_mount_points(paths: Sequence[str]) -> Iterator[None]:
    """Empty directories for `paths` where the host has none (mounted over only inside private
    mount namespaces); removed again afterwards."""
    created: list[Path] = []
    for path in map(Path, paths):
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for directory in reversed(missing):
            directory.mkdir()
            created.append(directory)
    try:
        yield
    finally:
        for directory in reversed(created):
            directory.rmdir()


def _runtime_paths() -> list[Path]:
    """What the scheduler command needs from this machine: the interpreter's prefixes (the venv and
    the installation it was made from), every import path and the checkout (an editable install
    imports from it); nested paths folded into their outermost folder."""
    candidates = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.base_exec_prefix)}
    candidates |= {Path(p) for p in sys.path if p}
    candidates.add(REPO_ROOT)
    folders = [c for c in candidates if c.is_dir()]
    found = sorted({c.resolve() for c in folders} | {c.absolute() for c in folders})
    return [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]


def run_as_kubelet(
    plane: ControlPlane,
    docs: Sequence[Mapping[str, Any]],
    token: str,
    pod_name: str,
    namespace: str,
    log_path: Path,
) -> subprocess.Popen[bytes]:
    """Start the rendered Deployment's container the way a kubelet would, on this machine.

    A private mount namespace (`unshare -m`; needs root) gets the pod's volumes at the container's
    mount paths: each ConfigMap volume's files, each emptyDir as a tmpfs (mounted last: it may hide
    the host's /tmp), and the service-account volume at /var/run/secrets/kubernetes.io/serviceaccount;
    an emptyDir that would hide this interpreter, its libraries or the checkout (a clone under /tmp)
    gets those bound back in, read-only, at their own paths (in the image they live outside /tmp);
    the root filesystem is remounted read-only there (readOnlyRootFilesystem) and the command runs
    with the container's command, args and env, plus KUBERNETES_SERVICE_HOST/PORT
    pointing at the plane's apiserver (in-cluster mode: no kubeconfig). The command is looked up in
    this interpreter's bin folder (the image's PATH). It keeps this process' UID: the interpreter
    may live where UID 65532 cannot read (tests/image runs the image as 65532). The mount points must
    exist on the host (`host_mount_points`).
    """
    deployment = find(docs, "Deployment")
    container = scheduler_container(docs)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    staging = Path(tempfile.mkdtemp(prefix=f"{pod_name}-", dir=plane.workdir))
    mounts: list[tuple[str, Path | None]] = []  # (mount path, files to copy in; None: an empty tmpfs)
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            source = staging / mount["name"]
            source.mkdir()
            configmap = find(docs, "ConfigMap", volume["configMap"]["name"])
            for key, value in configmap["data"].items():
                (source / key).write_text(value)
            mounts.append((mount["mountPath"], source))
        elif "emptyDir" in volume:
            mounts.append((mount["mountPath"], None))
        else:
            raise LookupError(f"volume {mount['name']}: only configMap and emptyDir volumes are run here")
    account = staging / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(token)
    (account / "ca.crt").write_text(plane.ca_file.read_text())
    (account / "namespace").write_text(namespace)
    mounts.insert(0, (SERVICE_ACCOUNT_DIR, account))
    mounts.sort(key=lambda m: m[1] is None)  # copies first, while the sources are still visible
    # The shell works in `staging`: an emptyDir prepared there stays reachable by a relative path
    # (mount -c: not canonicalised to the absolute one) after /tmp, which may hold it, is covered.
    script = [f"cd {staging}", "set -e", "mount --make-rprivate /", "mount -o remount,bind,ro /"]
    placed: list[str] = []
    runtime = _runtime_paths()
    for index, (path, source) in enumerate(mounts):
        if not Path(path).is_dir():
            raise FileNotFoundError(f"mount point {path} missing on the host (see host_mount_points)")
        kept = [k for k in runtime if k.is_relative_to(path)]
        if source is None and kept:
            # Built aside while everything is visible, the hidden paths bound into it, then moved
            # over `path` (-n: mount(8) cannot record the move in its table on a read-only root).
            aside = f"emptydir-{index}"
            (staging / aside).mkdir()
            script.append(f"mount -t tmpfs -o size=16m,mode=0755 tmpfs {staging / aside}")
            for keep in kept:
                target = staging / aside / keep.relative_to(path)
                script.append(f"mkdir -p {target} && mount --rbind {keep} {target}")
                script.append(f"mount -o remount,bind,ro {target}")
            placed.append(f"mount -n -c --move {aside} {path}")
            continue
        placed.append(f"mount -t tmpfs -o size=16m,mode=0755 tmpfs {path}")
        if source is not None:
            placed.append(f"cp -r {source}/. {path}/ && chmod -R a+rX {path}")
    script += placed
    script.append('cd / && exec "$@"')
    env = _container_env(container, pod_name, namespace)
    env.update(
        PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
        KUBERNETES_SERVICE_HOST=plane.server.split("//")[1].rsplit(":", 1)[0],
        KUBERNETES_SERVICE_PORT=plane.server.rsplit(":", 1)[1],
    )
    command = [
        "unshare",
        "-m",
        "sh",
        "-c",
        "\n".join(script),
        "sh",
        "env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        *container["command"],
        *container["args"],
    ]
    with log_path.open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def metrics_reader_token(plane: ControlPlane, namespace: str, account: str) -> str:
    """A token of a new ServiceAccount bound to the chart's metrics-reader ClusterRole (what the
    chart's `serviceMonitor.prometheusServiceAccounts` binds for Prometheus)."""
    reader = find(
        documents(render("reader", namespace)),
        "ClusterRole",
        "reader-secondary-scheduler-metrics-reader",
    )
    reader["metadata"]["name"] = f"{namespace}-{account}-metrics-reader"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": reader["metadata"]["name"]},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": namespace},
    }
    apply(plane, [reader, binding, service_account], namespace)
    return service_account_token(plane, namespace, account)
