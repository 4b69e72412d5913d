"""The stateful operator over several watermarked sources, driven by PySpark's TwsTester (no
query, no JVM): the watermark is the minimum over the sources of (max event time its heartbeats
delivered in the calls before - the source's delay), whatever Spark's own watermark says, and the
rows dropped as too late are counted and returned per source (docs/streaming.md 5.4)."""
import numpy as np
import pandas as pd

from sqlflow import ast
from sqlflow import columns as C
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.time import MINUTE, SECOND
from sqlflow.udfs import streaming as op
from sqlflow.udfs import tws

T0 = 1_700_000_000 * SECOND - (1_700_000_000 * SECOND) % MINUTE
COLUMNS = (C.BUCKET, C.KIND, C.EVENT_TIME, "k", "v", C.SOURCE)


def processor():
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(MINUTE))), None, None,
                              ast.Emit(ast.AccumulationMode.DISCARDING))
    plan = EnginePlan(windowing, (Aggregate("sum", "v", "total"),), keys=("k",))
    spec = op.StreamSpec(plan=plan, input_columns=("k", C.EVENT_TIME, "v", C.SOURCE), frame_columns=COLUMNS,
                         integral_columns=("v", C.SOURCE), keep_dropped=True, column_shift=0, delay_ms=0,
                         sources=("eu", "us"), source_delays_ms=(10_000, 30_000))
    return tws.PaneProcessor(spec)


def call(rows):
    """(source, event second, value) data rows, and one heartbeat per source with its max."""
    beats = {}
    for s, sec, _ in rows:
        beats[s] = max(beats.get(s, sec), sec)
    data = [(C.DATA, T0 + sec * SECOND, "a", v, s) for s, sec, v in rows]
    data += [(C.HEARTBEAT, T0 + sec * SECOND, None, None, s) for s, sec in beats.items()]
    return pd.DataFrame({C.BUCKET: np.zeros(len(data), np.int32), C.KIND: [d[0] for d in data],
                         C.EVENT_TIME: [d[1] for d in data], "k": [d[2] for d in data],
                         "v": pd.array([d[3] for d in data], dtype="Int64"), C.SOURCE: [d[4] for d in data]})


def watermark(out) -> int:
    return int(out[out[C.KIND] == C.METRICS][C.metric_column("watermark")].iloc[-1])


def test_the_watermark_is_the_minimum_of_the_sources_and_late_rows_count_per_source():
    from pyspark.sql.streaming.tws_tester import TwsTester

    # Spark's own watermark (from the extractor) is far ahead: the operator does not follow it
    tester = TwsTester(processor(), timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60)
    out = tester.testInPandas(0, call([(0, 45, 1)]))          # us silent: no watermark yet
    assert watermark(out) < 0
    out = tester.testInPandas(0, call([(0, 115, 2), (1, 50, 10)]))
    assert watermark(out) < 0                                  # us had sent nothing before this call
    out = tester.testInPandas(0, call([(1, 100, 20)]))         # min(115 - 10, 50 - 30) = 20
    assert watermark(out) == T0 + 20 * SECOND
    assert not (out[C.KIND] == C.PANE).any()
    out = tester.testInPandas(0, call([(0, 20, 4)]))           # min(105, 100 - 30) = 70: [0, 60) fires
    assert watermark(out) == T0 + 70 * SECOND
    panes = out[out[C.KIND] == C.PANE]
    assert (panes["total"].tolist(), panes[C.WINDOW_START].tolist()) == ([15], [T0])
    # judged against 70: [0, 60) has closed; one row of eu, two of us are too late
    out = tester.testInPandas(0, call([(0, 5, 8), (1, 6, 16), (1, 7, 32), (1, 75, 64)]))
    dropped = out[out[C.KIND] == C.DROPPED]
    assert sorted(zip(dropped[C.SOURCE].tolist(), dropped[C.EVENT_TIME].tolist())) == [
        (0, T0 + 5 * SECOND), (1, T0 + 6 * SECOND), (1, T0 + 7 * SECOND)]
    metrics = out[out[C.KIND] == C.METRICS].iloc[-1]
    assert [int(metrics[C.metric_column(c)]) for c in ("dropped_too_late", "dropped_too_late@eu",
                                                       "dropped_too_late@us")] == [3, 1, 2]
