"""The minimal working transformWithStateInPandas example quoted in docs/spark-internals.md:
file source -> withWatermark -> groupBy(k).transformWithStateInPandas (EventTime) -> memory sink,
a pickled Python object in a BINARY ValueState, one event-time timer per key."""
import pickle
import tempfile

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from sqlflow.spark.session import local_session


class SessionCount(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("state", "blob binary")   # DDL string or StructType

    def handleInputRows(self, key, rows, timerValues):              # key: tuple, rows: Iterator[pd.DataFrame]
        st = pickle.loads(self.state.get()[0]) if self.state.exists() else {"n": 0, "last_ms": 0}
        for df in rows:                                              # a big group may come as several frames
            st["n"] += len(df)
            st["last_ms"] = max(st["last_ms"], int(df["ts"].max().value // 1_000_000))
        self.state.update((pickle.dumps(st),))                       # a tuple matching the schema
        for t in self.handle.listTimers():                           # one pending timer per key
            self.handle.deleteTimer(t)
        self.handle.registerTimer(st["last_ms"] + 30_000)            # fires once watermark >= it
        return iter([])                                              # nothing to emit yet

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):  # these parameter names exactly
        st = pickle.loads(self.state.get()[0])
        self.state.clear()
        yield pd.DataFrame({"k": [key[0]], "n": [st["n"]], "fired_at_wm": [timerValues.getCurrentWatermarkInMs()]})

    def close(self) -> None:
        pass


spark = local_session()
src_dir = tempfile.mkdtemp()
pd.DataFrame({"k": ["a", "a", "b"], "ts": pd.to_datetime(["2024-01-01 00:00:00", "2024-01-01 00:00:10", "2024-01-01 00:00:05"]).astype("datetime64[us]")}).to_parquet(f"{src_dir}/1.parquet")
pd.DataFrame({"k": ["c"], "ts": pd.to_datetime(["2024-01-01 00:10:00"]).astype("datetime64[us]")}).to_parquet(f"{src_dir}/2.parquet")

events = (spark.readStream.schema("k string, ts timestamp").option("maxFilesPerTrigger", 1).parquet(src_dir)
          .withWatermark("ts", "10 seconds"))
out = events.groupBy("k").transformWithStateInPandas(
    statefulProcessor=SessionCount(), outputStructType="k string, n long, fired_at_wm long",
    outputMode="Append", timeMode="EventTime")
q = (out.writeStream.format("memory").queryName("sessions").outputMode("append")
     .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())
q.awaitTermination()   # or, with the default trigger: q.processAllAvailable(); q.stop()
print(sorted(spark.table("sessions").collect()))
