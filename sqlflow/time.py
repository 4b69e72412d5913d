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

import numpy as np

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
    """`500ms`, `10s`, `30m`, `2h`, `1d` (and `1.5h`) to microseconds; ValueError otherwise.

    Units are case-insensitive, except `M`: a month in Java and ISO 8601, so refused.

    >>> parse_duration("1M")
    Traceback (most recent call last):
    ...
    ValueError: 1M is ambiguous: M is a month in Java and ISO 8601 durations, m a minute
    """
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (expected a number followed by us, ms, s, m, h or d)")
    if m.group(2) == "M":  # Java's and ISO 8601's month: never read silently as a minute
        raise ValueError(f"{text.strip()} is ambiguous: M is a month in Java and ISO 8601 durations, m a minute")
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


def saturating_add(t, d):
    """t + d for a duration d >= 0, saturating at POS_INF instead of wrapping around int64: the
    one addition of a time and a duration (window start + length, end + lateness, now + delay).
    `t` and `d` are ints or int64 arrays (numpy broadcasting); an int in, an int out.

    The infinities need no rule of their own: +inf + d is +inf, and -inf + d is just after the
    beginning of time (a window starting there ends there + its length).

    >>> saturating_add(POS_INF - 3, 10) == POS_INF, saturating_add(NEG_INF, 10) == NEG_INF + 10
    (True, True)
    >>> saturating_add(np.array([0, POS_INF - 3, POS_INF]), 10).tolist() == [10, POS_INF, POS_INF]
    True
    """
    if isinstance(t, (int, np.integer)) and isinstance(d, (int, np.integer)):
        return min(int(t) + int(d), POS_INF)
    t, d = np.asarray(t, np.int64), np.asarray(d, np.int64)
    room = POS_INF - d  # no overflow: d >= 0
    if d.ndim == 0 and (t.size == 0 or t.max() <= room):
        return t + d  # the common case: nothing saturates, one pass
    over = t > room
    return np.where(over, POS_INF, t + np.where(over, 0, d))


def format_time(t: int) -> str:
    """A microsecond timestamp as ISO text (UTC), or -inf/+inf."""
    if t == NEG_INF:
        return "-inf"
    if t == POS_INF:
        return "+inf"
    import datetime as _dt

    return (_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=t)).isoformat(sep=" ")
