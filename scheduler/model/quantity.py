"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3").

Owns parsing only; callers say which object and field a bad quantity came from.
Values are exact (Decimal); conversion to integers rounds up, as resource.Quantity's
Value() and MilliValue() do.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into its exact value in base units."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity {value!r} is not a number")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Decimal(str(value))
    text = value.strip()
    match = _PATTERN.match(text)
    if not match:
        raise QuantityError(f"quantity {value!r} does not match the Kubernetes quantity format")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"quantity {value!r}: bad number") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


def ceil_milli(value: Decimal) -> int:
    """An exact amount in thousandths, rounded up (resource.Quantity's MilliValue)."""
    return int((value * 1000).to_integral_value(rounding="ROUND_CEILING"))


def ceil_int(value: Decimal) -> int:
    """An exact amount in base units, rounded up (resource.Quantity's Value)."""
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def to_milli(value: str | int | float) -> int:
    """The quantity in thousandths, rounded up (CPU in millicores)."""
    return ceil_milli(parse_quantity(value))


def to_int(value: str | int | float) -> int:
    """The quantity in base units, rounded up (memory in bytes, counts)."""
    return ceil_int(parse_quantity(value))
