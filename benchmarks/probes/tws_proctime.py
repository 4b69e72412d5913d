"""transformWithStateInPandas, ProcessingTime mode: processing-time timers, no-data batches,
late rows, the watermark it can read, and availableNow (with and without pending timers)."""
from __future__ import annotations

import pickle
import time

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from _common import Files, events, rel, scratch, spark

OUT = "kind string, k string, n long, wm_ms long, proc_ms long, expiry_ms long, timers string"


class Probe(StatefulProcessor):
    def __init__(self, timer_after_ms: int | None):
        self.after = timer_after_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.blob = handle.getValueState("blob", "blob binary")

    def handleInputRows(self, key, rows, timerValues):
        df = pd.concat(list(rows))
        state = pickle.loads(self.blob.get()[0]) if self.blob.exists() else []
        state.extend(df["v"].tolist())
        self.blob.update((pickle.dumps(state),))
        now = timerValues.getCurrentProcessingTimeInMs()
        if self.after is not None:
            self.handle.registerTimer(now + self.after)
        yield pd.DataFrame([{"kind": "input", "k": key[0], "n": len(df), "wm_ms": timerValues.getCurrentWatermarkInMs(),
                             "proc_ms": now, "expiry_ms": None,
                             "timers": ",".join(str(t - now) for t in self.handle.listTimers())}])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        now = timerValues.getCurrentProcessingTimeInMs()
        yield pd.DataFrame([{"kind": "timer", "k": key[0], "n": 0, "wm_ms": timerValues.getCurrentWatermarkInMs(),
                             "proc_ms": now, "expiry_ms": expiredTimerInfo.getExpiryTimeInMs(), "timers": ""}])


def build(s, files, after):
    src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(files.path)).withWatermark("ts", "10 seconds"))
    return src.groupBy("k").transformWithStateInPandas(Probe(after), OUT, "Update", "ProcessingTime")


def main():
    s = spark()
    d = scratch()
    files = Files(d / "in")
    files.write(events([("a", 0), ("b", 20)]))
    files.write(events([("a", 40)]))
    files.write(events([("a", 5), ("c", 60)]))  # a@5 is behind the watermark (30)
    seen = []
    t0 = time.time()

    def sink(df, batch_id):
        for r in df.collect():
            seen.append((batch_id, round(time.time() - t0, 2), r))

    q = (build(s, files, 1500).writeStream.foreachBatch(sink).option("checkpointLocation", str(d / "cp"))
         .trigger(processingTime="1 second").start())
    time.sleep(12)
    prog = [(p["batchId"], p["numInputRows"], p.get("eventTime", {}).get("watermark")) for p in q.recentProgress]
    q.stop()
    print("--- ProcessingTime mode, trigger processingTime=1s, timer at now+1.5s, ran 12 s")
    for b in prog:
        print("progress batch %s: input rows %s, watermark %s" % b)
    first_proc = min(r.proc_ms for _, _, r in seen)
    for bid, t, r in seen:
        print(f"batch {bid} (t={t}s): {r.kind:5s} k={r.k} n={r.n} wm={rel(r.wm_ms)} proc=+{r.proc_ms - first_proc}ms "
              f"expiry=+{None if r.expiry_ms is None else r.expiry_ms - first_proc}ms timers(rel now)=[{r.timers}]")

    for after, label in ((None, "no timers"), (1500, "timers pending")):
        d2 = scratch()
        f2 = Files(d2 / "in")
        f2.write(events([("a", 0), ("b", 20)]))
        q = (build(s, f2, after).writeStream.format("noop").option("checkpointLocation", str(d2 / "cp"))
             .trigger(availableNow=True).start())
        done = q.awaitTermination(25)
        n = len(q.recentProgress)
        q.stop()
        print(f"--- availableNow, ProcessingTime mode, {label}: terminated within 25 s: {done}; batches run: {n}")
    s.stop()


if __name__ == "__main__":
    main()
