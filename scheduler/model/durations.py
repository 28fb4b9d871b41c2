"""Go's time.Duration text: parsed from config files and flags, printed in kube's messages.

Pure functions; no I/O.
"""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration ("15s", "1m30s", "500ms"); ValueError when it is not one."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    parts = _PART.findall(body)
    if not parts or "".join(number + unit for number, unit in parts) != body:
        raise ValueError(f"not a duration: {text!r}")
    return sign * sum(float(number) * _UNITS[unit] for number, unit in parts)


def go_duration(seconds: float) -> str:
    """Seconds as Go's time.Duration prints them (500ms, 10s, 1m30s)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)

    def fraction(value: int, unit: int) -> str:
        whole, rest = divmod(value, unit)
        digits = f"{rest:0{len(str(unit)) - 1}d}".rstrip("0") if rest else ""
        return f"{whole}.{digits}" if digits else str(whole)

    if ns < 1_000_000_000:
        for suffix, unit in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= unit:
                return f"{sign}{fraction(ns, unit)}{suffix}"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return f"{sign}{text}{fraction(rest, 1_000_000_000)}s"
