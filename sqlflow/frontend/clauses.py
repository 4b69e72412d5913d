"""Our clauses' text to `sqlflow.ast`: the lark parse of `grammar/sqlflow.lark` and its transformer.

Each method of `_ToAst` is named after a grammar rule and builds the AST class of the same name
(`repeat_until` -> `RepeatUntil`). Positions are offsets into the whole query text.

>>> from sqlflow.frontend.source import Source
>>> q = "WINDOW FIXED(SIZE 5m) TRIGGER REPEAT(COUNT 10)"
>>> w = parse_windowing(Source(q), 0, len(q))
>>> w.window.fn, w.trigger
(Fixed(size=Duration(micros=300000000), offset=Duration(micros=0)), Repeat(trigger=Count(n=10)))
>>> w.trigger.trigger.pos
Position(line=1, column=38)
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedInput, VisitError

from .. import ast
from ..errors import SqlflowError, SqlflowSemanticError, SqlflowSyntaxError
from ..grammar import START_RULES, grammar_text
from ..time import parse_duration
from . import intervals, limits, printer, sqlexpr, suggest, syntax_errors
from .scan import PUNCT, scan
from .source import Source


class _AlwaysAcceptName:
    """lark post-lexer that keeps NAME in every lexer state, so a misspelt keyword is read as
    one whole word (reported with a suggestion) rather than as a keyword prefix."""

    always_accept = ("NAME",)

    def process(self, stream):
        return stream


@functools.lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser of the grammar (built once, ~50 ms)."""
    return Lark(grammar_text(), parser="lalr", start=list(START_RULES),
                propagate_positions=True, maybe_placeholders=True, postlex=_AlwaysAcceptName())


# --------------------------------------------------------------------------- entry points


def parse_windowing(source: Source, start: int, end: int) -> ast.Windowing:
    """The clause tail source.text[start:end] (WINDOW ... TRIGGER ... EMIT ...)."""
    return _parse(source, start, end, "windowing")


def parse_source_watermark(source: Source, start: int, end: int) -> ast.SourceWatermark:
    """The WATERMARK clause source.text[start:end] of a relation in FROM."""
    return _parse(source, start, end, "source_watermark")


#: deepest nesting of parentheses, and of triggers, inside our clauses (the AST is walked
#: recursively downstream: desugaring, printing, validation, the engine's trigger algebra)
MAX_NESTING = 64


def _parse(source: Source, start: int, end: int, rule: str):
    _check_nesting(source, start, end, rule)
    code = source.code
    try:
        tree = parser().parse(code[start:end], start=rule)
    except UnexpectedInput as error:
        raise syntax_errors.from_lark(source, start, end, rule, error) from None
    try:
        return _ToAst(source, start, rule).transform(tree)
    except VisitError as error:
        if isinstance(error.orig_exc, SqlflowError):
            raise error.orig_exc from None
        raise


def _check_nesting(source: Source, start: int, end: int, rule: str) -> None:
    depth = 0
    for tok in scan(source.code, start, end):
        if tok.kind == PUNCT and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
            if depth > MAX_NESTING:
                clause = "WATERMARK" if rule == "source_watermark" else syntax_errors.clause_at(source, start, tok.start)
                raise source.error(SqlflowSyntaxError,
                                   f"parentheses nested more than {MAX_NESTING} deep", tok.start,
                                   clause=clause)


# --------------------------------------------------------------------------- lark tree -> AST


@dataclass(frozen=True)
class _TriggerClause:
    trigger: ast.Trigger
    pos: ast.Position


@dataclass(frozen=True)
class _SqlText:
    text: str
    offset: int


class _Located(str):
    """A column name while transforming, with where it is written (the clause keeps both)."""

    pos: ast.Position

    def __new__(cls, text: str, pos: ast.Position):
        name = super().__new__(cls, text)
        name.pos = pos
        return name


@dataclass(frozen=True)
class _Domain:
    """`ON PROCESSING TIME` (or INGESTION, EVENT) while transforming, with where it is written."""

    domain: ast.TimeDomain
    pos: ast.Position


_NULL = object()  # the NULL literal while transforming (None is lark's "absent" placeholder)

#: clause AST type -> (name, rank in the language's order)
_CLAUSES = {ast.WindowClause: ("WINDOW", 0), _TriggerClause: ("TRIGGER", 1),
            ast.AllowedLateness: ("ALLOWED LATENESS", 2), ast.Emit: ("EMIT", 3),
            ast.OutputTimestamp: ("OUTPUT TIMESTAMP", 4)}


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    """Bottom-up, without recursion: `WATERMARK LATE WATERMARK LATE ...` nests without
    parentheses, so only the AST's depth, checked in `trigger_clause`, bounds it."""

    def __init__(self, source: Source, base: int, rule: str) -> None:
        super().__init__()
        self.source = source
        self.base = base
        self.rule = rule

    def _pos(self, meta) -> ast.Position:
        return self.source.position(self.base + meta.start_pos)

    def _offset(self, token: Token) -> int:
        assert token.start_pos is not None  # the lexer places every token
        return self.base + token.start_pos

    # ---------------------------------------------------------------- clause tail

    def windowing(self, meta, clauses):
        seen: dict[str, Any] = {}  # clause name -> its node (WindowClause, Trigger, ...)
        for clause in clauses:
            name, rank = _CLAUSES[type(clause)]
            if name in seen:
                raise self._repeated(name, seen[name], clause)
            later = [n for n in seen if _CLAUSES[type(seen[n])][1] > rank]
            if later:
                raise self.source.error_at(SqlflowSyntaxError, f"{name} must come before {later[0]}",
                                           clause.pos, clause=name)
            seen[name] = clause
        if "WINDOW" not in seen:
            first = clauses[0]
            name = _CLAUSES[type(first)][0]
            raise self.source.error_at(
                SqlflowSyntaxError, f"{name} needs a WINDOW clause before it", first.pos,
                clause=name, hint="write WINDOW GLOBAL for one window over all of event time")
        trigger = seen.get("TRIGGER")
        return ast.Windowing(seen["WINDOW"], trigger.trigger if trigger else None,
                             seen.get("ALLOWED LATENESS"), seen.get("EMIT"), pos=self._pos(meta),
                             output=seen.get("OUTPUT TIMESTAMP"))

    def _repeated(self, name: str, first, second) -> SqlflowError:
        if name == "EMIT" and first != second:
            return self.source.error_at(
                SqlflowSemanticError,
                f"EMIT {printer.emit_text(second)} contradicts the earlier EMIT {printer.emit_text(first)}",
                second.pos, clause=name, hint="a query has one accumulation mode" if first.mode != second.mode
                else "a query has one EMIT clause: write its options in it")
        if name == "OUTPUT TIMESTAMP" and first.policy != second.policy:
            return self.source.error_at(
                SqlflowSemanticError,
                f"OUTPUT TIMESTAMP {second.policy.value} contradicts the earlier OUTPUT TIMESTAMP "
                f"{first.policy.value}", second.pos, clause=name, hint="a pane carries one output timestamp")
        hints = {"WINDOW": "a SELECT has one window function; to window twice, window the result "
                           "of a subquery",
                 "TRIGGER": "combine triggers in one clause with SEQUENCE, FIRST_OF or ALL_OF"}
        return self.source.error_at(SqlflowSemanticError, f"{name} is given twice",
                                    second.pos, clause=name, hint=hints.get(name))

    def window_clause(self, meta, children):
        fn, on = children
        if isinstance(on, _Domain):
            return ast.WindowClause(fn, pos=self._pos(meta), on_pos=on.pos, domain=on.domain)
        return ast.WindowClause(fn, str(on) if on is not None else None, pos=self._pos(meta),
                                on_pos=on.pos if on is not None else None)

    def processing_time(self, meta, _):
        return _Domain(ast.TimeDomain.PROCESSING_TIME, self._pos(meta))

    def ingestion_time(self, meta, _):
        return _Domain(ast.TimeDomain.INGESTION_TIME, self._pos(meta))

    def event_time(self, meta, _):
        return _Domain(ast.TimeDomain.EVENT_TIME, self._pos(meta))

    def trigger_clause(self, meta, children):
        too_deep = _too_deep(children[0])
        if too_deep is not None:
            raise self.source.error_at(SqlflowSyntaxError, f"triggers nested more than {MAX_NESTING} deep",
                                       too_deep.pos, clause="TRIGGER")
        return _TriggerClause(children[0], self._pos(meta))

    def allowed_lateness(self, meta, children):
        return ast.AllowedLateness(children[0], pos=self._pos(meta))

    def unbounded(self, meta, _):
        return ast.Unbounded(pos=self._pos(meta))

    def emit(self, meta, children):
        mode, on_time, closing, reopen = children
        return ast.Emit(mode, on_time is not None, closing is not None, reopen is not None, pos=self._pos(meta))

    def on_time_always(self, meta, _):
        return True

    def closing_always(self, meta, _):
        return True

    def reopen_on_merge(self, meta, _):
        return True

    def output_timestamp(self, meta, children):
        return ast.OutputTimestamp(children[0], pos=self._pos(meta))

    def end_of_window(self, meta, _):
        return ast.OutputTime.END_OF_WINDOW

    def start_of_window(self, meta, _):
        return ast.OutputTime.START_OF_WINDOW

    def earliest(self, meta, _):
        return ast.OutputTime.EARLIEST

    def latest(self, meta, _):
        return ast.OutputTime.LATEST

    def discarding(self, meta, _):
        return ast.AccumulationMode.DISCARDING

    def accumulating(self, meta, _):
        return ast.AccumulationMode.ACCUMULATING

    def accumulating_and_retracting(self, meta, _):
        return ast.AccumulationMode.ACCUMULATING_AND_RETRACTING

    # ---------------------------------------------------------------- window functions

    def global_(self, meta, _):
        return ast.Global(pos=self._pos(meta))

    def fixed(self, meta, children):
        size, offset = children
        return ast.Fixed(size, offset or ast.Duration(0), pos=self._pos(meta))

    def sliding(self, meta, children):
        size, period, offset = children
        return ast.Sliding(size, period, offset or ast.Duration(0), pos=self._pos(meta))

    def cumulate(self, meta, children):
        step, size, offset = children
        return ast.Cumulate(step, size, offset or ast.Duration(0), pos=self._pos(meta))

    def sessions(self, meta, children):
        gap = children[0]
        if isinstance(gap, _SqlText):
            gap = self._interval_or_sql(gap, "WINDOW")
        return ast.Sessions(gap, pos=self._pos(meta))

    def _interval_or_sql(self, sql: _SqlText, clause: str):
        """`GAP INTERVAL 5 MINUTES` is a duration; anything else is a per-row expression."""
        if sql.text.lstrip()[:8].upper() == "INTERVAL":
            try:
                return _parse(self.source, sql.offset, sql.offset + len(sql.text), "duration")
            except SqlflowSyntaxError:
                pass
        hint = suggest.misspelt_duration(sql.text)
        if hint is not None:  # `GAP 1 hour` would otherwise be read as Spark SQL
            raise self.source.error(SqlflowSyntaxError, f"GAP needs a duration, got {sql.text.strip()}",
                                    sql.offset + len(sql.text) - len(sql.text.lstrip()), clause=clause, hint=hint)
        text = sqlexpr.located(sql.text, sql.offset, self.source, clause, "the GAP expression")
        return ast.SqlExpr(text, pos=self.source.position(sql.offset))

    def custom_window(self, meta, children):
        name, *args = children
        if args == [None]:
            args = []
        args = tuple(None if a is _NULL else a for a in args)
        return ast.CustomWindow(str(name), args, pos=self._pos(meta))

    def number(self, meta, children):
        token = children[0]
        if _is_whole(token) and limits.too_many_digits(token):
            raise self.source.error(SqlflowSemanticError, limits.whole_too_large(token), self._offset(token),
                                    clause="WINDOW")
        return _number(token)

    def string(self, meta, children):
        return _unescape(children[0][1:-1])

    def true(self, meta, _):
        return True

    def false(self, meta, _):
        return False

    def null(self, meta, _):
        return _NULL

    # ---------------------------------------------------------------- triggers

    def watermark(self, meta, _):
        return ast.Watermark(pos=self._pos(meta))

    def watermark_percentile(self, meta, children):
        return ast.WatermarkPercentile(float(children[0]), pos=self._pos(meta))

    def period(self, meta, children):
        period, offset = children
        return ast.Period(period, offset or ast.Duration(0), pos=self._pos(meta))

    def delay(self, meta, children):
        return ast.Delay(children[0], pos=self._pos(meta))

    def count(self, meta, children):
        if _is_whole(children[0]) and limits.too_many_digits(children[0]):
            raise self.source.error(SqlflowSemanticError, limits.count_too_large(children[0]),
                                    self._offset(children[0]), clause="TRIGGER")
        n = _number(children[0])
        if not isinstance(n, int):
            raise self.source.error(SqlflowSyntaxError, f"COUNT needs a whole number, got {children[0]}",
                                    self._offset(children[0]), clause="TRIGGER")
        return ast.Count(n, pos=self._pos(meta))

    def when(self, meta, children):
        sql: _SqlText = children[0]
        text = sqlexpr.located(sql.text, sql.offset, self.source, "TRIGGER", "the WHEN predicate")
        return ast.When(ast.SqlExpr(text, pos=self.source.position(sql.offset)), pos=self._pos(meta))

    def repeat(self, meta, children):
        return ast.Repeat(children[0], pos=self._pos(meta))

    def repeat_until(self, meta, children):
        return ast.RepeatUntil(children[0], children[1], pos=self._pos(meta))

    def sequence(self, meta, children):
        return ast.Sequence(tuple(children), pos=self._pos(meta))

    def first_of(self, meta, children):
        return ast.FirstOf(tuple(children), pos=self._pos(meta))

    def all_of(self, meta, children):
        return ast.AllOf(tuple(children), pos=self._pos(meta))

    def watermark_early_late(self, meta, children):
        parts = dict(c for c in children if c is not None)
        return ast.WatermarkEarlyLate(parts.get("early"), parts.get("late"), pos=self._pos(meta))

    def early(self, meta, children):
        return ("early", children[0])

    def late(self, meta, children):
        return ("late", children[0])

    # ---------------------------------------------------------------- the source clause

    def source_watermark(self, meta, children):
        column, model, arrival = children
        return ast.SourceWatermark(str(column), model, str(arrival) if arrival is not None else None,
                                   pos=self._pos(meta), event_time_pos=column.pos,
                                   arrival_pos=arrival.pos if arrival is not None else None)

    def bounded_delay(self, meta, children):
        return ast.BoundedDelay(children[0], pos=self._pos(meta))

    def perfect(self, meta, _):
        return ast.Perfect(pos=self._pos(meta))

    def timeline(self, meta, children):
        return ast.Timeline(children[0], pos=self._pos(meta))

    def ascending_per(self, meta, children):
        column, idle = children
        timeout, idle_pos = idle if idle is not None else (None, None)
        return ast.AscendingPer(str(column), timeout, pos=self._pos(meta), partition_pos=column.pos,
                                idle_pos=idle_pos)

    def idle_timeout(self, meta, children):
        return (children[0], self._pos(meta))

    def column(self, meta, names):
        return _Located(self._name(meta, names), self._pos(meta))

    def table(self, meta, names):
        return self._name(meta, names)

    def _name(self, meta, names) -> str:
        if len(names) > MAX_NESTING:  # the Spark layer reads it into a recursive tree
            raise self.source.error(SqlflowSyntaxError, f"a name has at most {MAX_NESTING} parts, "
                                    f"this one has {len(names)}", self.base + meta.start_pos,
                                    clause=self._clause_at(meta))
        return qualified_name(names)

    # ---------------------------------------------------------------- durations, SQL

    def duration(self, meta, children):
        token = children[0]
        text = str(token)
        sign = -1 if text.startswith("-") else 1
        if limits.too_many_digits(re.sub(r"[a-z]+$", "", text, flags=re.I)):
            raise self.source.error(SqlflowSemanticError, limits.too_long(f"the duration {limits.literal_text(text)}"),
                                    self._offset(token), clause=self._clause_at(meta))
        try:
            micros = sign * parse_duration(text.lstrip("+-"))
        except ValueError as error:
            raise self.source.error(SqlflowSyntaxError, str(error), self._offset(token), clause=self._clause_at(meta),
                                    hint=suggest.duration_hint(self.source.code, self._offset(token))) from None
        return ast.Duration(micros, pos=self._pos(meta))

    def interval_text(self, meta, children):
        return self._interval(meta, lambda: intervals.text(children[0]))

    def interval_units(self, meta, children):
        pairs = list(zip(children[0::2], children[1::2]))
        return self._interval(meta, lambda: intervals.units(pairs))

    def interval_range(self, meta, children):
        value, first, last = children
        return self._interval(meta, lambda: intervals.unit_range(value, first, last))

    def _interval(self, meta, compute) -> ast.Duration:
        try:
            micros = compute()
        except intervals.IntervalError as error:
            kind = SqlflowSemanticError if error.semantic else SqlflowSyntaxError
            raise self.source.error(kind, str(error), self.base + meta.start_pos,
                                    clause=self._clause_at(meta)) from None
        return ast.Duration(micros, pos=self._pos(meta))

    def _clause_at(self, meta) -> str | None:
        if self.rule == "source_watermark":
            return "WATERMARK"
        return syntax_errors.clause_at(self.source, self.base, self.base + meta.start_pos)

    def sql_expr(self, meta, _):
        start, end = self.base + meta.start_pos, self.base + meta.end_pos
        return _SqlText(self.source.code[start:end], start)


def _too_deep(trigger: ast.Trigger) -> ast.Trigger | None:
    """The first trigger nested more than MAX_NESTING combinators deep, if any (iteratively)."""
    stack = [(trigger, 0)]
    while stack:
        t, depth = stack.pop()
        if depth > MAX_NESTING:
            return t
        children = (t.triggers if isinstance(t, (ast.Sequence, ast.FirstOf, ast.AllOf))
                    else (t.trigger,) if isinstance(t, ast.Repeat)
                    else (t.trigger, t.until) if isinstance(t, ast.RepeatUntil)
                    else (t.early, t.late) if isinstance(t, ast.WatermarkEarlyLate) else ())
        stack.extend((c, depth + 1) for c in reversed(children) if c is not None)
    return None


# lark names the rule `global`; a Python method cannot be called that
setattr(_ToAst, "global", _ToAst.global_)


# --------------------------------------------------------------------------- values

_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def qualified_name(parts) -> str:
    """Canonical Spark text of a (dotted) name: backticks only where needed.

    >>> qualified_name(["e", "`event_time`"]), qualified_name(["`event time`"]), qualified_name(["`order`"])
    ('e.event_time', '`event time`', '`order`')
    """
    from .keywords import OPTION_WORDS
    from .locate import SQL_WORDS

    out = []
    for part in parts:
        part = str(part)
        if part.startswith("`"):
            part = part[1:-1].replace("``", "`")
        simple = _SIMPLE_NAME.match(part) and part.upper() not in SQL_WORDS \
            and (part.upper() not in suggest.KEYWORDS or part.upper() in OPTION_WORDS)
        out.append(part if simple else "`" + part.replace("`", "``") + "`")
    return ".".join(out)


def _is_whole(token) -> bool:
    return re.fullmatch(r"[+-]?\d+", str(token)) is not None


def _number(token) -> int | float:
    text = str(token)
    return int(text) if _is_whole(text) else float(text)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "0": "\0", "Z": "\x1a"}


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body, flags=re.S)
