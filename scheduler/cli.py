"""Command line: `secondary-scheduler run` (and `python -m scheduler run`)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import structlog

from scheduler import gctune, logs
from scheduler.api.client import ApiError
from scheduler.api.http import KubeconfigError
from scheduler.api.leaderelection import LeadershipLost
from scheduler.config import ConfigError, parse_duration
from scheduler.features import DEFAULT_FEATURE_GATES, FeatureGateError, FeatureGates, parse_feature_gates


def _duration(value: str) -> float:
    """A Go duration ("15s", "1m30s"); a bare number counts as seconds."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parse_duration(value, "duration")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


FEATURE_GATES_HELP = (
    "A set of key=value pairs that describe feature gates for alpha/experimental features, as "
    "kube-scheduler's flag (e.g. GenericWorkload=true); v1.37.2's defaults for the rest"
)


def _feature_gates_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feature-gates", default="", metavar="KEY=BOOL,...", help=FEATURE_GATES_HELP)


def _feature_gates(value: str) -> FeatureGates:
    """Parsed gates; a refused value is reported as pflag reports a bad flag value, then exit 2."""
    if not value:
        return DEFAULT_FEATURE_GATES
    try:
        return parse_feature_gates(value)
    except FeatureGateError as exc:
        print(f'secondary-scheduler: invalid argument "{value}" for "--feature-gates" flag: {exc}', file=sys.stderr)
        raise SystemExit(2) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="secondary-scheduler", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the scheduler")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    run.add_argument("--config", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file")
    run.add_argument(
        "--scheduler-name",
        default="secondary-scheduler",
        help="schedulerName of the default profile when --config gives none (default: %(default)s)",
    )
    run.add_argument(
        "--secure-port",
        "--metrics-port",
        dest="metrics_port",
        type=int,
        default=10259,
        help="port of /metrics, /healthz, /livez, /readyz (default: %(default)s)",
    )
    run.add_argument("--bind-address", "--metrics-address", dest="metrics_address", default="0.0.0.0")
    run.add_argument(
        "--serve-plain-http",
        action="store_true",
        help="serve plain HTTP with no authentication or authorization (default: HTTPS, /metrics delegated to the "
        "apiserver through TokenReview and SubjectAccessReview, as kube-scheduler)",
    )
    run.add_argument("--tls-cert-file", help="serving certificate (default: self-signed, made at start)")
    run.add_argument("--tls-private-key-file", help="key of --tls-cert-file")
    _feature_gates_argument(run)
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    run.add_argument("--log-format", default="json", choices=["json", "console"])
    run.add_argument("--batch-window", type=float, default=0.01, help="kopf batching window in seconds")
    # Leader election: the config file's leaderElection, overridden by the flags given (as kube-scheduler).
    run.add_argument(
        "--leader-elect",
        default=None,
        action=argparse.BooleanOptionalAction,
        help="schedule only while holding the lease (default: true, as kube-scheduler)",
    )
    run.add_argument(
        "--leader-elect-resource-namespace",
        help="namespace of the Lease (default: $POD_NAMESPACE or kube-system)",
    )
    run.add_argument("--leader-elect-resource-name", help="name of the Lease (default: secondary-scheduler)")
    run.add_argument("--leader-elect-lease-duration", type=_duration, help="e.g. 15s (default: 15s)")
    run.add_argument("--leader-elect-renew-deadline", type=_duration, help="e.g. 10s (default: 10s)")
    run.add_argument("--leader-elect-retry-period", type=_duration, help="e.g. 2s (default: 2s)")
    # Client connection: as kube-scheduler's deprecated flags, ignored when --config is given.
    run.add_argument("--kube-api-qps", type=float, help="requests per second to the apiserver (default: 50)")
    run.add_argument("--kube-api-burst", type=int, help="burst of requests to the apiserver (default: 100)")
    run.add_argument("--kube-api-content-type", help="content type of requests (only application/json)")
    run.add_argument(
        "--assumed-pod-ttl",
        type=float,
        default=900.0,
        help="seconds before a bound-but-unconfirmed assumed pod is dropped; 0 never drops (default: %(default)s)",
    )
    explain = sub.add_parser("explain", help="say why a pod is pending (a dry scheduling cycle; writes nothing)")
    explain.add_argument("pod", help="pod name, or namespace/name")
    explain.add_argument("-n", "--namespace", default="default")
    explain.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    explain.add_argument("--config", help="KubeSchedulerConfiguration file the scheduler runs with")
    explain.add_argument("--scheduler-name", default="secondary-scheduler")
    _feature_gates_argument(explain)
    explain.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    explain.add_argument("--log-format", default="console", choices=["json", "console"])
    return parser


def _fail(exc: ConfigError | KubeconfigError | ApiError, api_prefix: str = "") -> int:
    """One line on stderr, no traceback; exit code 2 for bad input, 1 for the API."""
    if isinstance(exc, ConfigError):
        print(f"secondary-scheduler: invalid configuration: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, KubeconfigError):
        print(f"secondary-scheduler: {exc}", file=sys.stderr)
        return 2
    print(f"secondary-scheduler: {api_prefix}{exc}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    feature_gates = _feature_gates(args.feature_gates)
    logs.configure(args.log_level, json_output=args.log_format == "json")
    if args.command == "explain":
        from scheduler import explain
        from scheduler.app import Options

        namespace, _, name = args.pod.rpartition("/")
        try:
            print(
                explain.run(
                    Options(
                        kubeconfig=args.kubeconfig,
                        config=args.config,
                        scheduler_name=args.scheduler_name,
                        feature_gates=feature_gates,
                    ),
                    namespace or args.namespace,
                    name,
                )
            )
        except (ConfigError, KubeconfigError, ApiError) as exc:
            return _fail(exc)
        return 0
    if args.command == "run":
        from scheduler.app import Options, run
        from scheduler.serving import ServingError

        options = Options(
            kubeconfig=args.kubeconfig,
            config=args.config,
            scheduler_name=args.scheduler_name,
            metrics_port=args.metrics_port,
            metrics_address=args.metrics_address,
            plain_http=args.serve_plain_http,
            tls_cert_file=args.tls_cert_file,
            tls_key_file=args.tls_private_key_file,
            batch_window=args.batch_window,
            assumed_pod_ttl=args.assumed_pod_ttl,
            leader_elect=args.leader_elect,
            lease_namespace=args.leader_elect_resource_namespace,
            lease_name=args.leader_elect_resource_name,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
            kube_api_qps=args.kube_api_qps,
            kube_api_burst=args.kube_api_burst,
            kube_api_content_type=args.kube_api_content_type,
            feature_gates=feature_gates,
        )

        async def main_async() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await run(options, stop)

        gctune.configure()
        try:
            asyncio.run(main_async())
        except LeadershipLost as exc:
            # As kube-scheduler: one line, exit 1; the replica restarts as a standby.
            structlog.get_logger("app").error("Leaderelection lost", reason=str(exc))
            return 1
        except ServingError as exc:
            # One line, as kube-scheduler's "failed to listen on 0.0.0.0:10259: ... address already in
            # use", plus the flags that move the server elsewhere (another replica or kube-scheduler holds it).
            hint = " (choose another with --secure-port or --bind-address)" if exc.address else ""
            print(f"secondary-scheduler: cannot start: {exc}{hint}", file=sys.stderr)
            return 1
        except (ConfigError, KubeconfigError, ApiError) as exc:
            # Start-up reads (the informers' first lists) name the request and the apiserver's answer,
            # e.g. `namespaces is forbidden: User "…" cannot list resource "namespaces" …`.
            return _fail(exc, api_prefix="cannot start: ")
    return 0
