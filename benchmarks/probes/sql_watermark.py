"""Spark SQL: the WATERMARK clause on batch and streaming views, alias placement, STREAM(t) forms,
named/positional parameters (also inside INTERVAL literals)."""
from __future__ import annotations

import pandas as pd

from _common import Files, events, scratch, spark


def attempt(s, label, sql, stream=False, args=None, kind=None):
    try:
        df = s.sql(sql, args=args) if args is not None else s.sql(sql)
        if df.isStreaming:
            rows = []
            q = (df.writeStream.outputMode("append").foreachBatch(lambda d, _: rows.extend(d.collect()))
                 .trigger(availableNow=True).start())
            q.awaitTermination(120)
            print(f"OK   {label}\n       streaming; rows: {rows}")
        else:
            print(f"OK   {label}\n       batch; rows: {df.collect()}")
    except Exception as e:  # noqa: BLE001
        msg = " | ".join(line.strip() for line in str(e).splitlines() if line.strip())
        print(f"FAIL {label}\n       {type(e).__name__}: {msg[:300]}")


def main():
    s = spark()
    d = scratch()
    files = Files(d / "in")
    files.write(events([("a", 0), ("a", 30), ("b", 61), ("a", 200)]))
    s.createDataFrame(pd.read_parquet(next(files.path.glob("*.parquet")))).createOrReplaceTempView("bt")
    s.readStream.schema("k string, ts timestamp, v long").parquet(str(files.path)).createOrReplaceTempView("st")
    # pandas writes naive datetimes; Spark infers them as TIMESTAMP_NTZ unless a schema says otherwise
    s.sql(f"CREATE TABLE tbl_inferred USING parquet LOCATION '{files.path}'")
    s.sql(f"CREATE TABLE tbl (k STRING, ts TIMESTAMP, v BIGINT) USING parquet LOCATION '{files.path}'")
    q = "SELECT k, window.start AS ws, count(*) AS n FROM {src} GROUP BY k, window(ts, '1 minute')"
    wm = "WATERMARK ts DELAY OF INTERVAL 1 MINUTE"
    attempt(s, "batch view: FROM bt WATERMARK ...", q.format(src=f"bt {wm}"))
    attempt(s, "streaming view: FROM st WATERMARK ...", q.format(src=f"st {wm}"))
    attempt(s, "streaming view without WATERMARK (append agg)", q.format(src="st"))
    attempt(s, "FROM st AS a WATERMARK a.ts ...", q.format(src="st AS a WATERMARK a.ts DELAY OF INTERVAL 1 MINUTE"))
    attempt(s, "FROM st AS a WATERMARK ts ...", q.format(src="st AS a WATERMARK ts DELAY OF INTERVAL 1 MINUTE"))
    attempt(s, "FROM st WATERMARK ts ... AS a", q.format(src=f"st {wm} AS a"))
    attempt(s, "FROM st a WATERMARK ts ... (alias without AS)", q.format(src=f"st a {wm}"))
    attempt(s, "FROM STREAM(tbl_inferred) WATERMARK ... (table with inferred schema)", q.format(src=f"STREAM(tbl_inferred) {wm}"))
    attempt(s, "FROM STREAM(tbl) WATERMARK ... (catalog table)", q.format(src=f"STREAM(tbl) {wm}"))
    attempt(s, "FROM STREAM tbl WATERMARK ... (catalog table)", q.format(src=f"STREAM tbl {wm}"))
    attempt(s, "FROM STREAM(bt) ... (batch temp view)", q.format(src=f"STREAM(bt) {wm}"))
    attempt(s, "FROM STREAM(st) ... (streaming temp view)", q.format(src=f"STREAM(st) {wm}"))
    attempt(s, "FROM STREAM st ... (streaming temp view)", q.format(src=f"STREAM st {wm}"))
    attempt(s, "FROM (SELECT * FROM st) WATERMARK ... (subquery)", q.format(src=f"(SELECT * FROM st) {wm}"))
    attempt(s, "FROM (SELECT * FROM st) AS x WATERMARK ... (aliased subquery)", q.format(src=f"(SELECT * FROM st) AS x {wm}"))
    attempt(s, "WATERMARK ts + INTERVAL 1 SECOND AS ets DELAY ... (expression)", "SELECT k, count(*) AS n FROM st WATERMARK ts + INTERVAL 1 SECOND AS ets DELAY OF INTERVAL 1 MINUTE GROUP BY k, window(ets, '1 minute')")
    attempt(s, "DELAY OF INTERVAL '1' MINUTE (ANSI literal)", q.format(src="st WATERMARK ts DELAY OF INTERVAL '1' MINUTE"))
    attempt(s, "DELAY OF INTERVAL 0 SECONDS", q.format(src="st WATERMARK ts DELAY OF INTERVAL 0 SECONDS"))
    # parameters
    attempt(s, "named :x in WHERE", "SELECT k, v FROM bt WHERE v > :x", args={"x": 1})
    attempt(s, "positional ? in WHERE", "SELECT k, v FROM bt WHERE v > ?", args=[1])
    attempt(s, "named :w as window duration string", "SELECT k, count(*) AS n FROM bt GROUP BY k, window(ts, :w)", args={"w": "1 minute"})
    attempt(s, "named :n inside INTERVAL literal: INTERVAL :n MINUTE", "SELECT ts + INTERVAL :n MINUTE AS t2 FROM bt LIMIT 1", args={"n": 5})
    attempt(s, "named :d in DELAY OF INTERVAL :d MINUTES", q.format(src="st WATERMARK ts DELAY OF INTERVAL :d MINUTES"), args={"d": 1})
    attempt(s, "named :d as whole interval: DELAY OF :d (string)", q.format(src="st WATERMARK ts DELAY OF :d"), args={"d": "INTERVAL 1 MINUTE"})
    attempt(s, "named :d as interval value (make_dt_interval)", "SELECT ts + :d AS t2 FROM bt LIMIT 1",
            args={"d": pd.Timedelta(minutes=5).to_pytimedelta()})
    attempt(s, "named :tbl as table name: IDENTIFIER(:tbl)", "SELECT count(*) FROM IDENTIFIER(:tbl)", args={"tbl": "bt"})
    # Session windows: adjacent (exactly gap apart) rows in streaming
    files2 = Files(d / "in2")
    files2.write(events([("x", 0), ("x", 300), ("y", 0), ("y", 299.999999)]))
    files2.write(events([("z", 3600)]))  # moves the watermark past both sessions
    s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1).parquet(str(files2.path)).createOrReplaceTempView("sess")
    attempt(s, "streaming session_window, rows exactly gap apart (x) / gap-1us apart (y)",
            "SELECT k, session_window.start AS s, session_window.end AS e, count(*) AS n FROM sess "
            "WATERMARK ts DELAY OF INTERVAL 0 SECONDS GROUP BY k, session_window(ts, '5 minutes')")
    s.stop()


if __name__ == "__main__":
    main()
