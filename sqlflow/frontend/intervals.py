"""Spark INTERVAL literals as microseconds.

Only day-time intervals are lengths of time; a month or a year is not (28 to 31 days, 365 or
366), so they are refused with IntervalError, which the caller turns into a located error.

>>> units([("5", "MINUTES")])
300000000
>>> units([("1", "DAY"), ("'2'", "HOURS")]) == 26 * 3600 * 10**6
True
>>> text("'1 day 2 hours'") == units([("1", "DAY"), ("2", "HOUR")])
True
>>> unit_range("'1:30'", "HOUR", "MINUTE") == 90 * 60 * 10**6
True
>>> unit_range("'-1 02:03:04.5'", "DAY", "SECOND")
-93784500000
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from . import limits
from ..time import DAY, HOUR, MICROSECOND, MILLISECOND, MINUTE, SECOND, WEEK

_UNIT = {"WEEK": WEEK, "DAY": DAY, "HOUR": HOUR, "MINUTE": MINUTE, "SECOND": SECOND,
         "MILLISECOND": MILLISECOND, "MICROSECOND": MICROSECOND}
_NOT_FIXED = {"YEAR", "MONTH"}
_RANGE_FIELDS = ("DAY", "HOUR", "MINUTE", "SECOND")


class IntervalError(ValueError):
    """An INTERVAL that is not a fixed length of time, or not a well-formed one.

    `semantic` is True for months and years, and for lengths too long to mean anything, False
    for malformed text.
    """

    def __init__(self, message: str, *, semantic: bool = False) -> None:
        super().__init__(message)
        self.semantic = semantic


def unit_micros(word: str) -> int:
    """Microseconds in one INTERVAL unit (`MINUTES`, `minute` ...)."""
    name = word.upper()
    if name.endswith("S") and name[:-1] in _UNIT.keys() | _NOT_FIXED:
        name = name[:-1]
    if name in _NOT_FIXED:
        raise IntervalError(
            f"INTERVAL in {name.lower()}s is not a fixed length of time (use days, hours, minutes ...)",
            semantic=True)
    if name not in _UNIT:
        raise IntervalError(f"unknown INTERVAL unit {word}")
    return _UNIT[name]


def unquote(value: str) -> str:
    """The text of a number or a quoted string value."""
    if value[:1] in ("'", '"'):
        return value[1:-1].strip()
    return value


def _scaled(value: str, micros: int) -> int:
    if limits.too_many_digits(value):  # before Decimal builds a number with a billion digits
        raise IntervalError(limits.too_long(f"INTERVAL {limits.literal_text(value)}"), semantic=True)
    try:
        exact = Decimal(value) * micros
    except InvalidOperation:
        raise IntervalError(f"{value!r} is not a number") from None
    if exact != exact.to_integral_value():
        raise IntervalError(f"{value} is not a whole number of microseconds")
    return int(exact)


def units(pairs: list[tuple[str, str]]) -> int:
    """`INTERVAL 1 DAY 2 HOURS` (values may be quoted: `INTERVAL '5' MINUTE`)."""
    return sum(_scaled(unquote(value), unit_micros(unit)) for value, unit in pairs)


_TEXT_PAIR = re.compile(r"\s*([+-]?\s*(?:\d+(?:\.\d*)?|\.\d+))\s*([A-Za-z]+)")


def text(literal: str) -> int:
    """`INTERVAL '1 day 2 hours'`: the whole interval inside one string."""
    body = unquote(literal)
    if body.upper().startswith("INTERVAL"):
        body = body[len("INTERVAL"):]
    pos, pairs = 0, []
    while pos < len(body.rstrip()):
        m = _TEXT_PAIR.match(body, pos)
        if not m:
            raise IntervalError(f"cannot read interval {literal} (expected like '1 day 2 hours')")
        pairs.append((m.group(1).replace(" ", ""), m.group(2)))
        pos = m.end()
    if not pairs:
        raise IntervalError(f"empty interval {literal}")
    return units(pairs)


def unit_range(literal: str, first: str, last: str) -> int:
    """`INTERVAL '1:30' HOUR TO MINUTE`, `INTERVAL '1 02:00:00' DAY TO SECOND` ..."""
    start, end = _range_field(first), _range_field(last)
    if start >= end:
        raise IntervalError(f"INTERVAL ... {first.upper()} TO {last.upper()} is not a valid range")
    fields = _RANGE_FIELDS[start:end + 1]
    body = unquote(literal)
    m = re.fullmatch(r"([+-]?)(.*)", body.strip(), re.S)
    assert m is not None  # matches any text
    sign, rest = (-1 if m.group(1) == "-" else 1), m.group(2)
    parts = re.split(r"[ :]", rest, maxsplit=len(fields) - 1) if rest else []
    if len(parts) != len(fields) or not all(re.fullmatch(r"\d+(\.\d+)?", p) for p in parts) \
            or any("." in p for p in parts[:-1]) or ("." in parts[-1] and fields[-1] != "SECOND"):
        example = {"DAY": "d", "HOUR": "h", "MINUTE": "m", "SECOND": "s"}
        shape = " ".join([example[fields[0]], ":".join(example[f] for f in fields[1:])]) \
            if fields[0] == "DAY" else ":".join(example[f] for f in fields)
        raise IntervalError(f"cannot read {literal} as {first.upper()} TO {last.upper()} "
                            f"(expected '{shape}')")
    return sign * sum(_scaled(p, _UNIT[f]) for p, f in zip(parts, fields))


def _range_field(word: str) -> int:
    name = word.upper()[:-1] if word.upper().endswith("S") else word.upper()
    if name in _NOT_FIXED:
        unit_micros(name)  # raises the months/years error
    if name not in _RANGE_FIELDS:
        raise IntervalError(f"{word.upper()} cannot be part of an INTERVAL ... TO ... range")
    return _RANGE_FIELDS.index(name)
