"""Streaming design probes (issue 5), each printed with its answer:

1. TWS (EventTime) with the watermark on a shifted column `wm = ts + S` and delay `d + S`:
   which watermark does the operator see, which rows does Spark drop before handleInputRows,
   and what does numRowsDroppedByWatermark say?
2. Native streaming window aggregation (append): is a row behind the watermark whose window is
   still open dropped or kept? What does numRowsDroppedByWatermark count (rows or groups)?
3. Is monotonically_increasing_id() allowed in a streaming query (heartbeat rows)?
4. current_timestamp() in a streaming query vs TWS getCurrentProcessingTimeInMs().
"""
from __future__ import annotations

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor

from _common import BASE_MS, Files, events, rel, scratch, spark

S_SECONDS = 100  # the shift


class Seen(StatefulProcessor):
    def init(self, handle):
        self.handle = handle

    def handleInputRows(self, key, rows, timerValues):
        for df in rows:
            yield pd.DataFrame({"k": df["k"], "ts_ms": df["ts"].astype("datetime64[us]").astype("int64") // 1000,
                                "wm_ms": timerValues.getCurrentWatermarkInMs(),
                                "p_ms": timerValues.getCurrentProcessingTimeInMs(),
                                "now_ms": df["now"].astype("datetime64[us]").astype("int64") // 1000})


BATCHES = [
    [("a", 0), ("b", 20)],
    [("a", 40)],                       # watermark after: 40 - 10 = 30
    [("a", 5), ("b", 25), ("c", 35)],  # a@5 is 25 s behind W=30: within S=100, must be delivered
    [("a", 200)],                      # W -> 190
    [("a", 80), ("b", 95), ("c", 150)],  # W=190 (late-event watermark still 30)
    [("a", 10), ("b", 70), ("c", 185), ("d", 89.999), ("e", 90)],  # late-event watermark 190: 190 - S = 90
]


def probe_tws(s):
    d = scratch()
    files = Files(d / "in")
    for b in BATCHES:
        files.write(events(b))
    src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(files.path))
           .withColumn("now", F.current_timestamp())
           .withColumn("wm", F.col("ts") + F.expr(f"INTERVAL {S_SECONDS} SECONDS"))
           .withWatermark("wm", f"{10 + S_SECONDS} seconds"))
    out = src.groupBy("k").transformWithStateInPandas(
        Seen(), "k string, ts_ms long, wm_ms long, p_ms long, now_ms long", "Append", "EventTime")
    q = (out.writeStream.format("memory").queryName("seen").option("checkpointLocation", str(d / "cp"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    rows = sorted(s.table("seen").collect(), key=lambda r: (r.p_ms, r.k, r.ts_ms))
    print("1. TWS, watermark column ts + 100 s with delay 110 s (i.e. W = max(ts) - 10 s):")
    for r in rows:
        print(f"   batch p={r.p_ms}: {r.k}@{rel(r.ts_ms):g} delivered at W={rel(r.wm_ms) if r.wm_ms > 0 else r.wm_ms}"
              f" (p - current_timestamp() = {r.p_ms - r.now_ms} ms)")
    for p in q.recentProgress:
        ops = p["stateOperators"]
        print(f"   progress batch {p['batchId']}: input {p['numInputRows']}, watermark "
              f"{p['eventTime'].get('watermark')}, numRowsDroppedByWatermark "
              f"{[o.get('numRowsDroppedByWatermark') for o in ops]}")


def probe_native(s):
    d = scratch()
    files = Files(d / "in")
    for b in BATCHES:
        files.write(events(b))
    src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(files.path)).withWatermark("ts", "10 seconds"))
    agg = (src.groupBy("k", F.window("ts", "60 seconds")).agg(F.count("*").alias("n"), F.collect_list("v").alias("vs"))
           .withColumn("emitted", F.current_timestamp()))
    q = (agg.writeStream.format("memory").queryName("native").outputMode("append")
         .option("checkpointLocation", str(d / "cp")).trigger(availableNow=True).start())
    q.awaitTermination()
    print("2. native window(ts, 60 s) count, watermark 10 s, append:")
    for r in sorted(s.table("native").collect(), key=lambda r: (r.window.start, r.k)):
        print(f"   {r.k} [{(r.window.start - BASE).total_seconds():g}, {(r.window.end - BASE).total_seconds():g}) "
              f"n={r.n} v={r.vs} emitted at {r.emitted}")
    for p in q.recentProgress:
        ops = p["stateOperators"]
        print(f"   progress batch {p['batchId']}: input {p['numInputRows']}, watermark "
              f"{p['eventTime'].get('watermark')}, numRowsDroppedByWatermark "
              f"{[o.get('numRowsDroppedByWatermark') for o in ops]}")


def probe_monotonic(s):
    d = scratch()
    files = Files(d / "in")
    files.write(events([("a", 0), ("b", 1), ("c", 2)]))
    src = s.readStream.schema("k string, ts timestamp, v long").parquet(str(files.path))
    try:
        out = src.withColumn("id", F.monotonically_increasing_id())
        q = out.writeStream.format("memory").queryName("mono").trigger(availableNow=True).start()
        q.awaitTermination()
        print("3. monotonically_increasing_id in streaming: allowed:", [r.id for r in s.table("mono").collect()])
    except Exception as e:  # noqa: BLE001
        print("3. monotonically_increasing_id in streaming: rejected:", str(e).splitlines()[0][:200])


if __name__ == "__main__":
    from _common import BASE  # noqa: F401

    s = spark()
    BASE = pd.Timestamp("2024-01-01 00:00:00")
    probe_tws(s)
    probe_native(s)
    probe_monotonic(s)
    s.stop()
