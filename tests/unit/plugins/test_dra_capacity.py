"""Consumable capacity, from upstream's incubating consumable_capacity_test.go.

Ported: get-consumed-capacity-from-request, violate-capacity-sharing, calculate-consumed-capacity,
safe-milli-value, use-milli, cmp-request-over-capacity-fatal-beats-soft. Not ported:
add-sub-allocating-consumed-capacity and insert-remove-allocating-consumed-capacity-collection,
which test Go's ConsumedCapacity map types (here plain dicts; the allocator table covers their use).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from plugins.dynamicresources.structured.capacity import (
    NOT_REPRESENTABLE,
    CapacityError,
    amount,
    consumed_amount,
    consumed_by_request,
    fits,
    format_amount,
    safe_milli,
    use_milli,
    violates_policy,
)

MAX_INT64 = "9223372036854775807"
MAX_INT64_P1 = "9223372036854775808"
MAX_INT64_M1 = "9223372036854775806"
TWO_POW64_P3 = "18446744073709551619"
TOO_BIG_FOR_MILLI = "9224372036854776E3"


def test_get_consumed_capacity_from_request() -> None:
    requested = {"requests": {"capacity-0": "1", "dummy": "1"}}
    capacity: dict[str, dict[str, Any]] = {
        # requested and with a default: the request
        "capacity-0": {"value": "2", "requestPolicy": {"default": "2", "validRange": {"min": "1"}}},
        # not requested, with a default: the default
        "capacity-1": {"value": "2", "requestPolicy": {"default": "1", "validRange": {"min": "1"}}},
        # not requested, no policy: the capacity's value
        "dummy": {"value": "1"},
    }
    consumed = consumed_by_request(requested, capacity, fractional=False)
    assert sorted(consumed) == ["capacity-0", "capacity-1", "dummy"]
    assert all(value.value == 1 for value in consumed.values())


FRACTIONAL_RANGE = {"default": "200m", "validRange": {"min": "200m", "max": "1", "step": "100m"}}


@pytest.mark.parametrize(
    ("requested", "policy", "fractional", "violates"),
    [
        pytest.param("1", None, False, False, id="no constraint"),
        pytest.param(
            "1", {"default": "1", "validRange": {"min": "1", "max": "2"}}, False, False, id="less than maximum"
        ),
        pytest.param(
            "2", {"default": "1", "validRange": {"min": "1", "max": "1"}}, False, True, id="more than maximum"
        ),
        pytest.param("1", {"default": "1", "validValues": ["1"]}, False, False, id="in set"),
        pytest.param("2", {"default": "1", "validValues": ["1"]}, False, True, id="not in set"),
        pytest.param("300m", FRACTIONAL_RANGE, True, False, id="fractional step aligned"),
        pytest.param("250m", FRACTIONAL_RANGE, True, True, id="fractional step not aligned"),
        pytest.param(
            TOO_BIG_FOR_MILLI,
            {"default": "1", "validRange": {"min": "1", "step": "1"}},
            True,
            True,
            id="requested value overflows milli representation",
        ),
    ],
)
def test_violates_policy(requested: str, policy: dict[str, Any] | None, fractional: bool, violates: bool) -> None:
    assert violates_policy(amount(requested).value, policy, fractional) is violates


@pytest.mark.parametrize(
    ("requested", "capacity_value", "policy", "fractional", "expected"),
    [
        pytest.param(None, "1", {}, False, "1", id="empty"),
        pytest.param(
            TWO_POW64_P3,
            TWO_POW64_P3,
            {"default": "0", "validRange": {"min": "0", "step": "3"}},
            False,
            None,
            id="request-above-maxint64-is-rejected",
        ),
        pytest.param(
            MAX_INT64,
            MAX_INT64_P1,
            {"default": "0", "validRange": {"min": "0", "step": "2"}},
            False,
            None,
            id="rounded-value-above-maxint64-is-rejected",
        ),
        pytest.param(
            MAX_INT64_M1,
            MAX_INT64,
            {"default": "1", "validRange": {"min": "1", "step": "2"}},
            False,
            MAX_INT64,
            id="max-safe-boundary-rounds-to-maxint64",
        ),
        pytest.param(None, "2", {"default": "1", "validRange": {"min": "1"}}, False, "1", id="min in range"),
        pytest.param(None, "2", {"default": "1", "validValues": ["1"]}, False, "1", id="default in set"),
        pytest.param("2", "2", {"default": "1", "validRange": {"min": "1"}}, False, "2", id="more than min in range"),
        pytest.param("1", "2", {"default": "1", "validRange": {"min": "2"}}, False, "2", id="less than min in range"),
        pytest.param(
            "2", "3", {"default": "1", "validRange": {"min": "1", "step": "2"}}, False, "3", id="with step (round up)"
        ),
        pytest.param(
            "2",
            "2",
            {"default": "1", "validRange": {"min": "1", "step": "1"}},
            False,
            "2",
            id="with step (no remaining)",
        ),
        pytest.param("250m", "1", FRACTIONAL_RANGE, True, "300m", id="fractional step round up (0.25 to 0.3)"),
        pytest.param("400m", "1", FRACTIONAL_RANGE, True, "400m", id="fractional step already aligned"),
        pytest.param("2", "3", {"default": "1", "validValues": ["1", "2", "3"]}, False, "2", id="valid value in set"),
        pytest.param("2", "3", {"default": "1", "validValues": ["1", "3"]}, False, "3", id="set (round up)"),
        pytest.param("3", "3", {"default": "1", "validValues": ["1", "2"]}, False, "3", id="larger than set"),
        pytest.param(
            TOO_BIG_FOR_MILLI,
            TOO_BIG_FOR_MILLI,
            {"default": "1", "validRange": {"min": "100m", "step": "100m"}},
            True,
            None,
            id="fractional-step-request-not-milli-representable-is-rejected",
        ),
        pytest.param(
            f"{int(MAX_INT64) - 1}m",
            f"{MAX_INT64}m",
            {"default": "100m", "validRange": {"min": "100m", "step": "100m"}},
            True,
            None,
            id="fractional-step-rounded-value-passes-milli-range-is-rejected",
        ),
    ],
)
def test_calculate_consumed_capacity(
    requested: str | None, capacity_value: str, policy: dict[str, Any], fractional: bool, expected: str | None
) -> None:
    capacity = {"value": capacity_value, "requestPolicy": policy}
    if expected is None:
        with pytest.raises(CapacityError, match=NOT_REPRESENTABLE):
            consumed_amount(None if requested is None else amount(requested), capacity, fractional)
    else:
        result = consumed_amount(None if requested is None else amount(requested), capacity, fractional)
        assert result.value == amount(expected).value


@pytest.mark.parametrize(
    ("quantity", "milli"),
    [
        pytest.param("1", 1000, id="whole number"),
        pytest.param("100m", 100, id="fractional milli"),
        pytest.param(TOO_BIG_FOR_MILLI, None, id="too large for milli (overflows int64)"),
    ],
)
def test_safe_milli_value(quantity: str, milli: int | None) -> None:
    assert safe_milli(amount(quantity).value) == milli


@pytest.mark.parametrize(
    ("valid_range", "fractional", "expected"),
    [
        pytest.param({"min": "200m", "max": "1", "step": "100m"}, False, False, id="fractional disabled"),
        pytest.param({"min": "200m", "max": "1", "step": "100m"}, True, True, id="all fractional, fits in milli"),
        pytest.param({"min": "1", "max": "3", "step": "1"}, True, True, id="all integer, fits in milli"),
        pytest.param({"min": TOO_BIG_FOR_MILLI, "step": "1"}, True, False, id="min overflows milli"),
        pytest.param({"min": "1", "step": "0"}, True, False, id="step too small (sub-milli)"),
    ],
)
def test_use_milli(valid_range: dict[str, str], fractional: bool, expected: bool) -> None:
    assert use_milli(valid_range, fractional) is expected


def test_cmp_request_over_capacity_fatal_beats_soft() -> None:
    """A request the range arithmetic cannot represent aborts, whichever capacity comes first."""
    capacity_one: dict[str, Any] = {"value": "1"}  # a request of 2 over-fills it: soft, skip the device
    capacity_big: dict[str, Any] = {"value": MAX_INT64_P1, "requestPolicy": {"validRange": {"min": "0", "step": "2"}}}
    request = {"requests": {"capacity-0": "2", "capacity-1": MAX_INT64}}
    for capacity in (
        {"capacity-0": capacity_one, "capacity-1": capacity_big},
        {"capacity-1": capacity_big, "capacity-0": capacity_one},
    ):
        with pytest.raises(CapacityError, match=NOT_REPRESENTABLE):
            fits(None, request, capacity, None, fractional=False)


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        (Decimal(2**30), "BinarySI", "1Gi"),
        (Decimal(1536), "BinarySI", "1536"),
        (Decimal(3), "BinarySI", "3"),
        (Decimal("0.3"), "DecimalSI", "300m"),
        (Decimal(2000), "DecimalSI", "2k"),
        (Decimal("1.5"), "BinarySI", "1500m"),
        (Decimal(1000), "DecimalExponent", "1e3"),
    ],
)
def test_format_amount_is_kubes_canonical_form(value: Decimal, kind: str, text: str) -> None:
    assert format_amount(value, kind) == text
