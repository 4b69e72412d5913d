"""Types and names Spark gives a windowed SELECT, and the checks sqlflow makes on them.

- The input relation's types: the event time and arrival time must be timestamps, a per-row
  gap an interval, a WHEN predicate a boolean; SUM / AVG and the like of a string is refused
  (Spark would cast the string to a double and fail on the first non-number at run time).
- The *naming query*: the original SELECT without sqlflow's clauses (pane columns supplied by
  a one-row relation of NULLs), analysed, not run: its schema gives the name Spark gives each
  SELECT item and the type of each aggregate call, so the engine's output is cast to it.

>>> from sqlflow.frontend import parse
>>> from sqlflow.plan.windowed_select import describe
>>> s = parse("SELECT k, SUM(v), date_format(window_start, 'HH') FROM t GROUP BY k WINDOW FIXED(SIZE 1h) ON ts")
>>> from sqlflow.plan.relations import to_spark_sql
>>> print(to_spark_sql(naming_query(describe(s, *s.windowed_selects()[0]))))
SELECT k, SUM(v), DATE_FORMAT(window_start, 'HH'), SUM(v) FROM t CROSS JOIN (SELECT CAST(NULL AS TIMESTAMP) AS window_start, CAST(NULL AS TIMESTAMP) AS window_end, CAST(NULL AS BIGINT) AS pane_index, CAST(NULL AS STRING) AS pane_timing, CAST(NULL AS BOOLEAN) AS is_last, CAST(NULL AS TIMESTAMP) AS emit_time, CAST(NULL AS TIMESTAMP) AS output_time, CAST(NULL AS BOOLEAN) AS is_retraction) AS __sqlflow_pane GROUP BY k, window_start, window_end, pane_index, pane_timing, is_last, emit_time, output_time, is_retraction
"""
from __future__ import annotations

from sqlglot import exp

from .. import ast
from ..columns import ALL_PANE_COLUMNS, ARRIVAL_TIME, EVENT_TIME, GAP, PANE_ALIAS, PANE_TYPES, when_column
from ..engine import when_predicates
from ..errors import SqlflowAnalysisError
from ..plan.aggregate_calls import NUMERIC_KINDS
from ..plan.inputs import InputRelation
from ..plan.relations import strip_clauses, visible_ctes, with_ctes
from ..plan.windowed_select import WindowedSelect, is_pane_ref

#: pyspark's class of each DDL type name sqlflow/columns.py uses
_SPARK_TYPES = {"int": "IntegerType", "bigint": "LongType", "string": "StringType", "boolean": "BooleanType",
                "timestamp": "TimestampType"}


def spark_type(ddl: str):
    """The Spark type of a DDL type name of sqlflow/columns.py (no SparkContext needed).

    >>> spark_type("bigint"), spark_type("timestamp")
    (LongType(), TimestampType())
    """
    from pyspark.sql import types as T

    return getattr(T, _SPARK_TYPES[ddl])()


def _type_name(dtype) -> str:
    return dtype.simpleString().upper()


def to_timestamp_hint(column: str, dtype=None) -> str:
    """How to make a TIMESTAMP of a column that is not one: a string is parsed, a number may be
    seconds since the epoch."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.StringType):
        return f"convert it in a subquery, e.g. to_timestamp({column}) (or to_timestamp({column}, 'yyyy-MM-dd HH:mm:ss'))"
    return f"convert it in a subquery, e.g. timestamp_seconds({column}) or to_timestamp({column})"


def check_input_types(ws: WindowedSelect, rel: InputRelation, schema) -> str | None:
    """Raise a located SqlflowAnalysisError for an input column of the wrong type; mark the
    aggregate calls the engine cannot compute for their argument's type (the native path runs
    them); return why the engine cannot take the GROUP BY keys, if it cannot."""
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in schema.fields}
    timestamps = (T.TimestampType, T.TimestampNTZType)
    et = types[EVENT_TIME]
    if not isinstance(et, timestamps):
        if ws.event_time_clause == "WINDOW":
            window = ws.windowing.window
            column, pos, clause = window.on, window.on_pos or window.pos, "WINDOW"
        elif ws.event_time_clause == "ARRIVAL":  # ON PROCESSING / INGESTION TIME: the arrival is the time
            src = ws.replayed
            w = src.watermark
            raise ws.error(SqlflowAnalysisError, f"the arrival column {src.arrival} is {_type_name(et)}, not a "
                           "TIMESTAMP", "WATERMARK", pos=w.arrival_pos or w.pos, hint=to_timestamp_hint(src.arrival, et))
        else:
            w = ws.sources[0].watermark
            column, pos, clause = w.event_time, w.event_time_pos or w.pos, "WATERMARK"
        raise ws.error(SqlflowAnalysisError, f"the event-time column {column} is {_type_name(et)}, not a TIMESTAMP",
                       clause, pos=pos, hint=to_timestamp_hint(str(column), et))
    if rel.replay and ws.upstream is None and not isinstance(types[ARRIVAL_TIME], timestamps):
        src = ws.replayed
        w = src.watermark
        raise ws.error(SqlflowAnalysisError, f"the arrival column {src.arrival} is {_type_name(types[ARRIVAL_TIME])}, "
                       "not a TIMESTAMP", "WATERMARK", pos=w.arrival_pos or w.pos,
                       hint=to_timestamp_hint(src.arrival, types[ARRIVAL_TIME]))
    fn = ws.window
    if (rel.gap and isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.SqlExpr)
            and not isinstance(types[GAP], (T.DayTimeIntervalType, T.CalendarIntervalType))):
        raise ws.error(SqlflowAnalysisError, f"the session GAP {fn.gap.sql} is {_type_name(types[GAP])}, "
                       "not an interval", "WINDOW", pos=fn.gap.pos or fn.pos,
                       hint="write it as an interval, e.g. INTERVAL 5 MINUTES or make_interval(...)")
    for i, predicate in enumerate(when_predicates(ws.windowing.effective_trigger)):
        dtype = types[when_column(i)]
        if not isinstance(dtype, (T.BooleanType, T.NullType)):
            raise ws.error(SqlflowAnalysisError, f"WHEN needs a boolean predicate, {predicate.sql} is "
                           f"{_type_name(dtype)}", "TRIGGER", pos=predicate.pos,
                           hint="compare it, e.g. WHEN(x > 0)")
    numeric = (T.NumericType, T.NullType, T.DayTimeIntervalType)
    for call, arg in zip(ws.calls, rel.call_args):
        if arg is None or call.kind is None or call.arg is None:
            continue
        dtype = types[arg]
        if call.kind in NUMERIC_KINDS:
            if isinstance(dtype, T.StringType):
                text = call.node.sql(dialect="spark")
                raise ws.error(SqlflowAnalysisError,
                               f"{text} needs numbers, but {call.arg.sql(dialect='spark')} is a STRING",
                               "SELECT", node=call.node,
                               hint=f"cast it explicitly, e.g. {call.name}(CAST({call.arg.sql(dialect='spark')} AS DOUBLE))")
            if not isinstance(dtype, numeric):
                call.kind, call.why_not = None, f"the sqlflow engine computes {call.name} of numbers, not {_type_name(dtype)}"
                continue
        carried = uncarried(dtype)
        if carried is not None:
            call.kind, call.why_not = None, f"the sqlflow engine cannot carry {carried} values"
    for key, node in zip(rel.keys, ws.keys):
        carried = uncarried(types[key])
        if carried is not None:
            return f"GROUP BY {node.sql(dialect='spark')}: the sqlflow engine cannot carry {carried} values"
    return None


def uncarried(dtype) -> str | None:
    """The type within `dtype` that cannot cross to the engine (Arrow, and PySpark, carry neither
    year-month nor calendar intervals), or None.

    >>> from pyspark.sql import types as T
    >>> uncarried(T.ArrayType(T.YearMonthIntervalType()))
    'INTERVAL YEAR TO MONTH'
    >>> uncarried(T.StructType([T.StructField("a", T.LongType())])) is None
    True
    """
    from pyspark.sql import types as T

    if isinstance(dtype, (T.YearMonthIntervalType, T.CalendarIntervalType)):
        return _type_name(dtype)
    if isinstance(dtype, T.ArrayType):
        return uncarried(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return uncarried(dtype.keyType) or uncarried(dtype.valueType)
    if isinstance(dtype, T.StructType):
        return next((u for u in (uncarried(f.dataType) for f in dtype.fields) if u is not None), None)
    return None


def naming_query(ws: WindowedSelect) -> exp.Query:
    """The original SELECT, its aggregate calls appended as items, runnable by Spark (not run)."""
    select = strip_clauses(ws.select)
    for arg in ("having", "qualify", "order", "limit", "offset", "distinct", "with_"):
        select.set(arg, None)
    items = list(select.expressions) + [call.node.copy() for call in ws.calls]
    select.set("expressions", items)
    if mentions_panes(ws):
        row = exp.Select(expressions=[exp.alias_(exp.Cast(this=exp.Null(), to=exp.DataType.build(PANE_TYPES[c])), c)
                                      for c in ALL_PANE_COLUMNS])
        pane = exp.Subquery(this=row, alias=exp.TableAlias(this=exp.to_identifier(PANE_ALIAS)))
        select.append("joins", exp.Join(this=pane, kind="CROSS"))
        group = select.args.get("group")
        if group is None:
            select.set("group", exp.Group(expressions=[exp.column(c) for c in ALL_PANE_COLUMNS]))
        elif not group.args.get("all"):
            group.set("expressions", list(group.expressions) + [exp.column(c) for c in ALL_PANE_COLUMNS])
    return with_ctes(select, visible_ctes(ws.select))


def names_and_types(ws: WindowedSelect, schema) -> tuple[list[str], list]:
    """From the naming query's schema: the output name of each item, the type of each call."""
    fields = schema.fields
    n = len(ws.select.expressions)
    return [f.name for f in fields[:n]], [f.dataType for f in fields[n:]]


def mentions_panes(ws: WindowedSelect) -> bool:
    """Whether an item of the SELECT mentions a pane column. Only then does a native rewrite need
    the naming query: for the names Spark gives such items, and to find input columns that clash
    with the pane columns (the cross join of `naming_query` makes their references ambiguous)."""
    return any(is_pane_ref(n) for item in ws.select.expressions for n in item.walk())


def pane_expression_names(ws: WindowedSelect, names: list[str]) -> dict[int, str]:
    """Items that mention a pane column inside an expression, unaliased: their Spark names."""
    out = {}
    for i, item in enumerate(ws.select.expressions):
        if not isinstance(item, exp.Alias) and not is_pane_ref(item) and any(is_pane_ref(n) for n in item.walk()):
            out[i] = names[i]
    return out


def is_ntz(schema) -> bool:
    from pyspark.sql import types as T

    return isinstance({f.name: f.dataType for f in schema.fields}[EVENT_TIME], T.TimestampNTZType)

