"""Trigger transcripts (tests/transcripts/*.yaml) through sqlflow.sql on Spark: the bounded and
replay path, from the SQL a user would write (`events` and its `TIMELINE` as temp views)."""
import pandas as pd
import pytest

import sqlflow

BASE = pd.Timestamp("2024-01-01", tz="UTC")  # transcript times are seconds from here
REASONS = {"too late": "dropped_too_late", "closed window": "dropped_closed_window",
           "null event time": "dropped_null_event_time", "null arrival time": "dropped_null_arrival_time",
           "null or non-positive session gap": "dropped_bad_gap"}


def ts(seconds):
    return None if seconds is None else (BASE + pd.Timedelta(seconds=seconds)).tz_convert(None)


def seconds(value):
    return None if value is None or pd.isna(value) else (pd.Timestamp(value) - BASE.tz_convert(None)).total_seconds()


def views(spark, t: dict, name: str) -> tuple[str, str]:
    ev = t["events"]
    events = pd.DataFrame({
        "key": [e["key"] for e in ev],
        "v": pd.array([e.get("v") for e in ev], dtype="Int64"),
        "time": pd.Series([ts(e["time"]) for e in ev], dtype="datetime64[us]"),
        "at": pd.Series([ts(e.get("at")) for e in ev], dtype="datetime64[us]"),
        "flag": [bool(e.get("flag", False)) for e in ev],
        "gap": pd.array([e.get("gap") for e in ev], dtype="Int64"),
    })
    schema = "key string, v bigint, time timestamp, at timestamp, flag boolean, gap bigint"
    spark.createDataFrame(events, schema).createOrReplaceTempView(f"{name}_events")
    steps = [(ts(p), ts(w)) for p, w in t.get("watermark") or []]
    if t.get("end") is not None:  # the end of the input: the watermark reaches +inf then
        steps.append((ts(t["end"]), None))
    timeline = pd.DataFrame({"proc_time": pd.Series([p for p, _ in steps], dtype="datetime64[us]"),
                             "watermark": pd.Series([w for _, w in steps], dtype="datetime64[us]")})
    spark.createDataFrame(timeline, "proc_time timestamp, watermark timestamp") \
        .createOrReplaceTempView(f"{name}_wm")
    return f"{name}_events", f"{name}_wm"


def test_transcript_on_spark(spark, transcript):
    t = transcript
    if "spark" in t.get("skip", {}):
        pytest.skip(t["skip"]["spark"])
    name = "tr_" + t["name"][:20].replace(" ", "_").replace(",", "").replace(";", "").replace("-", "_")
    events, timeline = views(spark, t, name)
    df = sqlflow.sql(spark, t["query"](events, timeline), path="engine")
    rows = df.toPandas()
    if "is_retraction" not in rows:
        rows["is_retraction"] = False
    rows["__new"] = ~rows["is_retraction"]
    rows = rows.sort_values(["emit_time", "__new", "window_start", "window_end", "key"], na_position="first",
                            kind="stable")
    got = [(seconds(r.emit_time), r.key, seconds(r.window_start), seconds(r.window_end), int(r.total),
            r.pane_timing, int(r.pane_index), bool(r.is_last), bool(r.is_retraction)) for r in rows.itertuples()]
    want = []
    for row in t["expect"]:
        w = row["window"]
        want.append((None if row["at"] is None else float(row["at"]), row["key"],
                     None if w is None else float(w[0]), None if w is None else float(w[1]), row["total"],
                     row["timing"], row["index"], row.get("last", False), row.get("retract", False)))
    assert got == want
    metrics = sqlflow.metrics(df)
    assert {reason: metrics[key] for reason, key in REASONS.items() if metrics[key]} == t.get("dropped", {})
    listed = sqlflow.dropped(df).groupBy("reason").count().collect()
    assert {r["reason"]: r["count"] for r in listed} == t.get("dropped", {})
