"""applyInPandasWithState: binary state field, watermark per batch, event-time timeout in
no-data batches, late rows, availableNow, frames per call."""
from __future__ import annotations

import pickle

import pandas as pd
from pyspark.sql.streaming.state import GroupStateTimeout

from _common import Files, events, rel, scratch, spark


def fn(key, frames, state):
    frames = list(frames)
    st = pickle.loads(state.get[0]) if state.exists else {"n": 0}
    wm = state.getCurrentWatermarkMs()
    if state.hasTimedOut:
        state.remove()
        yield pd.DataFrame([{"kind": "timeout", "k": key[0], "n": st["n"], "wm_ms": wm, "ts_max_ms": None,
                             "frames": 0, "key_repr": repr(key)}])
        return
    df = pd.concat(frames)
    st["n"] += len(df)
    state.update((pickle.dumps(st),))
    ts_max = int(df["ts"].max().value // 1_000_000)
    state.setTimeoutTimestamp(ts_max + 5_000)
    yield pd.DataFrame([{"kind": "input", "k": key[0], "n": st["n"], "wm_ms": wm, "ts_max_ms": ts_max,
                         "frames": len(frames), "key_repr": repr(key)}])


def main():
    s = spark()
    for trigger in ({"processingTime": "0 seconds"}, {"availableNow": True}):
        d = scratch()
        files = Files(d / "in")
        files.write(events([("a", 0), ("b", 20)]))
        files.write(events([("a", 40)]))
        files.write(events([("a", 5), ("b", 35), ("c", 60), ("d", 30)]))  # wm 30: a@5 late, d@30 on it
        src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
               .parquet(str(files.path)).withWatermark("ts", "10 seconds"))
        out = src.groupBy("k").applyInPandasWithState(
            fn, "kind string, k string, n long, wm_ms long, ts_max_ms long, frames long, key_repr string",
            "blob binary", "Update", GroupStateTimeout.EventTimeTimeout)
        seen = []
        q = (out.writeStream.outputMode("update").foreachBatch(lambda df, bid: seen.extend((bid, r) for r in df.collect()))
             .option("checkpointLocation", str(d / "cp")).trigger(**trigger).start())
        if trigger.get("availableNow"):
            print("terminated:", q.awaitTermination(120))
        else:
            q.processAllAvailable()
        prog = [(p["batchId"], p["numInputRows"], p.get("eventTime", {}).get("watermark")) for p in q.recentProgress]
        q.stop()
        print(f"--- applyInPandasWithState EventTimeTimeout, trigger={trigger}")
        for b in prog:
            print("progress batch %s: input rows %s, watermark %s" % b)
        for bid, r in sorted(seen, key=lambda x: (x[0], x[1].k)):
            print(f"batch {bid}: {r.kind:7s} k={r.k} n={r.n} wm={rel(r.wm_ms)} ts_max={rel(r.ts_max_ms)} frames={r.frames} key={r.key_repr}")
    s.stop()


if __name__ == "__main__":
    main()
