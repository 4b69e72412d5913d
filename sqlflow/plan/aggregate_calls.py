"""Aggregate calls in a windowed SELECT, and what the engine makes of each.

Spark computes the argument of an aggregate (`SUM(price * qty)`: `price * qty`) before the engine
and the expressions over aggregates (`SUM(x) / COUNT(*)`) after it; the engine computes the
aggregate itself, as a combiner of `sqlflow.engine.aggregates`. A call the engine cannot compute
(`percentile_approx`, `SUM(DISTINCT x)`, ...) still runs on the native path.

>>> import sqlglot
>>> from sqlflow.frontend.statement import DIALECT
>>> def call(sql):
...     c = aggregate_call(sqlglot.parse_one(sql, read=DIALECT))
...     return c.kind, c.arg.sql(DIALECT) if c.arg is not None else None, c.ignore_nulls, c.why_not
>>> call("SUM(price * qty)")
('sum', 'price * qty', False, None)
>>> call("COUNT(*)")
('count_star', None, False, None)
>>> call("last(x) IGNORE NULLS")
('last', 'x', True, None)
>>> call("COUNT(x) FILTER (WHERE y > 0)")
('count', 'CASE WHEN y > 0 THEN x END', False, None)
>>> call("percentile_approx(x, 0.5)")[3]
'the sqlflow engine has no PERCENTILE_APPROX'
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

#: Spark 4.3's built-in aggregate functions (FunctionRegistry group "agg_funcs"): sqlglot parses
#: some of them as anonymous functions, and only the name says they aggregate.
SPARK_AGGREGATES = frozenset("""
any any_value approx_count_distinct approx_percentile approx_top_k approx_top_k_accumulate
approx_top_k_combine array_agg avg bit_and bit_or bit_xor bitmap_and_agg bitmap_construct_agg
bitmap_or_agg bool_and bool_or collect_list collect_set collect_union corr count count_if
count_min_sketch covar_pop covar_samp every first first_value grouping grouping_id
histogram_numeric hll_sketch_agg hll_union_agg kll_merge_agg_bigint kll_merge_agg_double
kll_merge_agg_float kll_sketch_agg_bigint kll_sketch_agg_double kll_sketch_agg_float kurtosis last
last_value listagg max max_by mean measure median min min_by mode percentile percentile_approx
percentile_cont percentile_disc regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope
regr_sxx regr_sxy regr_syy skewness some std stddev stddev_pop stddev_samp string_agg sum
theta_intersection_agg theta_sketch_agg theta_union_agg try_avg try_sum
tuple_intersection_agg_double tuple_intersection_agg_integer tuple_sketch_agg_double
tuple_sketch_agg_integer tuple_union_agg_double tuple_union_agg_integer var_pop var_samp variance
""".split())

#: sqlglot node types -> engine kinds (sqlflow/engine/aggregates.py)
_KIND_OF_NODE: dict[type[exp.Expr], str] = {
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.First: "first",
    exp.FirstValue: "first",
    exp.Last: "last",
    exp.LastValue: "last",
    exp.ArrayAgg: "collect_list",
    exp.ArrayUniqueAgg: "collect_set",
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
}

#: anonymous (to sqlglot) Spark aggregate names -> engine kinds
_KIND_OF_NAME = {"mean": "avg", "std": "stddev_samp", "var_samp": "var_samp", "variance": "var_samp"}

#: kinds whose argument must be a number: Spark would silently cast a string, we refuse it
NUMERIC_KINDS = frozenset({"sum", "avg", "stddev_samp", "stddev_pop", "var_samp", "var_pop"})


@dataclass
class AggregateCall:
    """One aggregate call as written (`node`), and the engine's view of it."""

    node: exp.Expr
    kind: str | None = None          # engine kind, None if the engine cannot compute it
    arg: exp.Expr | None = None      # the argument, an expression over the input row
    ignore_nulls: bool = False
    why_not: str | None = None       # why the engine cannot compute it

    @property
    def name(self) -> str:
        """The function's name as Spark users know it (for messages)."""
        return function_name(_unwrap(self.node))


def function_name(node: exp.Expr) -> str:
    """The name Spark SQL spells this function with (`PERCENTILE_APPROX`, not sqlglot's class name)."""
    from ..frontend.statement import DIALECT

    return node.sql(dialect=DIALECT).split("(", 1)[0].strip().upper()


def _unwrap(node: exp.Expr) -> exp.Expr:
    while isinstance(node, (exp.IgnoreNulls, exp.RespectNulls, exp.Filter)):
        node = node.this
    return node


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate function call (not counting IGNORE NULLS / FILTER wrappers)."""
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in SPARK_AGGREGATES


def is_aggregate_call(node: exp.Expr) -> bool:
    """The outermost node of an aggregate call: the function, or its IGNORE NULLS / FILTER wrapper."""
    if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls, exp.Filter)):
        return is_aggregate(_unwrap(node))
    return is_aggregate(node) and not isinstance(node.parent, (exp.IgnoreNulls, exp.RespectNulls, exp.Filter))


def aggregate_calls(scopes: list[exp.Expr]) -> list[exp.Expr]:
    """The aggregate calls in these expressions, outermost only, in order: not inside a subquery,
    and not the function of a window (`SUM(x) OVER w` is computed after the aggregation, though
    an aggregate inside its argument is not)."""
    found: list[exp.Expr] = []

    def visit(node: exp.Expr) -> None:
        if isinstance(node, (exp.Subquery, exp.Query)):
            return
        if isinstance(node, exp.Window):
            inner = node.this
            call = inner if not isinstance(inner, (exp.IgnoreNulls, exp.RespectNulls)) else inner.this
            for child in call.iter_expressions():
                visit(child)
            for key in ("partition_by", "order", "spec"):
                value = node.args.get(key)
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, exp.Expr):
                        visit(child)
            return
        if is_aggregate_call(node):
            found.append(node)
            return
        for child in node.iter_expressions():
            visit(child)

    for scope in scopes:
        if scope is not None:
            visit(scope)
    return found


def aggregate_call(node: exp.Expr) -> AggregateCall:
    """What the engine makes of one aggregate call."""
    call = AggregateCall(node)
    condition = None
    inner = node
    while isinstance(inner, (exp.IgnoreNulls, exp.RespectNulls, exp.Filter)):
        if isinstance(inner, exp.IgnoreNulls):
            call.ignore_nulls = True
        elif isinstance(inner, exp.Filter):
            condition = inner.expression.this if isinstance(inner.expression, exp.Where) else inner.expression
        inner = inner.this
    kind, arg, why = _kind(inner)
    if kind is not None and condition is not None:
        if kind in ("first", "last"):
            kind, why = None, f"the sqlflow engine has no {call.name} with FILTER"
        else:
            # FILTER (WHERE c) keeps only the rows where c holds: the others count as NULL
            arg = exp.Case(ifs=[exp.If(this=condition.copy(), true=(arg or exp.Literal.number(1)).copy())])
            kind = "count" if kind == "count_star" else kind
    call.kind, call.arg, call.why_not = kind, arg, why
    return call


def _kind(node: exp.Expr):
    """(engine kind, argument, why not)."""
    name = function_name(node)
    nope = (None, None, f"the sqlflow engine has no {name}")
    if isinstance(node, exp.Count):
        this = node.this
        if isinstance(this, exp.Star) or this is None:
            return "count_star", None, None
        if isinstance(this, exp.Distinct):
            if len(this.expressions) != 1:
                return None, None, "the sqlflow engine has COUNT(DISTINCT x) of one expression only"
            return "count_distinct", this.expressions[0], None
        return "count", this, None
    if isinstance(node, exp.CountIf):
        # COUNT_IF(p) counts the rows where p is true: COUNT(CASE WHEN p THEN 1 END)
        return "count", exp.Case(ifs=[exp.If(this=node.this.copy(), true=exp.Literal.number(1))]), None
    if isinstance(node, exp.Anonymous):
        kind = _KIND_OF_NAME.get(str(node.this).lower())
        if kind is None or len(node.expressions) != 1:
            return nope
        return kind, node.expressions[0], None
    kind = _KIND_OF_NODE.get(type(node))
    if kind is None:
        return nope
    this = node.this
    if isinstance(this, exp.Distinct):
        return None, None, f"the sqlflow engine has no {name}(DISTINCT ...)"
    if any(v and k not in ("this", "nulls_excluded") for k, v in node.args.items()):
        return None, None, f"the sqlflow engine has {name} of one argument only"
    return kind, this, None
