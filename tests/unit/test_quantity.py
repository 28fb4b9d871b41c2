from decimal import Decimal

import pytest

from scheduler.model.objects import InvalidObject, Pod
from scheduler.model.quantity import QuantityError, parse_quantity, to_int, to_milli


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(1024**2)),
        ("32Gi", Decimal(32 * 1024**3)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("2e3", Decimal(2000)),
        ("1E2", Decimal(100)),
        ("500n", Decimal("5e-7")),
        ("10u", Decimal("1e-5")),
        (".5", Decimal("0.5")),
        ("+3", Decimal(3)),
        (7, Decimal(7)),
    ],
)
def test_parse(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "1Xi", "--1", "1 Gi", "Gi", "1e", "1KiB"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match="quantity"):
        parse_quantity(text)


def test_rounding_up_like_kubernetes() -> None:
    assert to_milli("0.0001") == 1  # MilliValue rounds up
    assert to_milli("1.5") == 1500
    assert to_int("1.2") == 2
    assert to_int("500Mi") == 500 * 1024**2


def _pod(spec: dict[str, object]) -> Pod:
    return Pod.from_raw({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec})


def test_bad_quantity_names_object_and_field() -> None:
    with pytest.raises(InvalidObject) as err:
        _pod({"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "lots"}}}]})
    assert "pod ns/p" in str(err.value)
    assert "spec.containers[1].resources.requests.cpu" in str(err.value)


def test_effective_requests_sidecars_init_and_overhead() -> None:
    pod = _pod(
        {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "migrate", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}},
            ],
            "overhead": {"cpu": "100m"},
        }
    )
    # The init step "migrate" runs next to the sidecar: 2 + 0.5 = 2.5 cpu beats app + sidecar (1.5).
    assert pod.requests.milli_cpu == 2500 + 100
    assert pod.requests.memory == 1024**3
    # Non-zero (scoring) requests default missing cpu/memory: sidecar memory counts as 200Mi.
    assert pod.non_zero_memory == max(1024**3 + 200 * 1024**2, 512 * 1024**2 + 200 * 1024**2)


def test_containers_without_requests_score_as_defaults() -> None:
    pod = _pod({"containers": [{"name": "a"}, {"name": "b"}]})
    assert pod.requests.is_zero()
    assert pod.non_zero_milli_cpu == 200
    assert pod.non_zero_memory == 400 * 1024**2
