"""The language's keywords, read from the grammar (grammar/sqlflow.lark), never copied by hand.

The clause finder (`locate.py`) works on tokens before any parsing, and the messages of syntax
errors (`suggest.py`) name keywords; both take them from here. This module reads the grammar's
text with a few regular expressions, without lark: a rule's alternatives and the keyword each
starts with. tests/frontend/test_keywords.py checks every set against lark's own reading.

>>> WINDOW_FNS
('GLOBAL', 'FIXED', 'SLIDING', 'SESSIONS', 'CUMULATE')
>>> CLAUSES
{'WINDOW': 'WINDOW', 'TRIGGER': 'TRIGGER', 'ALLOWED': 'ALLOWED LATENESS', 'EMIT': 'EMIT', 'OUTPUT': 'OUTPUT TIMESTAMP'}
>>> WATERMARK_MODELS
('DELAY', 'PERFECT', 'TIMELINE', 'ASCENDING')
>>> TIME_DOMAINS
('PROCESSING', 'INGESTION', 'EVENT')
"""
from __future__ import annotations

import re

from ..grammar import grammar_text

_TEXT = re.sub(r"//[^\n]*", "", grammar_text())
#: a rule: `[?]name: alternatives`, continued on lines that start with `|`
_RULE = re.compile(r"^\??([a-z_][a-z0-9_]*)[ \t]*:(.*(?:\n[ \t]+\|.*)*)", re.M)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"i?|->|[()\[\]|*+?]|[A-Za-z_][A-Za-z0-9_]*|\S')
_KEYWORD = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"i')
_RULES = {m.group(1): m.group(2) for m in _RULE.finditer(_TEXT)}


def _alternatives(rule: str) -> list[list[str]]:
    """The tokens of each top-level alternative of `rule`, without its `-> alias`."""
    alternatives: list[list[str]] = [[]]
    depth = 0
    for tok in _TOKEN.findall(_RULES[rule]):
        if tok in ("(", "["):
            depth += 1
        elif tok in (")", "]"):
            depth -= 1
        if tok == "|" and depth == 0:
            alternatives.append([])
        else:
            alternatives[-1].append(tok)
    return [alt[:alt.index("->")] if "->" in alt else alt for alt in alternatives]


def _keyword(tok: str) -> str | None:
    m = _KEYWORD.fullmatch(tok)
    return m.group(1).upper() if m else None


def starts(rule: str) -> tuple[str, ...]:
    """The keywords an instance of `rule` can start with, in the grammar's order (alternatives
    that start with a rule contribute that rule's; those that start with a terminal, none).

    >>> starts("accumulation_mode")
    ('DISCARDING', 'ACCUMULATING')
    """
    out: list[str] = []
    for alt in _alternatives(rule):
        first, keyword = alt[0], _keyword(alt[0])
        if first in _RULES:
            found = starts(first)
        elif keyword is not None:
            found = (keyword,)
        elif first.isupper():  # a terminal such as NAME: no keyword
            found = ()
        else:
            raise ValueError(f"grammar rule {rule}: cannot tell how {' '.join(alt)} starts")
        out += [k for k in found if k not in out]
    return tuple(out)


def phrases(rule: str) -> dict[str, str]:
    """The run of keywords each alternative of `rule` starts with, by its first keyword.

    >>> phrases("allowed_lateness")
    {'ALLOWED': 'ALLOWED LATENESS'}
    """
    out: dict[str, str] = {}
    for alt in _alternatives(rule):
        words = []
        for tok in alt:
            word = _keyword(tok)
            if word is None:
                break
            words.append(word)
        if words:
            out.setdefault(words[0], " ".join(words))
    return out


_CLAUSE_RULES = [rule for (rule,) in _alternatives("_clause")]
#: the clauses of a clause tail: first keyword -> the clause's name
CLAUSES = {word: phrase for rule in _CLAUSE_RULES for word, phrase in phrases(rule).items()}
#: the watermark models as messages name them (`DELAY OF`)
WATERMARK_PHRASES = phrases("watermark_model")
#: every keyword, in the order messages list them: the clause tail's own words (WINDOW, ON,
#: TRIGGER, ALLOWED LATENESS, EMIT: what may come next), then the others as the grammar has them
KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(
    [k.upper() for r in _CLAUSE_RULES for k in _KEYWORD.findall(_RULES[r])]
    + [k.upper() for k in _KEYWORD.findall(_TEXT)]))
#: the built-in window functions (others are registered custom window functions)
WINDOW_FNS = starts("window_fn")
#: the words a trigger starts with
TRIGGER_STARTS = starts("trigger")
#: the accumulation modes' first words
EMIT_MODES = starts("accumulation_mode")
#: the output timestamps (OUTPUT TIMESTAMP ...), by first word: {'END': 'END OF WINDOW', ...}
OUTPUT_TIMES = phrases("output_time")
#: the time domains' first words (ON PROCESSING TIME ...), from their terminals
TIME_DOMAINS = tuple(re.findall(r'^([A-Z]+)\s*:\s*"\1"i', _TEXT, re.M))
#: the watermark models of a source's WATERMARK clause
WATERMARK_MODELS = starts("watermark_model")
#: the words of the options after EMIT's mode and of ALLOWED LATENESS UNBOUNDED: they follow only
#: a keyword, never stand where a name may, so a column may be named `time` without quotes
OPTION_WORDS = frozenset(k.upper() for r in ("on_time_always", "closing_always", "unbounded")
                         for k in _KEYWORD.findall(_RULES[r])) - {"ON"}


def _interval_units() -> frozenset[str]:
    """The day-time interval units (singular and plural) of the INTERVAL_UNIT terminal."""
    m = re.search(r"^INTERVAL_UNIT\b[^:]*:\s*/\(([A-Z|]+)\)S\?", _TEXT, re.M)
    if m is None:
        raise ValueError("grammar: INTERVAL_UNIT is not /(UNIT|...)S?.../ any more")
    return frozenset(unit + plural for unit in m.group(1).split("|") for plural in ("", "S"))


INTERVAL_UNITS = _interval_units()
