"""Time inside sqlflow: integer microseconds, half-open windows, infinities.

Human durations (`30m`) exist only at the grammar edge and in messages.

>>> parse_duration("30m")
1800000000
>>> format_duration(90 * SECOND)
'90s'
>>> format_duration(parse_duration("1d"))
'1d'
>>> saturating_add(POS_INF, 5 * MINUTE) == POS_INF
True
"""
from __future__ import annotations

import re

MICROSECOND = 1
MILLISECOND = 1_000
SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY

#: The beginning and the end of time, as int64 microseconds.
NEG_INF = -(2**63)
POS_INF = 2**63 - 1

#: Duration suffixes accepted by the grammar, largest first (the canonical printer uses this order).
UNITS: tuple[tuple[str, int], ...] = (
    ("d", DAY),
    ("h", HOUR),
    ("m", MINUTE),
    ("s", SECOND),
    ("ms", MILLISECOND),
    ("us", MICROSECOND),
)
_UNIT = dict(UNITS)

#: INTERVAL unit words (singular and plural, case-insensitive) to microseconds.
INTERVAL_UNITS: dict[str, int] = {
    "week": WEEK, "day": DAY, "hour": HOUR, "minute": MINUTE, "second": SECOND,
    "millisecond": MILLISECOND, "microsecond": MICROSECOND,
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)\s*$", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """`500ms`, `10s`, `30m`, `2h`, `1d` (and `1.5h`) to microseconds; ValueError otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (expected a number followed by us, ms, s, m, h or d)")
    number, unit = m.group(1), m.group(2).lower()
    micros = float(number) * _UNIT[unit] if "." in number else int(number) * _UNIT[unit]
    if isinstance(micros, float):
        if not micros.is_integer():
            raise ValueError(f"duration {text!r} is not a whole number of microseconds")
        micros = int(micros)
    return micros


def format_duration(micros: int) -> str:
    """The canonical text of a duration: the largest unit that divides it exactly."""
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    value = abs(micros)
    for suffix, size in UNITS:
        if value % size == 0:
            return f"{sign}{value // size}{suffix}"
    raise AssertionError("unreachable: microseconds divide everything")


def saturating_add(t: int, d: int) -> int:
    """t + d clamped to [NEG_INF, POS_INF]; infinities stay infinite."""
    if t in (NEG_INF, POS_INF):
        return t
    return max(NEG_INF, min(POS_INF, t + d))


def format_time(t: int) -> str:
    """A microsecond timestamp as ISO text (UTC), or -inf/+inf."""
    if t == NEG_INF:
        return "-inf"
    if t == POS_INF:
        return "+inf"
    import datetime as _dt

    return (_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=t)).isoformat(sep=" ")
