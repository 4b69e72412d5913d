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
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...columns import SOURCE
from ...errors import SqlflowError, SqlflowUnsupportedError
from ...plan.inputs import InputRelation, tagged_relation
from ...plan.relations import source_select, to_spark_sql
from ...plan.windowed_select import Source, parse_column
from .watermark import UNBOUNDED_SHIFT, interval_ms

POLICY_KEY = "spark.sql.streaming.multipleWatermarkPolicy"


@dataclass
class SeveralSources:
    """The tagged input of a window over several streams."""

    relation: InputRelation  # its query reads the watermarked views and has column SOURCE
    names: tuple[str, ...]   # each source's relation name or alias, in source order
    delays: tuple[int, ...]  # each source's DELAY OF (us)


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
    source's number (`SOURCE`). `time_shift` (us): as `build_stream`'s."""
    from pyspark.sql import functions as F

    check_branches(ws)
    check_policy(runner.spark, ws)
    views, names, delays = [], [], []
    for i, s in enumerate(ws.sources):
        w = s.watermark
        query = source_select(s.node, [exp.Star()], alias=False)
        df = runner.sql(to_spark_sql(query), s.node, ws.position)
        wm = "__sqlflow_source_wm"
        event_time = F.expr(parse_column(w.event_time).sql(dialect="spark"))
        df = (df.withColumn(wm, F.timestamp_micros(F.unix_micros(event_time.cast("timestamp"))
                                                   + F.lit(time_shift + UNBOUNDED_SHIFT)))
              .withWatermark(wm, interval_ms(w.model.delay.micros + UNBOUNDED_SHIFT)).drop(wm))
        views.append(runner.view(df, "source"))
        names.append(source_name(s, i))
        delays.append(w.model.delay.micros)
    relations = [exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(this=exp.to_identifier(
        name if not name.startswith("source ") else f"__sqlflow_source_{i}", quoted=True)))
        for i, (view, name) in enumerate(zip(views, names))]
    rel = tagged_relation(ws, ws.sources, [exp.Literal.number(i) for i in range(len(views))], relations)
    return SeveralSources(rel, tuple(names), tuple(delays))


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
