"""The keywords `keywords.py` reads from the grammar's text are the ones lark compiles from it.

`keywords.py` reads grammar/sqlflow.lark with regular expressions (the clause finder must not
need lark); here lark's own compiled grammar is the judge: its keyword terminals, and the first
terminal of each rule's expansions.
"""
import re

import pytest
from lark import Lark

from sqlflow.frontend import clauses, keywords, locate, suggest, syntax_errors
from sqlflow.grammar import START_RULES, grammar_text


@pytest.fixture(scope="module")
def compiled():
    return Lark(grammar_text(), parser="lalr", start=list(START_RULES), maybe_placeholders=True)


def _keyword_terminals(compiled) -> dict[str, str]:
    """lark's keyword terminals: name -> the keyword (anonymous `"WORD"i` strings)."""
    return {t.name: t.pattern.value.upper() for t in compiled.terminals
            if t.pattern.type == "str" and t.pattern.value.isidentifier()}


def _starts(compiled, rule: str, seen: frozenset = frozenset()) -> list[str]:
    """The keywords rule `rule` can start with, following leading rules, in lark's order."""
    words = _keyword_terminals(compiled)
    out: list[str] = []
    for r in compiled.rules:
        if r.origin.name != rule or not r.expansion or r.expansion[0].name in seen:
            continue
        first = r.expansion[0]
        found = _starts(compiled, first.name, seen | {rule}) if not first.is_term else \
            [words[first.name]] if first.name in words else []
        out += [w for w in found if w not in out]
    return out


def test_every_keyword_of_the_grammar(compiled):
    assert sorted(keywords.KEYWORDS) == sorted(set(_keyword_terminals(compiled).values()))
    assert len(keywords.KEYWORDS) == len(set(keywords.KEYWORDS))


@pytest.mark.parametrize("rule, derived", [
    ("window_fn", keywords.WINDOW_FNS),
    ("trigger", keywords.TRIGGER_STARTS),
    ("accumulation_mode", keywords.EMIT_MODES),
    ("watermark_model", keywords.WATERMARK_MODELS),
    ("windowing", tuple(keywords.CLAUSES)),  # through lark's rule for `_clause+`
])
def test_what_each_rule_starts_with(compiled, rule, derived):
    assert list(derived) == _starts(compiled, rule)


def test_the_sets_by_value():
    """What the clause finder and the messages rely on, spelled out once."""
    assert keywords.WINDOW_FNS == ("GLOBAL", "FIXED", "SLIDING", "SESSIONS", "CUMULATE")
    assert keywords.TRIGGER_STARTS == ("WATERMARK", "PERIOD", "DELAY", "COUNT", "WHEN", "REPEAT",
                                       "REPEAT_UNTIL", "SEQUENCE", "FIRST_OF", "ALL_OF")
    assert keywords.EMIT_MODES == ("DISCARDING", "ACCUMULATING")
    assert keywords.CLAUSES == {"WINDOW": "WINDOW", "TRIGGER": "TRIGGER", "ALLOWED": "ALLOWED LATENESS",
                                "EMIT": "EMIT", "OUTPUT": "OUTPUT TIMESTAMP"}
    assert keywords.WATERMARK_PHRASES == {"DELAY": "DELAY OF", "PERFECT": "PERFECT", "TIMELINE": "TIMELINE",
                                          "ASCENDING": "ASCENDING PER"}
    assert keywords.KEYWORDS[:6] == ("WINDOW", "ON", "TRIGGER", "ALLOWED", "LATENESS", "EMIT")


def test_interval_units_are_the_terminals(compiled):
    (unit,) = [t for t in compiled.terminals if t.name == "INTERVAL_UNIT"]
    pattern = re.compile(unit.pattern.to_regexp())
    assert all(pattern.fullmatch(u) for u in keywords.INTERVAL_UNITS)
    assert "DAYS" in keywords.INTERVAL_UNITS and "MILLISECONDS" in keywords.INTERVAL_UNITS
    for word in ("DECADE", "QUARTER", "TO", "INTERVAL"):
        assert not pattern.fullmatch(word) and word not in keywords.INTERVAL_UNITS


def test_the_frontend_takes_them_from_keywords():
    assert locate.WINDOW_FNS is keywords.WINDOW_FNS and suggest.WINDOW_FNS is keywords.WINDOW_FNS
    assert locate.TRIGGER_STARTS is keywords.TRIGGER_STARTS and locate.EMIT_MODES is keywords.EMIT_MODES
    assert locate.WATERMARK_MODELS is keywords.WATERMARK_MODELS
    assert locate.INTERVAL_WORDS == keywords.INTERVAL_UNITS | {"TO"}
    assert suggest.KEYWORDS is keywords.KEYWORDS and syntax_errors.CLAUSES is keywords.CLAUSES
    assert {name for name, _ in clauses._CLAUSES.values()} == set(keywords.CLAUSES.values())


def test_a_rule_that_starts_oddly_is_an_error(monkeypatch):
    monkeypatch.setitem(keywords._RULES, "odd", ' ("A"i | "B"i) x')
    with pytest.raises(ValueError, match="grammar rule odd: cannot tell how"):
        keywords.starts("odd")
