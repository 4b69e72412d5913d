"""Event-time ordering: `ORDER BY <the WATERMARK column>` over a replayed or streaming source.

Flink's time design draft, "Ordering Elements in a Stream": the ordering operator buffers every
element and, when the watermark passes their timestamps, emits them sorted. A SELECT is such an
ordering when it reads a watermarked relation directly in its FROM (or JOINs), has no WINDOW clause
and no aggregate, and has an ORDER BY; its first key must then be the source's event-time column,
ascending (further keys break ties). On bounded data (no ARRIVAL, not a stream) the same SELECT
is plain Spark SQL and sorts as Spark sorts (docs/semantics.md, 11).

>>> from sqlflow.frontend.statement import parse_statement
>>> s = parse_statement("SELECT id, ts FROM t WATERMARK ts DELAY OF 1m ARRIVAL at ORDER BY ts, id")
>>> [(o.watermark.event_time, [k.sql() for k in o.tie_breakers]) for o in event_time_orders(s)]
[('ts', ['id'])]
>>> event_time_orders(parse_statement("SELECT * FROM t WATERMARK ts DELAY OF 1m ARRIVAL at"))
[]
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .. import ast
from ..errors import SqlflowSemanticError
from .dialect import WINDOWING_KEY
from .grouping import is_aggregate
from .statement import Statement, watermarks_feeding


@dataclass
class EventTimeOrder:
    """One SELECT ordered by event time: the SELECT, the watermarked relation it reads, its
    WATERMARK clause, and its ORDER BY keys after the event time (the tie-breakers)."""

    select: exp.Select
    relation: exp.Expr
    watermark: ast.SourceWatermark
    first: exp.Ordered
    tie_breakers: list[exp.Expr]

    @property
    def replay(self) -> bool:
        return self.watermark.arrival is not None


def _aggregating(select: exp.Select) -> bool:
    if select.args.get("group") is not None or select.args.get("having") is not None:
        return True
    return any(is_aggregate(node) for item in select.expressions for node in item.walk()
               if not isinstance(node, exp.Subquery))


def event_time_orders(statement: Statement) -> list[EventTimeOrder]:
    """Every SELECT of `statement` that is an event-time ordering candidate, in text order
    (its ORDER BY not yet checked: `check`)."""
    tree = statement.tree
    if tree is None:
        return []
    found = []
    for select in tree.find_all(exp.Select):
        order = select.args.get("order")
        if order is None or not order.expressions:
            continue
        if select._meta and select.meta.get(WINDOWING_KEY) is not None:
            continue
        direct = [(node, w) for node, w, here in watermarks_feeding(select) if here]
        if len(direct) != 1 or _aggregating(select):
            continue
        node, watermark = direct[0]
        first, *rest = order.expressions
        found.append(EventTimeOrder(select, node, watermark, first,
                                    [o.this if isinstance(o, exp.Ordered) and not o.args.get("desc") else o
                                     for o in rest]))
    return found


def is_event_time(order: EventTimeOrder) -> bool:
    """Whether the first ORDER BY key is the WATERMARK column (or an item's alias of it)."""
    key = order.first.this if isinstance(order.first, exp.Ordered) else order.first
    name = order.watermark.event_time.split(".")[-1].strip("`").lower()
    if isinstance(key, exp.Column) and key.name.lower() == name:
        return True
    if isinstance(key, exp.Column) and not key.table:
        for item in order.select.expressions:
            if isinstance(item, exp.Alias) and item.alias.lower() == key.name.lower():
                inner = item.this
                return isinstance(inner, exp.Column) and inner.name.lower() == name
    return False


def check(statement: Statement, order: EventTimeOrder) -> None:
    """A located error unless the ORDER BY starts with the event-time column, ascending."""
    w = order.watermark
    pos = statement.position(order.first) or w.pos
    what = "a replay" if order.replay else "a watermarked stream"
    if not is_event_time(order):
        raise statement.source.error_at(
            SqlflowSemanticError,
            f"ORDER BY over {what} orders rows by event time, as the watermark passes them: its first key "
            f"must be the WATERMARK column {w.event_time}, not {order.first.this.sql(dialect='spark')}",
            pos, clause="ORDER BY",
            hint=f"write ORDER BY {w.event_time}, <tie-breakers>; to sort the recorded rows as a table, "
                 "drop ARRIVAL (bounded data keeps Spark's ORDER BY)")
    if isinstance(order.first, exp.Ordered) and order.first.args.get("desc"):
        raise statement.source.error_at(
            SqlflowSemanticError,
            f"ORDER BY {w.event_time} DESC over {what}: rows come out as the watermark passes them, "
            "in ascending event time", pos, clause="ORDER BY",
            hint=f"write ORDER BY {w.event_time} (ascending), or sort the result afterwards")
