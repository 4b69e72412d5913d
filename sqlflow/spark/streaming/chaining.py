"""Windowed SELECTs over a stream that already has a watermark: refused, in this one place.

Spark keeps one watermark per query. A second `withWatermark` over a stream that has one (the
user's own) fails when the query starts, with Spark's "Redefining watermark is disallowed". The
panes of a windowed SELECT could carry event time on through `transformWithStateInPandas(...,
eventTimeColumnName=...)`, but measured on Spark 4.3 (docs/pipelines.md, "On a stream") that
operator's rows must never be behind the watermark of the previous micro-batch (the query fails
with EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED), and nothing holds the watermark back: the
downstream watermark is the upstream's *input* watermark, not its output watermark
(docs/semantics.md, 1.3). LATE panes and retractions of earlier panes would fail the query, and a
downstream window could close before an upstream window pending in it emits.

What could carry it (measured, tests/upstream/test_transform_with_state.py): a second sqlflow
operator in timeMode None after the first, each first-stage bucket sending its output watermark
with its panes. That is possible with OUTPUT TIMESTAMP END OF WINDOW upstream, for every window
kind, where the output watermark at each instant is what the first stage knows then
(docs/semantics.md, 1.3); with the other output timestamps it depends on later input. It is not
built.
So `sqlflow.sql` refuses such a SELECT, at its WINDOW clause, with what to do instead
(`refuse_watermarked_input`).
"""
from __future__ import annotations

from ... import ast
from ...errors import SqlflowUnsupportedError

#: the logical-plan node of `withWatermark` (Spark's name, in the analysed plan's text)
WATERMARK_NODE = "EventTimeWatermark"


def refuse_watermarked_input(ws, relation_sql: str, raw, stream_stages: dict) -> None:
    """Raise a located error when the input of the windowed SELECT `ws` (its relation's SQL and
    the analysed DataFrame `raw`) already carries a watermark. `stream_stages`: the pane-stream
    views of this statement's earlier windowed SELECTs, and each SELECT."""
    upstream = next((up for view, up in stream_stages.items() if view in relation_sql), None)
    if upstream is None and WATERMARK_NODE not in plan_text(raw):
        return
    if upstream is not None:
        what = (f"reads the panes of {upstream.label()} on a stream; its input already has a watermark, and "
                "Spark cannot pass time between windowed stages: an operator's output keeps the query's one "
                "watermark, which nothing holds back for pending windows, and a LATE pane or a retraction behind "
                "it fails the query (EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED); ")
        policy = upstream.windowing.output_time
        if policy is ast.OutputTime.END_OF_WINDOW:
            what += ("with OUTPUT TIMESTAMP END OF WINDOW upstream its output watermark is known at every "
                     "micro-batch (docs/semantics.md, 1.3), but sqlflow does not yet carry it from one streaming "
                     "operator to the next (docs/pipelines.md, \"On a stream\")")
        else:
            what += (f"with OUTPUT TIMESTAMP {policy.value} upstream no stream can: its output watermark at an "
                     "instant depends on input arriving later (docs/semantics.md, 1.3; docs/pipelines.md, "
                     "\"On a stream\")")
    else:
        what = ("reads a stream that already has a watermark (withWatermark, or the result of a windowed "
                "sqlflow.sql on a stream); Spark allows one watermark per chain of stateful operators (it would "
                "fail at start with \"Redefining watermark is disallowed\")")
    raise ws.error(
        SqlflowUnsupportedError, f"{ws.label()} {what}", "WINDOW", pos=ws.windowing.pos,
        hint=("write the upstream panes to a sink (sqlflow.spark.streaming.start) and read that as a new stream "
              "with WATERMARK output_time DELAY OF <how late its panes come>, or aggregate them without a WINDOW "
              "clause (COUNT, SUM and AVG apply retractions), or run both stages over the recorded input as a replay "
              "(WATERMARK ... ARRIVAL ...), where the output watermark exists; over a stream of your own, drop "
              "withWatermark: the WATERMARK clause defines it"))


def plan_text(df) -> str:
    """The analysed logical plan of `df` as text (Spark Classic or Spark Connect)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        return str(jdf.queryExecution().analyzed().toString())
    return df._explain_string(extended=True)  # Spark Connect: the server explains it
