"""Several watermarked streams feeding one window: each keeps its own watermark, the window's is
the minimum of theirs (docs/semantics.md, 9; the low-watermark article's InputLowWatermark).

The sources are the branches of one UNION ALL, each with `WATERMARK <column> DELAY OF <d>`.
Each input row carries the number of its source (column `SOURCE`, a constant added to its
branch's SELECT list), and the stateful operator keeps, per source, the largest event time its
heartbeats have delivered: the window's watermark is the minimum over the sources of (that
time - the source's delay), and a source without rows yet holds it at -inf (udfs/streaming.py).

Spark is given the same per-source watermarks, so that it runs a no-data micro-batch when the
minimum moves (and fires the operator's poll timers there): each source is read through a view
with its own `withWatermark`, and Spark's global watermark is their minimum under
`spark.sql.streaming.multipleWatermarkPolicy = min` (Spark's default, checked here per query:
the policy a query starts with is kept in its checkpoint). Spark's minimum leaves out a source
that has sent nothing yet; the operator's does not.

When a source is `WATERMARK ... ASCENDING PER p` (docs/semantics.md 1.2) Spark's watermarks cannot
express it: the views have none, each row also carries its partition (column PARTITION, "" on a
DELAY OF source's rows), and the executors compute every source's watermark themselves
(`SeveralSources.rules`; udfs/ordered_stream.py's `sources_watermark`, partitioned.py and
per_partition.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ... import ast
from ...columns import SOURCE
from ...errors import SqlflowError, SqlflowUnsupportedError
from ...plan.inputs import InputRelation, tagged_relation
from ...plan.relations import source_select, to_spark_sql
from ...plan.windowed_select import Source, parse_column
from ...udfs.ordered_stream import NULL_PARTITION, SourceRule
from .watermark import UNBOUNDED_SHIFT, interval_ms

POLICY_KEY = "spark.sql.streaming.multipleWatermarkPolicy"


@dataclass
class SeveralSources:
    """The tagged input of a window over several streams."""

    relation: InputRelation  # its query reads the watermarked views and has column SOURCE
    names: tuple[str, ...]   # each source's relation name or alias, in source order
    delays: tuple[int, ...]  # each source's DELAY OF (us; 0 for an ASCENDING PER source)
    #: with an ASCENDING PER source, each source's rule (the executors compute the watermarks);
    #: empty when every source is DELAY OF (Spark's per-source watermarks and the operator's)
    rules: tuple[SourceRule, ...] = ()


def source_name(source: Source, index: int) -> str:
    """How counters and dropped rows name a source: its alias, else its table's name."""
    node = source.node
    alias = node.args.get("alias")
    if alias is not None and alias.this:
        return alias.this.name
    if isinstance(node, exp.Table) and node.name:
        return node.name
    return f"source {index + 1}"


def check_branches(ws) -> None:
    """Several watermarked streams feed a window only as branches of one UNION ALL, one source
    per branch (the rows of two streams joined to each other would need Spark's stream-stream
    join, whose output time sqlflow does not define)."""
    branches: set[int] = set()
    for s in ws.sources:
        branch = s.node.find_ancestor(exp.Select)
        union = branch.find_ancestor(exp.Union) if branch is not None else None
        if branch is None or union is None or union.args.get("distinct") or id(branch) in branches:
            raise ws.error(
                SqlflowUnsupportedError, f"{len(ws.sources)} watermarked streams feed this window, not as branches "
                "of one UNION ALL: a stream joined to another stream has no defined watermark here",
                "WATERMARK", pos=s.watermark.pos,
                hint="combine the streams with UNION ALL (one watermarked source per branch), or join the others "
                     "as tables without WATERMARK")
        branches.add(id(branch))


def check_policy(spark, ws) -> None:
    """Spark's global watermark must be the minimum of the sources' (its default policy)."""
    policy = (spark.conf.get(POLICY_KEY, "min") or "min").lower()
    if policy != "min":
        raise ws.error(
            SqlflowUnsupportedError, f"{len(ws.sources)} watermarked streams feed this window, whose watermark is "
            f"the minimum of theirs, but this session's {POLICY_KEY} is {policy}", "WATERMARK",
            pos=ws.sources[1].watermark.pos, hint=f"SET {POLICY_KEY} = min before this query (a query keeps the "
                                                  "policy it started with in its checkpoint)")


def several_sources(runner, ws, *, time_shift: int) -> SeveralSources:
    """The input relation of `ws` over its sources' watermarked views, each row tagged with its
    source's number (`SOURCE`), and with an ASCENDING PER source its partition (`PARTITION`).
    `time_shift` (us): as `build_stream`'s."""
    from pyspark.sql import functions as F

    check_branches(ws)
    models = [s.watermark.model for s in ws.sources]
    per = any(isinstance(m, ast.AscendingPer) for m in models)
    if not per:
        check_policy(runner.spark, ws)
    views, names, delays = [], [], []
    for i, s in enumerate(ws.sources):
        w = s.watermark
        query = source_select(s.node, [exp.Star()], alias=False)
        df = runner.sql(to_spark_sql(query), s.node, ws.position)
        if not per:
            wm = "__sqlflow_source_wm"
            event_time = F.expr(parse_column(w.event_time).sql(dialect="spark"))
            df = (df.withColumn(wm, F.timestamp_micros(F.unix_micros(event_time.cast("timestamp"))
                                                       + F.lit(time_shift + UNBOUNDED_SHIFT)))
                  .withWatermark(wm, interval_ms(w.model.delay.micros + UNBOUNDED_SHIFT)).drop(wm))
        views.append(runner.view(df, "source"))
        names.append(source_name(s, i))
        delays.append(w.model.delay.micros if isinstance(w.model, ast.BoundedDelay) else 0)
    relations = [exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(this=exp.to_identifier(
        name if not name.startswith("source ") else f"__sqlflow_source_{i}", quoted=True)))
        for i, (view, name) in enumerate(zip(views, names))]
    tags: list[exp.Expr] = [exp.Literal.number(i) for i in range(len(views))]
    if not per:
        return SeveralSources(tagged_relation(ws, ws.sources, tags, relations), tuple(names), tuple(delays))
    rules = tuple(SourceRule(idle=m.idle_timeout.micros if m.idle_timeout is not None else None)
                  if isinstance(m, ast.AscendingPer) else SourceRule(delay=m.delay.micros) for m in models)
    partitions = [partition_of(m) if isinstance(m, ast.AscendingPer) else exp.Literal.string("") for m in models]
    return SeveralSources(tagged_relation(ws, ws.sources, tags, relations, partitions=partitions), tuple(names),
                          tuple(delays), rules)


def partition_of(model: ast.AscendingPer) -> exp.Expr:
    """A row's partition under `ASCENDING PER p`: its value of `p` as a string, NULL values one
    partition of their own (`NULL_PARTITION`)."""
    return exp.func("coalesce", exp.cast(parse_column(model.partition), "string"), exp.Literal.string(NULL_PARTITION))


def tagged_input(runner, ws, rel: InputRelation):
    """The streaming DataFrame of the tagged relation; a SELECT list between the UNION ALL and
    the window that leaves the source column out is a located error saying what to write."""
    try:
        return runner.sql(rel.sql(), ws.select, ws.position)
    except SqlflowError as error:
        if SOURCE not in str(error):
            raise
        raise ws.error(
            SqlflowUnsupportedError, f"{len(ws.sources)} watermarked streams feed this window, but a SELECT list "
            "between their UNION ALL and the window leaves out the column that says which source each row "
            "comes from", "WATERMARK", pos=ws.sources[0].watermark.pos,
            hint="read the UNION ALL directly in the windowed SELECT's FROM, or keep SELECT * in between") from None
