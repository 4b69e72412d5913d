"""Words for syntax errors: what the grammar expected, and the keyword a typo was probably meant to be.

>>> expected_words({"DURATION", "INTERVAL"})
'a duration (like 30m or INTERVAL 5 MINUTES)'
>>> expected_words({"ALLOWED", "EMIT", "TRIGGER", "$END", "ON", "OUTPUT"})
'ON, TRIGGER, ALLOWED LATENESS, EMIT, OUTPUT TIMESTAMP or the end of the clauses'
>>> expected_words({"RPAR", "COMMA"})
"')' or ','"
>>> nearest("TRIGER", ["ON", "TRIGGER", "EMIT"])
'TRIGGER'
>>> nearest("SESSION", WINDOW_FNS)
'SESSIONS'
>>> print(nearest("FOO", ["TRIGGER"]))
None
>>> window_fn_for("TUMBLE", "SIZE 1h"), window_fn_for("TUMBLE", "1h"), window_fn_for("hop", "1m, 5m")
('FIXED(SIZE 1h)', 'FIXED(SIZE 1h)', 'SLIDING(SIZE d, PERIOD p)')
>>> duration_hint("1h30m)", 0), duration_hint("1 hour)", 0), duration_hint("1w", 0)
('write 90m: a duration is one number and one unit (us, ms, s, m, h or d)', 'write 1h or INTERVAL 1 HOUR', 'write 7d or INTERVAL 1 WEEK')
"""
from __future__ import annotations

import difflib
import re
from decimal import Decimal

from ..time import DAY, HOUR, MICROSECOND, MILLISECOND, MINUTE, SECOND, WEEK, format_duration
from .keywords import CLAUSES, KEYWORDS, OUTPUT_TIMES, TRIGGER_STARTS, WINDOW_FNS

#: keywords shown as the phrase they start
_PHRASES = {word: phrase for word, phrase in {**CLAUSES, **OUTPUT_TIMES}.items() if word != phrase}
_PHRASES["REOPEN"] = "REOPEN ON MERGE"
_SYMBOLS = {"LPAR": "'('", "RPAR": "')'", "COMMA": "','", "DOT": "'.'"}
_THINGS = {  # terminal -> description, in the order messages list them
    "DURATION": "a duration (like 30m or INTERVAL 5 MINUTES)",
    "NUMBER": "a number",
    "STRING": "a string",
    "INTERVAL_UNIT": "an interval unit (DAY, HOUR, MINUTE, SECOND ...)",
    "NAME": "a name",
    "SQL_TOKEN": "a Spark SQL expression",
}


def expected_words(terminals: set[str] | frozenset[str], phrases: dict[str, str] | None = None) -> str:
    """The terminals a parser would accept, as a phrase (`phrases` renames keywords)."""
    names = set(terminals) - {"DOT"}  # a qualified name's dot is never what went wrong
    phrases = {**_PHRASES, **(phrases or {})}
    if "DURATION" in names:
        names -= {"INTERVAL", "NUMBER"} if "STRING" not in names else {"INTERVAL"}
    if "NAME" in names:
        names.discard("QUOTED_NAME")
    words: list[str] = []
    if set(WINDOW_FNS) <= names:
        words.append("a window function (GLOBAL, FIXED, SLIDING, SESSIONS, CUMULATE or a registered one)")
        names -= set(WINDOW_FNS) | {"NAME"}
    if set(TRIGGER_STARTS) <= names:
        words.append("a trigger (" + ", ".join(TRIGGER_STARTS) + ")")
        names -= set(TRIGGER_STARTS)
    words += [phrases.get(k, k) for k in KEYWORDS if k in names]
    words += [_SYMBOLS[s] for s in _SYMBOLS if s in names]
    words += [text for t, text in _THINGS.items() if t in names]
    known = set(KEYWORDS) | set(_SYMBOLS) | set(_THINGS) | {"$END", "QUOTED_NAME", "INTERVAL"}
    words += sorted(names - known)
    if "$END" in names:
        words.append("the end of the clauses")
    if not words:
        return "something else"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def nearest(word: str, candidates, cutoff: float = 0.7) -> str | None:
    """The candidate keyword closest to `word` (a probable typo), if any is close enough."""
    matches = difflib.get_close_matches(word.upper(), [c.upper() for c in candidates], n=1,
                                        cutoff=cutoff)
    return matches[0] if matches and matches[0] != word.upper() else None


def did_you_mean(word: str, candidates) -> str | None:
    """A hint naming the nearest keyword, as the phrase it starts."""
    match = nearest(word, candidates)
    return f"did you mean {_PHRASES.get(match, match)}?" if match else None


#: window functions of other systems (Flink SQL's TUMBLE, HOP, SESSION; Beam's and Kafka's names)
#: and the window function of sqlflow that is meant, with its parameters
OTHER_WINDOW_FNS = {
    "TUMBLE": ("FIXED", "SIZE d"), "TUMBLING": ("FIXED", "SIZE d"),
    "HOP": ("SLIDING", "SIZE d, PERIOD p"), "HOPPING": ("SLIDING", "SIZE d, PERIOD p"),
    "SLIDE": ("SLIDING", "SIZE d, PERIOD p"),
    "SESSION": ("SESSIONS", "GAP g"), "SESSION_WINDOW": ("SESSIONS", "GAP g"),
    "CUMULATIVE": ("CUMULATE", "STEP s, SIZE d"),
}


def window_fn_for(name: str, arguments: str) -> str | None:
    """The sqlflow window function call meant by another system's `name(arguments)`, keeping the
    arguments when they already name sqlflow's parameters, else with placeholders."""
    fn = OTHER_WINDOW_FNS.get(name.upper())
    if fn is None:
        return None
    words = {w.upper() for w in arguments.replace(",", " ").split()}
    params = [p.split()[0] for p in fn[1].split(", ")]
    if set(params) <= words:
        return f"{fn[0]}({arguments.strip()})"
    if len(params) == 1 and arguments.strip() and "," not in arguments:  # TUMBLE(1h): one duration
        return f"{fn[0]}({params[0]} {arguments.strip()})"
    return f"{fn[0]}({fn[1]})"


#: units as people write them -> (microseconds, the INTERVAL unit word)
_UNIT_WORDS = {word: unit for unit, words in {
    (MICROSECOND, "MICROSECOND"): "us usec usecs micro micros microsecond microseconds",
    (MILLISECOND, "MILLISECOND"): "ms msec msecs milli millis millisecond milliseconds",
    (SECOND, "SECOND"): "s sec secs second seconds",
    (MINUTE, "MINUTE"): "m min mins minute minutes",
    (HOUR, "HOUR"): "h hr hrs hour hours",
    (DAY, "DAY"): "d day days",
    (WEEK, "WEEK"): "w wk wks week weeks",
}.items() for word in words.split()}
#: units that are not a fixed length of time -> (the thing, how many days to suggest)
_NOT_FIXED = {word: unit for unit, words in {
    ("month", 30): "mo mon mons month months",
    ("year", 365): "y yr yrs year years",
}.items() for word in words.split()}
_ATTEMPT = re.compile(r"([+-]?(?:\d+(?:\.\d+)?|\.\d+))(\s*)([A-Za-z]*)((?:\d+(?:\.\d+)?[A-Za-z]+)*)(?![\w.])")
_PAIR = re.compile(r"(\d+(?:\.\d+)?)([A-Za-z]+)")
_AMBIGUOUS_M = "write {n}m for minutes; a month is not a fixed length of time (write days: 30d)"


def duration_hint(code: str, offset: int) -> str | None:
    """What to write instead of the duration-like text at `offset` (`1 hour`, `1h30m`, `1w`,
    `5min`, a number without a unit), or None when it does not look like a duration."""
    m = _ATTEMPT.match(code, offset)
    if m is None:
        return None
    number, space, word, more = m.groups()
    if more:  # 1h30m
        pairs = _PAIR.findall(number.lstrip("+-") + word + more)
        if space or any(unit.lower() not in _UNIT_WORDS or unit == "M" for _, unit in pairs):
            return None
        total = sum((Decimal(n) * _UNIT_WORDS[unit.lower()][0] for n, unit in pairs), Decimal(0))
        if total != total.to_integral_value():
            return None
        sign = -1 if number.startswith("-") else 1
        return (f"write {format_duration(sign * int(total))}: a duration is one number and one unit "
                "(us, ms, s, m, h or d)")
    if not word:
        return (f"a duration needs a unit: {number}s, {number}m, {number}h ... (us, ms, s, m, h or d), "
                f"or INTERVAL {number} SECONDS")
    if word == "M":
        return _AMBIGUOUS_M.format(n=number)
    if word.lower() in _NOT_FIXED:
        thing, days = _NOT_FIXED[word.lower()]
        return f"a {thing} is not a fixed length of time: write days ({days}d) or hours"
    if word.lower() not in _UNIT_WORDS:
        return None
    micros, interval_unit = _UNIT_WORDS[word.lower()]
    exact = Decimal(number) * micros
    if exact != exact.to_integral_value():
        return None
    short = format_duration(int(exact))
    if space and word.lower() in ("us", "ms", "s", "m", "h", "d"):
        return f"write {short}, without a space"
    plural = "" if Decimal(number) == 1 else "S"
    return f"write {short} or INTERVAL {number.lstrip('+')} {interval_unit}{plural}"


def misspelt_duration(text: str) -> str | None:
    """duration_hint for a whole expression that is a duration written otherwise (`1 hour`,
    `1h30m`), None for anything else, a number without a unit included (a per-row expression).

    >>> misspelt_duration(" 1 hour"), misspelt_duration("30"), misspelt_duration("gap_col")
    ('write 1h or INTERVAL 1 HOUR', None, None)
    """
    m = _ATTEMPT.fullmatch(text.strip())
    if m is None or not (m.group(3) or m.group(4)):
        return None
    return duration_hint(text.strip(), 0)
