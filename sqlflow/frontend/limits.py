"""The largest values the language accepts, so that no clause overflows the engine's int64
microseconds: window bounds are event times plus sizes, lateness and delays.

A duration is at most 100000 days (about 273 years): any timestamp Spark can hold (years 1 to
9999) plus several such durations still fits in int64 microseconds. Counts and the whole-number
arguments of custom window functions are 64-bit integers.

>>> format_duration(MAX_DURATION), MAX_INT64
('100000d', 9223372036854775807)
>>> print(too_long("SIZE 300000000d"))
SIZE 300000000d is too long: a duration is at most 100000d (about 273 years)
>>> print(literal_text("9" * 40))
9999999999999999… (40 digits)
"""
from __future__ import annotations

import re

from ..time import DAY, format_duration

MAX_DURATION = 100_000 * DAY
MIN_INT64, MAX_INT64 = -(2**63), 2**63 - 1

#: literals with more digits than this are refused while parsing, before any arithmetic on them
#: (Python refuses int() of over 4300 digits; Decimal would happily build 10**999999999)
MAX_LITERAL_DIGITS = 30


def too_long(what: str) -> str:
    return f"{what} is too long: a duration is at most {format_duration(MAX_DURATION)} (about 273 years)"


def count_too_large(text: str) -> str:
    return f"COUNT must be at most {MAX_INT64}, got {literal_text(text)}"


def whole_too_large(text: str) -> str:
    return f"{literal_text(text)} is too large: a whole number is at most {MAX_INT64} in magnitude"


def too_many_digits(text: str) -> bool:
    """Whether a number's text has more significant digits, or a larger exponent, than any
    value the language accepts."""
    m = re.fullmatch(r"\s*[+-]?0*(\d*)(?:\.(\d*))?(?:e([+-]?\d+))?\s*", text, re.I)
    if m is None:
        return False
    whole, exponent = m.group(1), m.group(3)
    if exponent is not None and len(exponent.lstrip("+-").lstrip("0")) > 3:
        return True
    return len(whole) + (int(exponent) if exponent else 0) > MAX_LITERAL_DIGITS


def literal_text(text: str) -> str:
    """A number's text, shortened when it is too long to show in a message."""
    text = text.strip()
    return text if len(text) <= 20 else f"{text[:16]}… ({len(text)} digits)"
