"""transformWithStateInPandas, EventTime mode: binary ValueState, watermark per batch, no-data
batches, event-time timers, late rows, initialState, availableNow.

Each input file is one micro-batch (maxFilesPerTrigger=1). foreachBatch records the batch id of
every output row. Event times are seconds after BASE; watermark delay 10 s.
"""
from __future__ import annotations

import pickle
import sys

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from _common import BASE_MS, Files, events, rel, scratch, spark

OUT = "kind string, k string, n long, wm_ms long, proc_ms long, ts_max_ms long, expiry_ms long, timers string, state_n long, key_repr string, frames long"


class Probe(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.blob = handle.getValueState("blob", "blob binary")

    def _load(self):
        return pickle.loads(self.blob.get()[0]) if self.blob.exists() else {"n": 0}

    def handleInputRows(self, key, rows, timerValues):
        state = self._load()
        frames = list(rows)
        df = pd.concat(frames)
        state["n"] += len(df)
        self.blob.update((pickle.dumps(state),))
        ts_max = int(df["ts"].max().value // 1_000_000)  # ns -> ms
        self.handle.registerTimer(ts_max + 5_000)
        self.handle.registerTimer(ts_max + 10_000)  # exactly the next watermark if ts_max is the max
        timers = sorted(self.handle.listTimers())
        yield pd.DataFrame([{
            "kind": "input", "k": key[0], "n": len(df), "wm_ms": timerValues.getCurrentWatermarkInMs(),
            "proc_ms": timerValues.getCurrentProcessingTimeInMs(), "ts_max_ms": ts_max, "expiry_ms": None,
            "timers": ",".join(str(rel(t)) for t in timers), "state_n": state["n"],
            "key_repr": repr(key), "frames": len(frames),
        }])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        state = self._load()
        yield pd.DataFrame([{
            "kind": "timer", "k": key[0], "n": 0, "wm_ms": timerValues.getCurrentWatermarkInMs(),
            "proc_ms": timerValues.getCurrentProcessingTimeInMs(), "ts_max_ms": None,
            "expiry_ms": expiredTimerInfo.getExpiryTimeInMs(), "timers": "", "state_n": state["n"],
            "key_repr": repr(key), "frames": 0,
        }])

    def handleInitialState(self, key, initialState, timerValues):
        self.blob.update((pickle.dumps({"n": int(initialState["n0"].sum())}),))

    def close(self) -> None:
        pass


def run(s, trigger: dict, with_initial: bool):
    d = scratch()
    files = Files(d / "in")
    batches = [
        events([("a", 0), ("b", 20)]),          # batch 0: max 20 -> wm 10 after
        events([("a", 40)]),                     # batch 1: max 40 -> wm 30 after
        events([("a", 5), ("b", 35), ("c", 60), ("d", 30), ("e", 30.001)]),  # batch 2 (wm 30): a@5 late, d@30 on the watermark
    ]
    for b in batches:
        files.write(b)
    src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(files.path)).withWatermark("ts", "10 seconds"))
    initial = None
    if with_initial:
        initial = s.createDataFrame([("a", 100), ("z", 7)], "k string, n0 long").groupBy("k")
    out = src.groupBy("k").transformWithStateInPandas(
        Probe(), OUT, "Append", "EventTime", initialState=initial)
    seen = []

    def sink(df, batch_id):
        for r in df.collect():
            seen.append((batch_id, r))

    q = (out.writeStream.foreachBatch(sink).option("checkpointLocation", str(d / "cp"))
         .trigger(**trigger).start())
    if trigger.get("availableNow"):
        q.awaitTermination(120)
    else:
        q.processAllAvailable()
    progress = [(p["batchId"], p["numInputRows"], p.get("eventTime", {}).get("watermark")) for p in q.recentProgress]
    q.stop()
    print(f"--- trigger={trigger} initialState={with_initial}")
    for bid, rows, wm in progress:
        print(f"progress batch {bid}: input rows {rows}, eventTime.watermark {wm}")
    for bid, r in sorted(seen, key=lambda x: (x[0], x[1].kind, x[1].k)):
        print(f"batch {bid}: {r.kind:5s} k={r.k} n={r.n} wm={rel(r.wm_ms)} ts_max={rel(r.ts_max_ms)} "
              f"expiry={rel(r.expiry_ms)} timers=[{r.timers}] state_n={r.state_n} key={r.key_repr} frames={r.frames} proc_ms={r.proc_ms}")


if __name__ == "__main__":
    s = spark()
    run(s, {"processingTime": "0 seconds"}, with_initial=False)
    run(s, {"availableNow": True}, with_initial=True)
    s.stop()
