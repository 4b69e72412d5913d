"""Windowed SELECTs over a stream that already has a watermark: refused, in this one place.

Spark keeps one watermark per chain of stateful operators: a second `withWatermark` over a
stream that has one (the panes of a windowed SELECT on a stream, or the user's own
`withWatermark`) fails when the query starts, with Spark's "Redefining watermark is
disallowed". Passing time from one windowed stage to the next needs low watermarks across
stages (issue 17). Until those exist `sqlflow.sql` refuses such a SELECT, at its WINDOW
clause, with what to do instead; `refuse_watermarked_input` is the one check to replace then.
"""
from __future__ import annotations

from ...errors import SqlflowUnsupportedError

#: the logical-plan node of `withWatermark` (Spark's name, in the analysed plan's text)
WATERMARK_NODE = "EventTimeWatermark"


def refuse_watermarked_input(ws, relation_sql: str, raw, stream_views) -> None:
    """Raise a located error when the input of the windowed SELECT `ws` (its relation's SQL and
    the analysed DataFrame `raw`) already carries a watermark. `stream_views`: the pane-stream
    views of this statement's earlier windowed SELECTs."""
    upstream = any(view in relation_sql for view in stream_views)
    if not upstream and WATERMARK_NODE not in plan_text(raw):
        return
    what = ("reads the panes of another windowed SELECT on a stream" if upstream else
            "reads a stream that already has a watermark (withWatermark, or the result of a windowed "
            "sqlflow.sql on a stream)")
    raise ws.error(
        SqlflowUnsupportedError,
        f"{ws.label()} {what}; its input already has a watermark, and Spark allows one watermark per "
        "chain of stateful operators (it would fail at start with \"Redefining watermark is disallowed\")",
        "WINDOW", pos=ws.windowing.pos,
        hint=("write the upstream panes to a sink (sqlflow.spark.streaming.start) and read that as a new "
              "stream, or aggregate them without a WINDOW clause (COUNT, SUM and AVG apply retractions); "
              "over a stream of your own, drop withWatermark: the WATERMARK clause defines it"))


def plan_text(df) -> str:
    """The analysed logical plan of `df` as text (Spark Classic or Spark Connect)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        return str(jdf.queryExecution().analyzed().toString())
    return df._explain_string(extended=True)  # Spark Connect: the server explains it
