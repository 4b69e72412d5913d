"""transformWithStateInPandas per-call overhead: 50 micro-batches of 1000 rows over 100 keys vs
over 4 hash-bucket keys (one pickled ValueState blob per key, one event-time timer per key).
Also: how many pandas DataFrames one call receives for a big group (arrow maxRecordsPerBatch)."""
from __future__ import annotations

import pickle
import statistics
import time

import numpy as np
import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from _common import BASE, Files, scratch, spark


class Blob(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.blob = handle.getValueState("blob", "blob binary")

    def handleInputRows(self, key, rows, timerValues):
        state = pickle.loads(self.blob.get()[0]) if self.blob.exists() else {"n": 0, "sum": 0}
        frames = 0
        for df in rows:
            frames += 1
            state["n"] += len(df)
            state["sum"] += int(df["v"].sum())
        self.blob.update((pickle.dumps(state),))
        wm = timerValues.getCurrentWatermarkInMs()
        self.handle.registerTimer(max(wm, 0) + 3_600_000)
        yield pd.DataFrame({"k": [str(key[0])], "n": [state["n"]], "frames": [frames]})


def run(s, n_keys: int, bucket: bool, batches=50, rows=1000):
    d = scratch()
    files = Files(d / "in")
    rng = np.random.default_rng(1)
    for b in range(batches):
        files.write(pd.DataFrame({
            "k": rng.integers(0, n_keys, rows).astype(str),
            "ts": (BASE + pd.to_timedelta(b * 60 + np.sort(rng.random(rows)) * 60, unit="s")).astype("datetime64[us]"),
            "v": rng.integers(0, 100, rows),
        }))
    src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(files.path)).withWatermark("ts", "10 seconds"))
    # TRAP: groupBy(<expression>.alias(...)).transformWithStateInPandas fails with
    # UNRESOLVED_COLUMN (`bucket`): materialise the grouping key as a column first.
    key = "k"
    if bucket:
        src, key = src.withColumn("bucket", F.pmod(F.hash("k"), F.lit(4))), "bucket"
    out = src.groupBy(key).transformWithStateInPandas(Blob(), "k string, n long, frames long", "Update", "EventTime")
    q = out.writeStream.format("noop").option("checkpointLocation", str(d / "cp")).start()
    t0 = time.time()
    q.processAllAvailable()
    wall = time.time() - t0
    durs = [p["durationMs"]["triggerExecution"] for p in q.recentProgress if p["numInputRows"] > 0]
    n = len(q.recentProgress)
    q.stop()
    return wall, n, durs


def big_group(s):
    d = scratch()
    files = Files(d / "in")
    files.write(pd.DataFrame({"k": ["x"] * 25_000, "ts": pd.Series([BASE] * 25_000).astype("datetime64[us]"), "v": 1}))
    src = s.readStream.schema("k string, ts timestamp, v long").parquet(str(files.path)).withWatermark("ts", "10 seconds")
    out = src.groupBy("k").transformWithStateInPandas(Blob(), "k string, n long, frames long", "Update", "EventTime")
    rows = []
    q = out.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect())).option("checkpointLocation", str(d / "cp")).start()
    q.processAllAvailable()
    q.stop()
    return rows


if __name__ == "__main__":
    s = spark()
    run(s, 4, True, batches=3)  # warm-up (JVM, Python workers)
    for n_keys, bucket, label in ((100, False, "100 keys"), (100, True, "4 hash buckets of 100 keys")):
        wall, n, durs = run(s, n_keys, bucket)
        print(f"{label}: 50 batches x 1000 rows: wall {wall:.1f} s ({n} micro-batches incl. no-data), "
              f"per data batch median {statistics.median(durs)} ms, min {min(durs)}, max {max(durs)}")
    for cap in ("10000", "1000"):
        s.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", cap)
        rows = big_group(s)
        print(f"one key with 25000 rows, maxRecordsPerBatch={cap}: {[(r.n, r.frames) for r in rows]} (n, frames per call)")
    s.stop()
