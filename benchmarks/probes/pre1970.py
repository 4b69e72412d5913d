"""Streaming with pre-1970 event times: the watermark starts at 0 (the epoch), not -infinity.
Are negative event times dropped as late, in TWS (EventTime) and in a native window aggregation?"""
from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor

from _common import Files, scratch, spark


class Echo(StatefulProcessor):
    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        df = pd.concat(list(rows))
        yield pd.DataFrame({"k": [key[0]], "n": [len(df)], "wm_ms": [timerValues.getCurrentWatermarkInMs()]})


def ev(rows):
    return pd.DataFrame({"k": [k for k, _ in rows], "ts": pd.to_datetime([t for _, t in rows]).astype("datetime64[us]")})


def main():
    s = spark()
    d = scratch()
    f = Files(d / "in")
    f.write(ev([("old0", "1969-12-31 23:00:00"), ("new0", "1970-01-01 00:00:30")]))   # batch 0
    f.write(ev([("old1", "1969-12-31 23:59:59"), ("new1", "1970-01-01 00:01:00")]))   # batch 1 (wm 20 s)
    f.write(ev([("far", "1970-01-01 10:00:00")]))                                       # batch 2
    src = lambda: (s.readStream.schema("k string, ts timestamp").option("maxFilesPerTrigger", 1)  # noqa: E731
                   .parquet(str(f.path)).withWatermark("ts", "10 seconds"))
    seen = []
    q = (src().groupBy("k").transformWithStateInPandas(Echo(), "k string, n long, wm_ms long", "Update", "EventTime")
         .writeStream.foreachBatch(lambda df, b: seen.extend((b, r) for r in df.collect()))
         .option("checkpointLocation", str(d / "cp1")).start())
    q.processAllAvailable()
    q.stop()
    print("--- TWS EventTime: rows delivered")
    for b, r in sorted(seen):
        print(f"batch {b}: {r.k} n={r.n} wm_ms={r.wm_ms}")
    seen2 = []
    q = (src().groupBy("k", __import__("pyspark.sql.functions", fromlist=["window"]).window("ts", "1 minute")).count()
         .writeStream.outputMode("append").foreachBatch(lambda df, b: seen2.extend((b, r) for r in df.collect()))
         .option("checkpointLocation", str(d / "cp2")).start())
    q.processAllAvailable()
    q.stop()
    print("--- native window(ts, '1 minute') count, append mode: windows emitted")
    for b, r in sorted(seen2, key=lambda x: (x[0], x[1].k)):
        print(f"batch {b}: {r.k} {r.window.start}..{r.window.end} count={r['count']}")
    s.stop()


if __name__ == "__main__":
    main()
