"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3") and their int64 values.

Owns parsing and the integer conversions, with resource.Quantity's (apimachinery v0.37.2)
arithmetic: a Quantity keeps the representation kube's parser would choose (a scaled int64, or an
arbitrary-precision decimal rounded up to nanounits), sums as kube's Quantity.Add does, and
converts with kube's ScaledValue. Within int64 that is the exact value rounded up; beyond it kube
does not saturate: the int64 form gives 0 (or a wrapped product) and the decimal form the low 64
bits of the result. Such a value is reproduced exactly and flagged as out of range, so the caller
can report the object and field once; nothing here raises for a large number.

Must never know which object a quantity came from: callers name it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_UINT64 = 2**64
MILLI = -3  # kube's resource.Milli scale

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_PATTERN = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
# Past this exponent no quantity has a meaning; kube's own parser would spend minutes on it.
_MAX_EXPONENT = 10**6
_NANO_DIGITS = 9
# resource.maxInt64Factors: at most this many digits take the scaled-int64 path.
_MAX_INT64_FACTORS = 18


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def wrap_int64(value: int) -> int:
    """Go's int64 two's-complement wrap of an exact integer."""
    return (value - INT64_MIN) % _UINT64 + INT64_MIN


def _go_big_int64(value: int) -> int:
    """big.Int.Int64(): the low 64 bits of |x| as int64, negated for a negative x."""
    low = wrap_int64(abs(value) % _UINT64)
    return wrap_int64(-low) if value < 0 else low


def go_add(a: int, b: int) -> int:
    """a + b with Go's int64 wrap."""
    total = a + b
    return total if INT64_MIN <= total <= INT64_MAX else wrap_int64(total)


def go_mul(a: int, b: int) -> int:
    """a * b with Go's int64 wrap."""
    product = a * b
    return product if INT64_MIN <= product <= INT64_MAX else wrap_int64(product)


def go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's // floors)."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def _fits(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def _times_pow10(base: int, digits: int) -> tuple[int, bool]:
    """positiveScaleInt64: base·10^digits and whether it fit; kube's 1/2/3/6/9-digit forms keep the
    wrapped product, its digit-by-digit loop gives 0, on overflow."""
    if digits == 0 or base == 0:
        return base, True
    if digits in (1, 2, 3, 6, 9):
        if base == 1:
            return 10**digits, True
        if base == INT64_MIN:
            return 0, False
        product = base * 10**digits
        return wrap_int64(product), _fits(product)
    value = base
    for _ in range(digits):
        if value != 1 and (value == INT64_MIN or not _fits(value * 10)):
            return 0, False
        value *= 10
    return value, True


def _shrink_pow10(base: int, digits: int) -> int:
    """negativeScaleInt64: base / 10^digits rounded away from zero."""
    if digits == 0:
        return base
    divisor: int = 10**digits
    quotient, fraction = divmod(abs(base), divisor)
    if fraction:
        quotient += 1
    return quotient if base >= 0 else -quotient


class Quantity:
    """One quantity as resource.Quantity holds it: `unscaled`·10^`scale` in the scaled-int64 form,
    `unscaled`·10^-`scale` in the decimal form (inf.Dec's sign convention), as kube stores each."""

    __slots__ = ("_exact", "decimal", "scale", "unscaled")

    def __init__(self, unscaled: int, scale: int, decimal: bool) -> None:
        self.unscaled = unscaled
        self.scale = scale
        self.decimal = decimal
        self._exact: Decimal | None = None

    @property
    def exact(self) -> Decimal:
        """The exact value in base units."""
        if self._exact is None:
            exponent = -self.scale if self.decimal else self.scale
            self._exact = Decimal(f"{self.unscaled}E{exponent}")  # exact, whatever the context's precision
        return self._exact

    # ---- comparisons are exact in kube too (Quantity.Cmp) ------------------------------------

    def _key(self, other: object) -> Decimal:
        if isinstance(other, Quantity):
            return other.exact
        if isinstance(other, Decimal | int):
            return Decimal(other)
        raise TypeError(f"cannot compare a Quantity with {type(other).__name__}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity | Decimal | int):
            return NotImplemented
        return self.exact == self._key(other)

    def __hash__(self) -> int:
        return hash(self.exact)

    def __lt__(self, other: Quantity) -> bool:
        return self.exact < other.exact

    def __gt__(self, other: Quantity) -> bool:
        return self.exact > other.exact

    def __repr__(self) -> str:
        return f"Quantity({self.exact})"

    # ---- Quantity.Add ------------------------------------------------------------------------

    def __add__(self, other: Quantity) -> Quantity:
        if not self.decimal and not other.decimal:
            summed = _int_add(self.unscaled, self.scale, other.unscaled, other.scale)
            if summed is not None:
                return Quantity(summed[0], summed[1], False)
        a, b = self._as_dec(), other._as_dec()
        scale = max(a[1], b[1])
        unscaled = a[0] * 10 ** (scale - a[1]) + b[0] * 10 ** (scale - b[1])
        return Quantity(unscaled, scale, True)

    def _as_dec(self) -> tuple[int, int]:
        return (self.unscaled, self.scale) if self.decimal else (self.unscaled, -self.scale)

    # ---- ScaledValue -------------------------------------------------------------------------

    def scaled(self, scale: int) -> tuple[int, bool]:
        """kube's ScaledValue(scale) (ceil(q / 10^scale) as int64), and whether that is the exact
        rounded-up value, i.e. the value fits in int64."""
        if not self.decimal:
            if self.scale < scale:
                return _shrink_pow10(self.unscaled, scale - self.scale), True
            return _times_pow10(self.unscaled, self.scale - scale)
        dif = self.scale + scale  # inf.Dec scale minus the target's inf scale (-scale)
        if dif <= 0:
            exact = self.unscaled * 10**-dif
            return wrap_int64(_go_big_int64(self.unscaled) * 10**-dif), _fits(exact)
        divisor = 10**dif
        if self.unscaled < INT64_MAX and dif < 19:
            unscaled = _go_big_int64(self.unscaled)
            quotient = go_div(unscaled, divisor)
            result = quotient + 1 if unscaled - quotient * divisor else quotient
        else:
            quotient, remainder = divmod(self.unscaled, divisor)  # big.Int.DivMod: Euclidean
            result = wrap_int64(_go_big_int64(quotient) + (1 if remainder else 0))
        exact = -(-self.unscaled // divisor)
        return result, _fits(exact)

    def milli_value(self) -> int:
        """kube's MilliValue()."""
        return self.scaled(MILLI)[0]

    def value(self) -> int:
        """kube's Value()."""
        return self.scaled(0)[0]


def _int_add(a: int, a_scale: int, b: int, b_scale: int) -> tuple[int, int] | None:
    """int64Amount.Add: the sum at the smaller scale, or None where kube falls back to inf.Dec."""
    if b == 0:
        return a, a_scale
    if a == 0:
        return b, b_scale
    if a_scale > b_scale:
        a, ok = _times_pow10(a, a_scale - b_scale)
        a_scale = b_scale
    elif b_scale > a_scale:
        b, ok = _times_pow10(b, b_scale - a_scale)
    else:
        ok = True
    total = a + b
    if not ok or not _fits(total):
        return None
    return total, a_scale


ZERO = Quantity(0, 0, False)


def parse(value: str | int | float) -> Quantity:
    """resource.ParseQuantity: the quantity in the representation kube's parser picks."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity {value!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(f"quantity {value!r} is not finite")
    text = value if isinstance(value, str) else str(value)
    match = _PATTERN.match(text.strip())
    if not match or not (match.group(2) or match.group(3)):
        raise QuantityError(f"quantity {value!r} does not match the Kubernetes quantity format")
    sign, whole, fraction, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4) or ""
    negative = sign == "-"
    digits = whole.lstrip("0") or "0"
    binary = suffix in _BINARY
    if binary:
        exponent = _BINARY[suffix]
    elif suffix in _DECIMAL:
        exponent = _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"quantity {value!r}: exponent out of range")
    if binary:
        precision = 15 - len(digits) - exponent * 3 // 10 - 1 if not fraction else -1
        scale, mantissa = 0, 1 << exponent
    else:
        precision = _MAX_INT64_FACTORS - len(digits) - len(fraction)
        scale, mantissa = exponent, 1
    if precision >= 0:
        scale -= len(fraction)
        if scale >= -_NANO_DIGITS:
            result = int(digits + fraction) * mantissa
            if _fits(result):
                return Quantity(-result if negative else result, scale, False)
    # The arbitrary-precision path: exact, rounded up (away from zero) to nanounits.
    unscaled = int(whole + fraction or "0")
    dec_scale = len(fraction)
    if binary:
        unscaled *= mantissa
    else:
        dec_scale -= exponent
    if unscaled:
        if dec_scale < _NANO_DIGITS:
            unscaled *= 10 ** (_NANO_DIGITS - dec_scale)
        elif dec_scale > _NANO_DIGITS:
            unscaled = -(-unscaled // 10 ** (dec_scale - _NANO_DIGITS))
        dec_scale = _NANO_DIGITS
        if binary and unscaled > INT64_MAX * 10**_NANO_DIGITS:
            unscaled, dec_scale = INT64_MAX, 0  # kube caps binary-suffixed amounts at MaxInt64
    return Quantity(-unscaled if negative else unscaled, dec_scale, True)


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into its exact value in base units."""
    try:
        return parse(value).exact
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"quantity {value!r}: bad number") from exc


def to_milli(value: str | int | float) -> int:
    """The quantity in thousandths as kube's MilliValue gives it (CPU in millicores)."""
    return parse(value).milli_value()


def to_int(value: str | int | float) -> int:
    """The quantity in base units as kube's Value gives it (memory in bytes, counts)."""
    return parse(value).value()
