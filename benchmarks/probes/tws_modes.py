"""transformWithStateInPandas odds and ends: timeMode "None" (timers? times?), how often init()
runs (per partition and batch?), worker process reuse, TWS on a batch DataFrame."""
from __future__ import annotations

import os

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor

from _common import Files, events, rel, scratch, spark

OUT = "k string, wm_ms long, proc_ms long, timer string, pid long, obj long, inits long"


class Probe(StatefulProcessor):
    """TRAP seen here first: with timeMode "None", registerTimer fails on the JVM side
    (STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE) and the Python side only
    sees EOFError: the try/except below cannot catch it, the task and the query fail. So the probe
    only calls registerTimer when try_timer is set (EventTime mode)."""
    inits_in_process = 0

    def __init__(self, try_timer: bool):
        self.try_timer = try_timer

    def init(self, handle):
        Probe.inits_in_process += 1
        self.handle = handle
        self.v = handle.getValueState("v", "n long")

    def handleInputRows(self, key, rows, timerValues):
        for _ in rows:
            pass
        timer = "not tried"
        try:
            if self.try_timer:
                self.handle.registerTimer(10_000)
                timer = "registerTimer ok"
        except Exception as e:  # noqa: BLE001
            timer = f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
        yield pd.DataFrame([{"k": key[0], "wm_ms": timerValues.getCurrentWatermarkInMs(),
                             "proc_ms": timerValues.getCurrentProcessingTimeInMs(), "timer": timer,
                             "pid": os.getpid(), "obj": id(self), "inits": Probe.inits_in_process}])


def main():
    s = spark()
    d = scratch()
    files = Files(d / "in")
    files.write(events([("a", 0), ("b", 20), ("c", 1), ("d", 2)]))
    files.write(events([("a", 40), ("b", 41)]))
    src = (s.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(files.path)).withWatermark("ts", "10 seconds"))
    out = src.groupBy("k").transformWithStateInPandas(Probe(False), OUT, "Update", "None")
    seen = []
    q = (out.writeStream.foreachBatch(lambda df, bid: seen.extend((bid, r) for r in df.collect()))
         .option("checkpointLocation", str(d / "cp")).start())
    q.processAllAvailable()
    q.stop()
    print("--- timeMode None, streaming")
    for bid, r in sorted(seen, key=lambda x: (x[0], x[1].k)):
        print(f"batch {bid}: k={r.k} wm={rel(r.wm_ms)} proc={r.proc_ms} timer=[{r.timer}] pid={r.pid} obj={r.obj} inits_in_process={r.inits}")

    print("--- EventTime mode on a batch DataFrame")
    batch = s.createDataFrame(events([("a", 0), ("b", 20)])).withWatermark("ts", "10 seconds")
    for r in batch.groupBy("k").transformWithStateInPandas(Probe(True), OUT, "Update", "EventTime").collect():
        print(f"k={r.k} wm_ms={r.wm_ms} proc_ms={r.proc_ms} timer=[{r.timer}]")
    s.stop()


if __name__ == "__main__":
    main()
