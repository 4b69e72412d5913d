"""Spark's types across the engine: what the engine computes for each aggregate call, and the
Spark SQL that turns its output into Spark's own answer.

The engine computes every aggregate exactly (`sqlflow.engine.aggregates`); Spark, which already
implements its own type rules, finishes what depends on them, on the engine's output:

- SUM of integers: the engine's BIGINT total is Spark's non-ANSI answer (it wraps around); with
  an overflow flag per pane, ANSI mode (`spark.sql.ansi.enabled`, Spark 4's default) fails with
  Spark's ARITHMETIC_OVERFLOW error, whose query context names the call in the user's query;
- SUM of DECIMAL(p, s): the engine's exact total (38 digits, NULL and flagged beyond), checked
  against DECIMAL(min(38, p + 10), s) by Spark: NULL, or ARITHMETIC_OVERFLOW in ANSI mode;
- AVG of DECIMAL(p, s): the engine's exact SUM and COUNT, divided by the bucket job as Spark's
  Average divides (to 39 decimal places, then to s + 4, half up:
  `sqlflow.engine.exact.decimal_average`), checked by Spark against the sum's DECIMAL(p + 10, s)
  and the result's DECIMAL(p + 4, s + 4): NULL, or ARITHMETIC_OVERFLOW in ANSI mode;
- SUM and AVG of day-time intervals: the engine's exact microseconds; an overflow fails with
  Spark's INTERVAL_ARITHMETIC_OVERFLOW, AVG is Spark's own interval division;
- the variance family of a DECIMAL: Spark casts the argument to DOUBLE first, as its own
  aggregates do.

Everything else is the engine's value with Spark's result type (`udfs.bucket.arrow_piece`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..engine import Aggregate, overflow_column
from ..errors import SqlflowExecutionError
from ..plan.relations import quoted
from . import conf

#: the engine kinds whose argument Spark turns into a DOUBLE first
VARIANCE_KINDS = frozenset({"stddev_samp", "stddev_pop", "var_samp", "var_pop"})
_BIGINT_MAX = "9223372036854775807L"


@dataclass
class Outputs:
    """The engine's work for the aggregate calls of one windowed SELECT."""

    aggregates: list = field(default_factory=list)   # engine Aggregates
    types: list = field(default_factory=list)        # (engine output column, Spark type)
    decode: list = field(default_factory=list)       # SQL per call, aliased agg_column(j)
    derived: dict = field(default_factory=dict)      # extra input column -> SQL over the input relation
    #: (output, sum, count, sum scale, scale) per AVG of a DECIMAL: the bucket job divides
    #: (`sqlflow.engine.exact.decimal_average`), Spark checks the result against its type
    averages: list = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return [c for c, _ in self.types]

    def decode_by_column(self) -> dict:
        """{aggregate output column: its SQL} for the calls whose output Spark finishes."""
        out = {}
        for sql in self.decode:
            body, _, alias = sql.rpartition(" AS ")
            if body:
                out[alias.strip("`").replace("``", "`")] = body
        return out


def ansi(spark) -> bool:
    """Whether Spark's ANSI mode is on (the default of Spark 4)."""
    return conf.flag(spark, conf.ANSI_ENABLED, True)


def overflow_error(message: str, flag: str, interval: bool = False) -> str:
    """SQL that fails, when `flag` holds, with Spark's own overflow error (ARITHMETIC_OVERFLOW,
    SQLSTATE 22003, or INTERVAL_ARITHMETIC_OVERFLOW, 22015), whose query context shows
    `message`: an addition past the largest BIGINT (or interval) that Spark cannot fold away."""
    comment = "/* " + message.replace("*/", "* /") + " */"
    if interval:
        return f"make_dt_interval(106751991) {comment} + make_dt_interval(CAST({flag} AS INT) * 106751991)"
    return f"{_BIGINT_MAX} {comment} + CAST({flag} AS BIGINT)"


def guarded_sum(column: str, message: str, interval: bool = False) -> str:
    """SQL of a SUM of integers (or intervals) in ANSI mode: the engine's `column` itself, or
    where its overflow flag holds Spark's overflow error (`overflow_error`)."""
    flag = quoted(overflow_column(column))
    return f"CASE WHEN {flag} THEN {overflow_error(message, flag, interval)} ELSE {quoted(column)} END"


def guarded_flag(column: str, sql: str) -> str | None:
    """The overflow flag's column when `sql` is `guarded_sum`'s SQL of a BIGINT `column` (the
    column itself wherever the flag does not hold), else None: the driver-local step then takes
    the column as it is when no pane of the batch has the flag (owned.arrow_projection).

    >>> guarded_flag("s", guarded_sum("s", "sqlflow: SUM(v) overflows BIGINT")), guarded_flag("s", "`s`")
    ('s__overflow', None)
    >>> guarded_flag("s", guarded_sum("s", "x", interval=True)), guarded_flag("t", guarded_sum("s", "x"))
    (None, None)
    """
    flag = quoted(overflow_column(column))
    head, tail = (f"CASE WHEN {flag} THEN {_BIGINT_MAX} /* ", f" */ + CAST({flag} AS BIGINT) ELSE {quoted(column)} END")
    middle = sql[len(head):len(sql) - len(tail)]
    if len(sql) >= len(head) + len(tail) and sql.startswith(head) and sql.endswith(tail) and "*/" not in middle:
        return overflow_column(column)
    return None


def plan_outputs(ws, rel, schema: dict, agg_types: list, *, ansi_mode: bool, name, rewrite: bool = True) -> Outputs:
    """The engine aggregates, output columns and decoding SQL of `ws`'s aggregate calls.

    `schema`: input column -> Spark type; `agg_types`: the Spark type of each call; `name(j)`:
    the output column of call j. `rewrite=False` keeps one engine aggregate per call, over the
    call's own argument (AVG and the variance family then stay the engine's: the streaming
    operator, whose plan Spark's native streaming aggregation may also run)."""
    from pyspark.sql import types as T

    out = Outputs()
    for j, (call, arg, result) in enumerate(zip(ws.calls, rel.call_args, agg_types)):
        col = name(j)
        kind = call.kind
        arg_type = schema.get(arg)
        where = ws.error(SqlflowExecutionError, f"{call.node.sql(dialect='spark')} overflows {result.simpleString().upper()}",
                         "SELECT", node=call.node)
        message = str(where).splitlines()[0]
        if rewrite and kind in VARIANCE_KINDS and not isinstance(arg_type, (T.DoubleType, T.NullType)):
            double = f"{arg}__double"
            out.derived[double] = f"CAST({quoted(arg)} AS DOUBLE)"
            arg = double
        if kind == "sum" and isinstance(arg_type, T.DecimalType):
            _decimal_sum(out, Aggregate("sum", arg, col), result, ansi_mode, message, col)
        elif rewrite and kind == "avg" and isinstance(arg_type, (T.DecimalType, T.DayTimeIntervalType)):
            total, count = f"{col}__sum", f"{col}__count"
            out.aggregates += [Aggregate("sum", arg, total), Aggregate("count", arg, count)]
            if isinstance(arg_type, T.DecimalType):
                # Spark's Average: the sum in DECIMAL(p + 10, s) (past it NULL, or the ANSI error),
                # divided exactly and rounded to its result type (past it the same); a division in
                # Spark SQL would round twice or overflow its intermediate type
                sum_type = T.DecimalType(min(38, arg_type.precision + 10), arg_type.scale)
                out.types += [(total, T.DecimalType(38, arg_type.scale)), (overflow_column(total), T.BooleanType()),
                              (count, T.LongType()), (col, T.DecimalType(38, result.scale)),
                              (overflow_column(col), T.BooleanType())]
                out.averages.append((col, total, count, arg_type.scale, result.scale))
                test = f"{_overflow_test(total, sum_type)} OR {_overflow_test(col, result)}"
                value = _checked_decimal(col, result, ansi_mode, message, test)
                out.decode.append(f"IF({quoted(count)} = 0, NULL, {value}) AS {quoted(col)}")
            else:
                out.types += [(total, arg_type), (overflow_column(total), T.BooleanType()), (count, T.LongType())]
                flag = quoted(overflow_column(total))
                value = f"CASE WHEN {flag} THEN {overflow_error(message, flag, interval=True)} ELSE {quoted(total)} END"
                out.decode.append(f"CAST({value} / {quoted(count)} AS {result.simpleString()}) AS {quoted(col)}")
        elif kind == "sum" and isinstance(arg_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                                                     T.DayTimeIntervalType)):
            interval = isinstance(arg_type, T.DayTimeIntervalType)
            out.aggregates.append(Aggregate("sum", arg, col))
            out.types += [(col, result), (overflow_column(col), T.BooleanType())]
            if ansi_mode or interval:  # an interval sum fails in both modes, as Spark's does
                out.decode.append(f"{guarded_sum(col, message, interval)} AS {quoted(col)}")
            else:
                out.decode.append(quoted(col))
        else:
            out.aggregates.append(Aggregate(kind, arg, col, call.ignore_nulls))
            out.types.append((col, result))
            out.decode.append(quoted(col))
    return out


def _decimal_sum(out: Outputs, agg: Aggregate, result, ansi_mode: bool, message: str, col: str) -> None:
    from pyspark.sql import types as T

    out.aggregates.append(agg)
    out.types += [(col, T.DecimalType(38, result.scale)), (overflow_column(col), T.BooleanType())]
    out.decode.append(f"{_checked_decimal(col, result, ansi_mode, message)} AS {quoted(col)}")


def _overflow_test(column: str, dtype) -> str:
    """SQL telling whether the engine's exact DECIMAL(38, s) `column` (flagged past 38 digits)
    does not fit `dtype` (DECIMAL(P, s))."""
    flag = quoted(overflow_column(column))
    if dtype.precision < 38:  # 10^(P - s) fits in DECIMAL(38, s): the comparison is exact
        return f"({flag} OR abs({quoted(column)}) >= CAST('1E{dtype.precision - dtype.scale}' AS DECIMAL(38,{dtype.scale})))"
    return flag


def _checked_decimal(column: str, dtype, ansi_mode: bool, message: str, test: str | None = None) -> str:
    """The engine's exact DECIMAL(38, s) `column` as `dtype` (DECIMAL(P, s)), or, where it does not
    fit (or `test` holds), Spark's overflow: NULL, or the ANSI error."""
    test = _overflow_test(column, dtype) if test is None else test
    failed = f"CAST({overflow_error(message, test)} AS {dtype.simpleString()})" if ansi_mode else "NULL"
    return f"CASE WHEN {test} THEN {failed} ELSE CAST({quoted(column)} AS {dtype.simpleString()}) END"
