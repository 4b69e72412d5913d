"""lark's parse errors as SqlflowSyntaxError: where, in which clause, what was expected (in
words, not terminal names), and the keyword a typo was probably meant to be.
"""
from __future__ import annotations

import functools
import re
from typing import cast

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from ..errors import SqlflowError, SqlflowSyntaxError
from . import suggest
from .keywords import CLAUSES, TIME_DOMAINS, WATERMARK_PHRASES
from .scan import PUNCT, WORD, scan
from .source import Source


def clause_at(source: Source, start: int, offset: int) -> str | None:
    """The clause (WINDOW, TRIGGER, ...) of a clause tail at `start` that `offset` falls in."""
    depth, clause, previous = 0, None, ""
    for tok in scan(source.code, start, offset + 1):
        if tok.kind == PUNCT and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
        elif depth == 0 and tok.upper in CLAUSES and previous != "OF":  # not OUTPUT TIMESTAMP END OF WINDOW
            clause = CLAUSES[tok.upper]
        previous = tok.upper
    return clause


def from_lark(source: Source, start: int, end: int, rule: str,
              error: UnexpectedInput) -> SqlflowError:
    """The SqlflowSyntaxError for lark's error parsing source.text[start:end] from `rule`."""
    interactive = getattr(error, "interactive_parser", None)
    expected = set(interactive.accepts()) if interactive is not None else \
        set(getattr(error, "expected", None) or getattr(error, "allowed", None) or ())
    token = getattr(error, "token", None)  # UnexpectedToken's
    if isinstance(error, UnexpectedCharacters):
        offset = start + cast(int, error.pos_in_stream)  # lark declares it on the base class as None
        got = _word_at(source.code, offset)
    elif isinstance(error, UnexpectedEOF) or token is None or token.type == "$END":
        following = scan(source.code, end, min(len(source.code), end + 200))
        if following and following[0].text != ";":
            offset, got = following[0].start, following[0].text
        else:
            offset, got = end, None
    else:
        offset, got = start + token.start_pos, str(token)
    clause = "WATERMARK" if rule == "source_watermark" else clause_at(source, start, offset)
    before = [t for t in scan(source.code, start, offset) if t.end <= offset]
    if rule == "windowing" and not (before and before[-1].upper == "OF"):  # END OF WINDOW needs WINDOW
        expected -= _settled_clauses(source, start, offset)
    misspelt = _misspelt_window_fn(source, start, offset)
    if misspelt is not None:
        name, suggestion = misspelt
        return source.error(SqlflowSyntaxError, f"unknown window function {name.text}", name.start,
                            clause="WINDOW", hint=f"did you mean {suggestion}?")
    what = f"'{got}'" if got is not None else "the end of the statement"
    phrases = WATERMARK_PHRASES if rule == "source_watermark" else None
    message = f"expected {suggest.expected_words(expected, phrases)}, got {what}"
    hint = None
    if got is not None and re.match(r"[A-Za-z_]", got):
        keywords = [k for k in suggest.KEYWORDS if k in expected] or suggest.KEYWORDS
        hint = suggest.did_you_mean(got, keywords)
        if hint is None and got.upper() in ("WHERE", "GROUP", "HAVING") and rule == "windowing":
            hint = f"{got.upper()} goes before the WINDOW clause"
    if rule == "source_watermark" and got is not None and got.upper() == "AS":
        hint = "sqlflow needs a column name after WATERMARK; compute the column in a subquery"
    if clause == "EMIT" and got is not None and (got.upper() == "RETRACTING" or suggest.nearest(got, ["RETRACTING"])):
        hint = "did you mean ACCUMULATING AND RETRACTING?"
    if clause == "EMIT" and got is not None and got.upper() in ("ON", "CLOSING") and "$END" in expected:
        hint = "write EMIT <mode> [ON TIME ALWAYS] [CLOSING ALWAYS] [REOPEN ON MERGE], each option once, in this order"
    if clause == "WINDOW" and got is not None and got.upper() == "TIME" and len(before) >= 2 \
            and before[-2].upper == "ON" and before[-1].kind == WORD:  # `ON PROCESING TIME`
        domain = suggest.nearest(before[-1].text, TIME_DOMAINS)
        hint = f"did you mean ON {domain} TIME?" if domain else \
            "ON takes a column or a time domain: " + ", ".join(f"{d} TIME" for d in TIME_DOMAINS)
    if hint is None and got is not None and "DURATION" in expected:  # `1 hour`, `1h30m`, `1w`
        hint = suggest.duration_hint(source.code, offset)
    if hint is None and got is not None and before and re.fullmatch(_DURATION_TEXT, before[-1].text) \
            and re.fullmatch(_DURATION_TEXT, got):  # `1h 30m`
        hint = suggest.duration_hint(before[-1].text + got, 0)
    if hint is None and clause == "WINDOW":
        hint = _window_fn_arguments(source, start, offset, got)
    return source.error(SqlflowSyntaxError, message, offset, clause=clause, hint=hint)


_DURATION_TEXT = re.compile(r"\d+(\.\d+)?[A-Za-z]+")


def _settled_clauses(source: Source, start: int, offset: int) -> set[str]:
    """Clause keywords that cannot come next: those already written, and those that go earlier."""
    ranks = {word: rank for rank, word in enumerate(CLAUSES)}
    depth, last = 0, -1
    for tok in scan(source.code, start, offset):
        if tok.kind == PUNCT and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
        elif depth == 0 and tok.upper in ranks:
            last = max(last, ranks[tok.upper])
    return {word for word, rank in ranks.items() if rank <= last}


def _word_at(code: str, offset: int) -> str:
    m = re.compile(r"\w+|\S").match(code, offset)
    return m.group() if m else ""


def _misspelt_window_fn(source: Source, start: int, offset: int):
    """`WINDOW SESSION(GAP 30m)` fails inside its arguments: the name is the mistake."""
    tokens = scan(source.code, start, offset + 1)
    for i, tok in enumerate(tokens[:-2]):
        name, paren = tokens[i + 1], tokens[i + 2]
        if tok.upper != "WINDOW" or name.kind != WORD or paren.text != "(" \
                or name.upper in suggest.WINDOW_FNS or offset <= paren.start:
            continue
        depth = 0
        for later in tokens[i + 2:]:
            depth += {"(": 1, ")": -1}.get(later.text, 0) if later.kind == PUNCT else 0
            if depth == 0:
                return None  # its arguments closed before the error
        rest = scan(source.code, paren.end, min(len(source.code), paren.end + 200))
        close = next((t for t in rest if t.kind == PUNCT and t.text in "()"), None)
        arguments = source.code[paren.end:close.start] if close is not None and close.text == ")" else ""
        match = suggest.window_fn_for(name.text, arguments) or suggest.nearest(name.text, suggest.WINDOW_FNS)
        return (name, match) if match is not None else None
    return None


def _window_fn_arguments(source: Source, start: int, offset: int, got: str | None) -> str | None:
    """`SLIDING(SIZE 1h)`: an error inside a built-in window function's parentheses names the
    parameters it lacks, or their order when one is out of place, as the grammar writes them."""
    tokens = scan(source.code, start, len(source.code))
    opened = None
    for i, tok in enumerate(tokens[:-1]):
        if tok.start >= offset:
            break
        if tok.upper in suggest.WINDOW_FNS and tokens[i + 1].text == "(":
            opened = i
    if opened is None:
        return None
    name, depth, written = tokens[opened].upper, 0, set()
    for tok in tokens[opened + 1:]:
        if tok.kind == PUNCT and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
            if depth == 0:
                if tok.start < offset:
                    return None  # the error is after its arguments
                break
        elif depth == 1 and tok.kind == WORD:
            written.add(tok.upper)
    required, signature = window_fn_signature(name)
    missing = [p for p in required if p not in written]
    if missing:
        return f"{name} needs {' and '.join(missing)}: {signature}"
    if got is not None and got.upper() in re.findall(r"\b[A-Z]+\b", signature)[1:]:  # a parameter out of place
        return f"{name} takes its parameters in this order: {signature}"
    return None


_GRAMMAR_THINGS = {"duration": "<duration>", "sql_expr": "<expression>"}


@functools.lru_cache(maxsize=None)
def window_fn_signature(name: str) -> tuple[tuple[str, ...], str]:
    """The parameters a built-in window function requires, and how it is written, read from the
    grammar's alternatives (grammar/sqlflow.lark).

    >>> window_fn_signature("SLIDING")
    (('SIZE', 'PERIOD'), 'SLIDING(SIZE <duration>, PERIOD <duration>[, OFFSET <duration>])')
    >>> window_fn_signature("SESSIONS")
    (('GAP',), 'SESSIONS(GAP <duration>)')
    """
    from .clauses import parser

    forms = [[s.name for s in rule.expansion] for rule in parser().rules
             if rule.alias == name.lower() and rule.expansion and rule.expansion[0].name == name]
    punctuation = {"LPAR", "RPAR", "COMMA", name}
    words = [[s for s in form if s.isupper() and s not in punctuation] for form in forms]
    required = tuple(w for w in max(words, key=len) if all(w in other for other in words))
    longest = max(forms, key=len)
    parts, optional = [], False
    for symbol in longest[2:-1]:
        if symbol == "COMMA":
            continue
        if symbol.isupper():
            optional = symbol not in required
            parts.append(("[, " if optional else ", ") + symbol)
        else:
            parts[-1] += " " + _GRAMMAR_THINGS.get(symbol, f"<{symbol}>")
            if optional:
                parts[-1] += "]"
    return required, f"{name}(" + "".join(parts).lstrip(", ") + ")"
