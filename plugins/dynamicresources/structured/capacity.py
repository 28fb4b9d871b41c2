"""Consumable capacity (DRAConsumableCapacity, DRAFractionalCapacityRange): request policies.

Owns what upstream's incubating consumable_capacity.go decides: how much of a device's capacity
one allocation consumes (the request, rounded up to the policy's valid range or valid values, or
the policy's default), whether that violates the policy, and whether it still fits next to what
is already allocated. Amounts are exact (kube compares quantities exactly); the int64 and
milli-value arithmetic of the range rounding follows kube, including its overflow checks.
Must never read the API; an amount it cannot represent is an error naming the capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

from scheduler.model.quantity import INT64_MAX, QuantityError, parse

from .types import ConsumedCapacity

_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


class CapacityError(ValueError):
    """A capacity request the range arithmetic cannot represent, or a negative amount."""


NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"
NEGATIVE = "capacity value is negative"


class Amount(NamedTuple):
    """A quantity's exact value and the text it is written as in a result."""

    value: Decimal
    text: str


@lru_cache(maxsize=4096)
def amount(raw: str | int) -> Amount:
    """The quantity written as `raw`; parsed once per distinct text (slices repeat a few)."""
    text = str(raw)
    try:
        return Amount(parse(text).exact, text)
    except QuantityError as exc:
        raise CapacityError(str(exc)) from exc


def _format_kind(text: str) -> str:
    if text.endswith(_BINARY_SUFFIXES):
        return "BinarySI"
    if "e" in text.lower():
        return "DecimalExponent"
    return "DecimalSI"


def format_amount(value: Decimal, kind: str) -> str:
    """resource.Quantity's canonical String() for a whole or milli value in the given format."""
    if kind == "BinarySI" and value == value.to_integral_value() and abs(value) >= 1024:
        whole = int(value)
        exponent = 0
        while exponent < 6 and whole % 1024 == 0 and whole != 0:
            whole //= 1024
            exponent += 1
        return f"{whole}{('', *_BINARY_SUFFIXES)[exponent]}"
    milli = int(value * 1000)
    if milli % 1000:
        return f"{milli}m"
    whole, exponent = milli // 1000, 0
    while whole != 0 and whole % 1000 == 0 and exponent < 18:
        whole //= 1000
        exponent += 3
    if kind == "DecimalExponent":
        return f"{whole}e{exponent}" if exponent else str(whole)
    return f"{whole}{ {0: '', 3: 'k', 6: 'M', 9: 'G', 12: 'T', 15: 'P', 18: 'E'}[exponent] }"


def _ceil(value: Decimal) -> int:
    whole = int(value)
    return whole + 1 if value > whole else whole


def safe_milli(value: Decimal) -> int | None:
    """The value in thousandths when that is exact and fits int64 (safeMilliValue)."""
    milli = value * 1000
    if milli != milli.to_integral_value() or abs(milli) > INT64_MAX:
        return None
    return int(milli)


def use_milli(valid_range: Mapping[str, Any], fractional: bool) -> bool:
    if not fractional:
        return False
    for key in ("min", "max", "step"):
        raw = valid_range.get(key)
        if raw is None:
            continue
        milli = safe_milli(amount(raw).value)
        if milli is None or (key == "step" and milli < 1):
            return False
    return True


def _round_up_range(requested: Amount, valid_range: Mapping[str, Any], fractional: bool) -> Amount:
    minimum = amount(valid_range["min"])
    if requested.value < minimum.value:
        return minimum
    raw_step = valid_range.get("step")
    if raw_step is None:
        return requested
    step = amount(raw_step)
    kind = _format_kind(step.text)
    if use_milli(valid_range, fractional):
        requested_milli = safe_milli(requested.value)
        if requested_milli is None:
            raise CapacityError(f"{NOT_REPRESENTABLE}: request {requested.text} is not a representable milli value")
        step_milli = safe_milli(step.value) or 1
        min_milli = safe_milli(minimum.value) or 0
        steps = -(-(requested_milli - min_milli) // step_milli)
        if steps > (INT64_MAX - min_milli) // step_milli:
            raise CapacityError(
                f"{NOT_REPRESENTABLE}: rounding request {requested.text} "
                "up to the next step passes the milli-value range"
            )
        value = Decimal(min_milli + step_milli * steps) / 1000
        return Amount(value, format_amount(value, kind))
    if requested.value > INT64_MAX:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {requested.text} exceeds MaxInt64")
    step_int, min_int = _ceil(step.value), _ceil(minimum.value)
    steps = -(-(_ceil(requested.value) - min_int) // step_int)
    if min_int >= 0 and steps > (INT64_MAX - min_int) // step_int:
        raise CapacityError(
            f"{NOT_REPRESENTABLE}: rounding request {requested.text} up to the next step passes MaxInt64"
        )
    value = Decimal(min_int + step_int * steps)
    return Amount(value, format_amount(value, kind))


def consumed_amount(requested: Amount | None, capacity: Mapping[str, Any], fractional: bool) -> Amount:
    """calculateConsumedCapacity: what one allocation takes of one capacity."""
    policy = capacity.get("requestPolicy")
    if requested is None:
        if policy and policy.get("default") is not None:
            return amount(policy["default"])
        return amount(capacity.get("value", "0"))
    if not policy:
        return requested
    valid_range = policy.get("validRange")
    if valid_range is not None and valid_range.get("min") is not None:
        return _round_up_range(requested, valid_range, fractional)
    valid_values = policy.get("validValues")
    if valid_values is not None:
        for raw in valid_values:
            candidate = amount(raw)
            if requested.value <= candidate.value:
                return candidate
    return requested


def violates_policy(consumed: Decimal, policy: Mapping[str, Any] | None, fractional: bool) -> bool:
    if not policy:
        return False
    if policy.get("default") is not None and consumed == amount(policy["default"]).value:
        return False
    valid_range = policy.get("validRange")
    if valid_range is not None:
        if valid_range.get("max") is not None and consumed > amount(valid_range["max"]).value:
            return True
        if valid_range.get("step") is not None:
            step, minimum = amount(valid_range["step"]).value, amount(valid_range["min"]).value
            if use_milli(valid_range, fractional):
                requested_milli = safe_milli(consumed)
                if requested_milli is None:
                    return True
                return (requested_milli - (safe_milli(minimum) or 0)) % (safe_milli(step) or 1) != 0
            return (_ceil(consumed) - _ceil(minimum)) % _ceil(step) != 0
        return False
    valid_values = policy.get("validValues")
    if valid_values:
        return all(consumed != amount(raw).value for raw in valid_values)
    return False


def _requested(capacity_requests: Mapping[str, Any] | None, name: str) -> Amount | None:
    requests = (capacity_requests or {}).get("requests") or {}
    raw = requests.get(name)
    return None if raw is None else amount(raw)


def fits(
    current: ConsumedCapacity | None,
    capacity_requests: Mapping[str, Any] | None,
    capacity: Mapping[str, Mapping[str, Any]],
    allocating: ConsumedCapacity | None,
    fractional: bool,
) -> bool:
    """CmpRequestOverCapacity: whether the request fits what remains of the device's capacity.

    False skips the device; a CapacityError (request not representable, negative amount) aborts
    the allocation, whatever the order the capacities are looked at.
    """
    requests = (capacity_requests or {}).get("requests") or {}
    if not requests and not current and not allocating and all(not c.get("requestPolicy") for c in capacity.values()):
        # The common case, a device taken whole without policies: each capacity consumes all
        # it has, which always fits.
        for name, cap in capacity.items():
            if amount(cap.get("value", "0")).value < 0:
                raise CapacityError(f'capacity "{name}": {NEGATIVE}')
        return True
    if any(name not in capacity for name in requests):
        return False
    consumed: dict[str, Decimal] = {}
    for name, cap in capacity.items():
        try:
            value = consumed_amount(_requested(capacity_requests, name), cap, fractional).value
        except CapacityError as exc:
            raise CapacityError(f'capacity "{name}": {exc}') from exc
        if value < 0:
            raise CapacityError(f'capacity "{name}": {NEGATIVE}')
        consumed[name] = value
    for name, cap in capacity.items():
        value = consumed[name]
        if violates_policy(value, cap.get("requestPolicy"), fractional):
            return False
        total = value + (current or {}).get(name, Decimal(0)) + (allocating or {}).get(name, Decimal(0))
        if total > amount(cap.get("value", "0")).value:
            return False
    return True


def consumed_by_request(
    capacity_requests: Mapping[str, Any] | None, capacity: Mapping[str, Mapping[str, Any]], fractional: bool
) -> dict[str, Amount]:
    """GetConsumedCapacityFromRequest: what one share takes of every capacity of the device."""
    result: dict[str, Amount] = {}
    for name, cap in capacity.items():
        try:
            result[name] = consumed_amount(_requested(capacity_requests, name), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f'capacity "{name}": {exc}') from exc
    return result
