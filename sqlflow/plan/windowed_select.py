"""The anatomy of a windowed SELECT: its keys, aggregate calls, event time and watermark sources.

Both Spark paths start from this: the native rewrite edits the SELECT in place, the engine path
computes its input relation from it. Everything here is sqlglot, no Spark; which path runs it is the engine's
answer (`WindowedSelect.path`).

>>> from sqlflow.frontend import parse
>>> s = parse("SELECT e.k AS key, SUM(v * 2) AS total, COUNT(*) / 2 AS half, window_end "
...           "FROM events WATERMARK ts DELAY OF 1m AS e GROUP BY 1 WINDOW FIXED(SIZE 1m)")
>>> w = describe(s, *s.windowed_selects()[0])
>>> [k.sql() for k in w.keys], [c.node.sql() for c in w.calls]
(['e.k'], ['SUM(v * 2)', 'COUNT(*)'])
>>> w.event_time.sql(), w.event_time_clause, w.arrival
('e.ts', 'WATERMARK', None)
>>> sorted(w.pane_columns_used)
['window_end']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from .. import ast
from ..columns import ALL_PANE_COLUMNS
from ..engine import BOUNDED, REPLAY, EnginePlan, Path, path_for
from ..engine.paths import window_kind
from ..errors import SqlflowSemanticError, SqlflowUnsupportedError
from ..frontend.dialect import WINDOWING_KEY
from ..frontend.statement import DIALECT, Statement, watermarks_feeding
from .aggregate_calls import AggregateCall, aggregate_call, aggregate_calls, is_aggregate_call

if TYPE_CHECKING:  # pragma: no cover
    from .pipelines import Upstream


@dataclass
class Source:
    """A relation with a WATERMARK clause that feeds the window."""

    node: exp.Expr
    watermark: ast.SourceWatermark
    direct: bool  # in the SELECT's own FROM or JOINs (its columns can be qualified by its name)

    @property
    def arrival(self) -> str:
        """The ARRIVAL column as written (a replayed source's; `WindowedSelect.arrival_sources`)."""
        if self.watermark.arrival is None:
            raise ValueError(f"the source at {self.watermark.pos} has no ARRIVAL column")
        return self.watermark.arrival

    def column(self, name: str) -> exp.Expr:
        """A column of this relation, qualified by its name when that avoids ambiguity."""
        col = parse_column(name)
        qualifier = self.qualifier
        if isinstance(col, exp.Column) and not col.table and qualifier is not None:
            col.set("table", exp.to_identifier(qualifier.this, quoted=qualifier.quoted))
        return col

    @property
    def qualifier(self) -> exp.Identifier | None:
        if not self.direct:
            return None
        alias = self.node.args.get("alias")
        if alias is not None and alias.this:
            return alias.this
        if isinstance(self.node, exp.Table) and isinstance(self.node.this, exp.Identifier):
            return self.node.this  # (a table function without an alias has no name to qualify by)
        return None


@dataclass
class WindowedSelect:
    """One windowed SELECT of a statement, taken apart."""

    statement: Statement
    select: exp.Select
    windowing: ast.Windowing
    keys: list[exp.Expr]
    calls: list[AggregateCall]
    event_time: exp.Expr
    #: where the event time comes from: WINDOW (ON <column>), WATERMARK (the source's column),
    #: ARRIVAL (ON PROCESSING / INGESTION TIME, replayed) or STREAM (those on a stream: batch time)
    event_time_clause: str
    sources: list[Source]
    arrival_source: Source | None
    pane_columns_used: set[str] = field(default_factory=set)
    #: the replayed windowed stage whose panes this SELECT reads as they are emitted (each pane
    #: arriving at its emit_time, under that stage's output watermark: `pipelines.Upstream`)
    upstream: Upstream | None = None

    @property
    def arrival(self) -> exp.Expr | None:
        if self.upstream is not None:
            return self.upstream.arrival.copy()
        src = self.arrival_source
        return None if src is None else src.column(src.arrival)

    @property
    def arrival_name(self) -> str | None:
        """The arrival column as written (ARRIVAL x), or the stage's emit_time."""
        if self.upstream is not None:
            return self.upstream.arrival.sql(dialect="spark")
        return None if self.arrival_source is None else self.arrival_source.arrival

    @property
    def replayed(self) -> Source:
        """The replayed source of a replay that reads no upstream stage (`arrival_source`)."""
        if self.arrival_source is None:
            raise ValueError(f"{self.label()} replays no source of its own")
        return self.arrival_source

    @property
    def replay(self) -> bool:
        return self.arrival_source is not None or self.upstream is not None

    @property
    def arrival_sources(self) -> list[Source]:
        """The replayed sources (several: branches of a UNION ALL, the watermark the minimum)."""
        return sorted((s for s in self.sources if s.watermark.arrival is not None), key=_text_order)

    @property
    def domain(self) -> ast.TimeDomain:
        return self.windowing.domain

    @property
    def window(self) -> ast.WindowFn:
        return self.windowing.window.fn

    @property
    def window_kind(self) -> str:
        return window_kind(self.window)

    @property
    def position(self) -> ast.Position | None:
        return select_position(self.statement, self.select) or self.windowing.pos

    def path(self, operator: str = "engine") -> Path:
        """The engine's answer (`sqlflow.engine.path_for`) for this SELECT on its bounded or
        replayed input: which engine path runs it, or whether Spark's own rewrite gives its panes."""
        arrival = self.arrival_source.watermark.arrival if self.arrival_source is not None else None
        return path_for(EnginePlan(self.windowing, ()), input=REPLAY if self.replay else BOUNDED,
                        operator=operator, arrival=arrival)

    def label(self) -> str:
        """`the SELECT with WINDOW SESSIONS at line 3, column 1` (where its WINDOW clause is)."""
        return f"the SELECT with WINDOW {self.window_kind}{self._where()}"

    def _where(self) -> str:
        pos = self.windowing.window.pos or self.windowing.pos
        return f" at line {pos.line}, column {pos.column}" if pos else ""

    def error(self, kind, message: str, clause: str, node: exp.Expr | None = None,
              pos: ast.Position | None = None, hint: str | None = None):
        """A located error; a message naming this SELECT by `label()` does not repeat the line
        and column the error is located at (one line number per place)."""
        pos = pos or (self.statement.position(node) if node is not None else None) or self.position
        where = self._where()
        if where and pos is not None and where == f" at line {pos.line}, column {pos.column}":
            message = message.replace(f"the SELECT with WINDOW {self.window_kind}{where}",
                                      f"the SELECT with WINDOW {self.window_kind}")
        return self.statement.source.error_at(kind, message, pos, clause=clause, hint=hint)


def select_position(statement: Statement, select: exp.Select) -> ast.Position | None:
    """Where a SELECT's list starts in the query text (its own WITH clause left out)."""
    found = [p for p in (statement.position(item) for item in select.expressions) if p is not None]
    return min(found, key=lambda p: (p.line, p.column)) if found else statement.position(select)


def parse_column(name: str) -> exp.Expr:
    """A column name as written in our clauses (`e.ts`, `` `event time` ``) as a sqlglot node."""
    return sqlglot.parse_one(name, read=DIALECT)


def describe(statement: Statement, select: exp.Select, windowing: ast.Windowing) -> WindowedSelect:
    """Take a windowed SELECT apart (raises SqlflowUnsupportedError for what no path can run)."""
    keys = group_keys(statement, select, windowing)
    scopes = list(select.expressions) + [select.args.get("having"), select.args.get("qualify"),
                                         select.args.get("order")]
    scopes += list(select.args.get("windows") or [])
    calls: list[AggregateCall] = []
    for node in aggregate_calls(scopes):
        if not any(node == c.node for c in calls):
            calls.append(aggregate_call(node))
    sources = feeding_sources(select)
    arriving = sorted((s for s in sources if s.watermark.arrival is not None), key=_text_order)
    if windowing.domain is not ast.TimeDomain.EVENT_TIME:
        # a row's time is its arrival (replay) or its micro-batch's time (a stream: Spark's
        # current_timestamp() is the batch's); bounded data has neither (execute.py says so)
        event_time, clause = ((arriving[0].column(arriving[0].arrival), "ARRIVAL") if arriving
                              else (exp.CurrentTimestamp(), "STREAM"))
    elif windowing.window.on is not None:
        event_time, clause = parse_column(windowing.window.on), "WINDOW"
    else:
        if len(sources) != 1:  # validate() reports this first, with its own words
            raise statement.source.error_at(SqlflowSemanticError, "no single event-time column for this window",
                                             windowing.window.pos, clause="WINDOW")
        event_time, clause = sources[0].column(sources[0].watermark.event_time), "WATERMARK"
    if len(arriving) > 1:
        _check_union_of_replays(statement, windowing, arriving)
    if arriving and len(sources) > len(arriving):
        other = next(s for s in sources if s.watermark.arrival is None)
        raise statement.source.error_at(
            SqlflowUnsupportedError, "a replayed source (ARRIVAL) and a source without arrival times feed "
            "this window: the arrival of the joined rows is unknown", other.watermark.pos, clause="WATERMARK",
            hint="give every watermarked source an ARRIVAL column, or drop the WATERMARK clause of the other")
    used = {c.name.lower() for c in _pane_refs(scopes)}
    return WindowedSelect(statement, select, windowing, keys, calls, event_time, clause, sources,
                          arriving[0] if arriving else None, used)


def check_known_window_fn(statement: Statement, windowing: ast.Windowing) -> None:
    """A custom window function must be registered before the query is planned: the plan carries
    its class to the executors, which would otherwise fail inside a Python worker."""
    from ..engine import registered_window_fn
    from ..frontend import suggest

    fn = windowing.window.fn
    if not isinstance(fn, ast.CustomWindow) or registered_window_fn(fn.name) is not None:
        return
    arguments = ", ".join(str(a) if isinstance(a, ast.Duration) else repr(a) for a in fn.args)
    meant = suggest.window_fn_for(fn.name, arguments) or suggest.nearest(fn.name, suggest.WINDOW_FNS)
    hint = f"did you mean {meant}? " if meant else ""
    raise statement.source.error_at(
        SqlflowSemanticError, f"unknown window function {fn.name}", fn.pos or windowing.window.pos, clause="WINDOW",
        hint=f"{hint}A custom window function is registered with sqlflow.register_window_fn before the query runs")


def _text_order(source: Source) -> tuple[int, int]:
    pos = source.watermark.pos
    return (pos.line, pos.column) if pos is not None else (0, 0)


def _check_union_of_replays(statement: Statement, windowing: ast.Windowing, arriving: list[Source]) -> None:
    """Several replayed sources feed one window only as branches of a UNION ALL (each branch one
    source, the rows of all of them one input), with one ARRIVAL column name: each row arrives
    at its own source's arrival time, and the window's watermark is the minimum of theirs
    (docs/semantics.md, 9). Rows of two replays joined to each other have no defined arrival."""
    name = [(s.watermark.arrival or "").lower() for s in arriving]
    if len(set(name)) > 1:
        first, other = arriving[0].watermark, next(s.watermark for s, n in zip(arriving, name) if n != name[0])
        raise statement.source.error_at(
            SqlflowUnsupportedError, f"the replayed sources of this window name their arrival columns differently "
            f"(ARRIVAL {first.arrival}, ARRIVAL {other.arrival})", other.arrival_pos or other.pos, clause="WATERMARK",
            hint=f"select the arrival column under one name in every branch of the UNION ALL (e.g. "
                 f"{other.arrival} AS {first.arrival}) and name that in each ARRIVAL")
    branches: set[int] = set()
    for s in arriving:
        branch = s.node.find_ancestor(exp.Select)
        union = branch.find_ancestor(exp.Union) if branch is not None else None
        if branch is None or union is None or union.args.get("distinct") or id(branch) in branches:
            w = s.watermark
            raise statement.source.error_at(
                SqlflowUnsupportedError, f"{len(arriving)} sources with ARRIVAL feed this window, not as branches "
                "of one UNION ALL: the arrival of rows of two replays joined together is unknown",
                w.arrival_pos or w.pos, clause="WATERMARK",
                hint="combine the replayed sources with UNION ALL (one source per branch), or replay one source "
                     "and join the others without ARRIVAL")
        branches.add(id(branch))


def _pane_refs(scopes) -> list[exp.Column]:
    out = []
    for scope in scopes:
        if scope is None:
            continue
        for node in scope.walk():
            if is_pane_ref(node):
                out.append(node)
    return out


def is_pane_ref(node: exp.Expr) -> bool:
    """An unqualified reference to a pane column (window_start, pane_index, ...)."""
    return (isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier)
            and node.name.lower() in ALL_PANE_COLUMNS)


def group_keys(statement: Statement, select: exp.Select, windowing: ast.Windowing) -> list[exp.Expr]:
    """The GROUP BY keys as expressions over the input row (ordinals and aliases resolved)."""
    group = select.args.get("group")
    items = select.expressions
    if group is None:
        return []
    for arg in ("grouping_sets", "cube", "rollup"):
        if group.args.get(arg):
            raise statement.source.error_at(
                SqlflowUnsupportedError, f"GROUP BY {arg.upper().replace('_', ' ')} in a windowed SELECT",
                select_position(statement, select) or windowing.pos, clause="SELECT",
                hint="run one windowed SELECT per grouping and UNION ALL them")
    if group.args.get("all"):
        return [_unalias(item).copy() for item in items
                if not any(is_aggregate_call(n) for n in item.walk()) and not _is_pane_item(item)]
    keys = []
    for key in group.expressions:
        if isinstance(key, exp.Literal) and not key.is_string and key.name.isdigit():
            index = int(key.name) - 1
            if not 0 <= index < len(items):
                raise statement.source.error_at(
                    SqlflowSemanticError, f"GROUP BY {key.name}: the SELECT has {len(items)} items",
                    select_position(statement, select) or windowing.pos, clause="SELECT")
            keys.append(_unalias(items[index]).copy())
            continue
        if isinstance(key, exp.Column) and not key.table:
            aliased = [item for item in items if isinstance(item, exp.Alias)
                       and item.alias.lower() == key.name.lower() and not _is_same_column(item.this, key)]
            if aliased:
                keys.append(aliased[0].this.copy())
                continue
        keys.append(key.copy())
    return keys


def _unalias(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def _is_pane_item(item: exp.Expr) -> bool:
    return is_pane_ref(_unalias(item))


def _is_same_column(a: exp.Expr, b: exp.Expr) -> bool:
    return isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.name.lower() == b.name.lower()


def matches_key(node: exp.Expr, key: exp.Expr) -> bool:
    """`node` is the GROUP BY key `key`: the same expression, or the same column with or without
    its qualifier (`k` and `t.k`)."""
    if isinstance(node, exp.Column) and isinstance(key, exp.Column):
        if node.name.lower() != key.name.lower() or not isinstance(node.this, exp.Identifier):
            return False
        return not node.table or not key.table or node.table.lower() == key.table.lower()
    return node == key


def feeding_sources(select: exp.Select) -> list[Source]:
    """The relations with a WATERMARK clause in this SELECT's FROM, through subqueries and CTEs."""
    return [Source(node, watermark, direct) for node, watermark, direct in watermarks_feeding(select)]


def windowing_of(select: exp.Select) -> ast.Windowing | None:
    """The sqlflow clauses of a windowed SELECT (WINDOW, TRIGGER, EMIT ...), or None."""
    w = select.meta.get(WINDOWING_KEY) if select._meta else None
    return w if isinstance(w, ast.Windowing) else None
