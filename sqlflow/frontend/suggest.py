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
"""
from __future__ import annotations

import difflib

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
