"""A chained stage's operator (udfs/chained_operator.py) driven by PySpark's TwsTester (no query, no JVM):
its watermark is the running maximum of the minimum, over the first stage's buckets, of each
one's latest report min(watermark, held); a bucket that has not reported holds it at -inf, an
older report (smaller seq) changes nothing, and the input ends when every bucket's has."""
import numpy as np
import pandas as pd
from pyspark.sql.streaming.tws_tester import TwsTester

from sqlflow import ast
from sqlflow import columns as C
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.time import POS_INF, SECOND
from sqlflow.udfs import chained_operator, tws
from sqlflow.udfs import streaming as op

ENGINE_COLUMNS = (C.EVENT_TIME, "v")
FRAME = (C.BUCKET, C.EVENT_TIME, "v", C.KIND, *C.REPORT_COLUMNS)


def processor(report: bool = False, keep_dropped: bool = False, upstream_buckets: int = 2):
    """FIXED 20 s, the default trigger, COUNT(*) and SUM(v) per window, no keys; the first stage
    has two buckets."""
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(20 * SECOND))), None,
                              ast.AllowedLateness(ast.Duration(0)), ast.Emit(ast.AccumulationMode.DISCARDING))
    plan = EnginePlan(windowing, (Aggregate("count", "v", "n"), Aggregate("sum", "v", "total")), keys=())
    spec = op.StreamSpec(plan=plan, input_columns=ENGINE_COLUMNS, frame_columns=FRAME + ((C.REASON,) if keep_dropped
                                                                                           else ()),
                         integral_columns=(C.EVENT_TIME, "v"), report=report, keep_dropped=keep_dropped)
    return tws.ChainedProcessor(chained_operator.ChainSpec(spec, upstream_buckets=upstream_buckets))


def rows(data=(), reports=()):
    """Data rows (event second, v) and reports (from, seq, watermark s, held s or None, time s, done)."""
    n, r = len(data), len(reports)
    sec = lambda s: POS_INF if s is None else s * SECOND  # noqa: E731
    return pd.DataFrame({
        C.BUCKET: np.zeros(n + r, np.int32),
        C.EVENT_TIME: [s * SECOND for s, _ in data] + [0] * r,
        "v": [v for _, v in data] + [0] * r,
        C.KIND: np.array([C.DATA] * n + [C.REPORT] * r, np.int32),
        C.REPORT_FROM: [0] * n + [f for f, *_ in reports],
        C.REPORT_SEQ: [0] * n + [q for _, q, *_ in reports],
        C.REPORT_WM: [0] * n + [sec(w) for _, _, w, *_ in reports],
        C.REPORT_HELD: [0] * n + [sec(h) for *_, h, _, _ in reports],
        C.REPORT_TIME: [0] * n + [t * SECOND for *_, t, _ in reports],
        C.REPORT_DONE: [False] * n + [d for *_, d in reports],
    })[list(FRAME)]


def panes(out: pd.DataFrame) -> list[tuple]:
    p = out[out[C.KIND] == C.PANE]
    return [(int(s) // SECOND, int(n), int(t), timing, int(e) // SECOND)
            for s, n, t, timing, e in zip(p[C.WINDOW_START], p["n"], p["total"], p[C.PANE_TIMING], p[C.EMIT_TIME])]


def watermark(out: pd.DataFrame) -> int:
    return int(out[out[C.KIND] == C.METRICS][C.metric_column("watermark")].iloc[-1])


def test_the_watermark_is_the_minimum_of_the_first_stages_latest_reports():
    tester = TwsTester(processor(), timeMode="None")
    # bucket 0 reports 40; bucket 1 has not reported: the watermark stays at -inf
    out = tester.testInPandas(0, rows([(5, 1), (25, 2)], [(0, 1, 40, None, 100, False)]))
    assert panes(out) == [] and watermark(out) < 0
    # bucket 1 reports 50, holding 31 (a pending retraction): min(40, 31) = 31 closes [0, 20) only
    out = tester.testInPandas(0, rows([], [(1, 1, 50, 31, 110, False)]))
    assert panes(out) == [(0, 1, 1, "ON_TIME", 110)] and watermark(out) == 31 * SECOND
    # an older report of bucket 1 (seq 0) is ignored; bucket 0's newer one moves it to min(60, 31)
    out = tester.testInPandas(0, rows([(35, 4)], [(1, 0, 90, None, 120, False), (0, 2, 60, None, 120, False)]))
    assert panes(out) == [] and watermark(out) == 31 * SECOND
    # bucket 1 releases its hold: min(60, 55) = 55 closes [20, 40) with 25 s and 35 s's rows
    out = tester.testInPandas(0, rows([], [(1, 2, 55, None, 130, False)]))
    assert panes(out) == [(20, 2, 6, "ON_TIME", 130)] and watermark(out) == 55 * SECOND
    # the input ends once both buckets' have: the watermark is +inf and nothing is left
    out = tester.testInPandas(0, rows([(70, 8)], [(0, 3, None, None, 140, True)]))
    assert panes(out) == [] and watermark(out) == 55 * SECOND
    out = tester.testInPandas(0, rows([], [(1, 3, None, None, 150, True)]))
    assert panes(out) == [(60, 1, 8, "ON_TIME", 150)]
    assert op.stored(tester.peekValueState(op.STATE_NAME, 0))[0].finished


def test_a_chained_stage_reports_in_turn():
    """A third stage reads the second: every call of the second's buckets reports its watermark,
    a call number that grows, the batch time and whether its input ended."""
    tester = TwsTester(processor(report=True), timeMode="None")
    tester.testInPandas(0, rows([(5, 1)], [(0, 1, 40, None, 100, False), (1, 1, 30, None, 100, False)]))
    out = tester.testInPandas(3, rows([], [(0, 2, 50, None, 110, False), (1, 2, 45, None, 110, False)]))
    report = out[out[C.KIND] == C.METRICS][list(C.REPORT_COLUMNS)].iloc[-1].tolist()
    assert report == [3, 1, 45 * SECOND, POS_INF, 110 * SECOND, False]


def test_a_chained_stage_lists_its_dropped_rows_and_passes_on_those_of_the_stage_before():
    """With keep_dropped (windows over ASCENDING PER on the operators, sqlflow/spark/streaming/
    partitioned.py): the rows the first stage dropped (DROPPED, with their reason) come out as
    DROPPED rows with no window and the batch's time, beside the stage's own too-late rows."""
    tester = TwsTester(processor(keep_dropped=True, upstream_buckets=1), timeMode="None")
    tester.testInPandas(0, rows([(5, 1)], [(0, 1, 30, None, 100, False)]).assign(**{C.REASON: None}))
    # batch at 110: 8 s (late: W 30 passed [0, 20)), and 3 s and a NULL time the first stage dropped
    frame = rows([(8, 2), (3, 4), (0, 5)], [(0, 2, 40, None, 110, False)]).assign(**{C.REASON: None})
    frame[C.KIND] = np.array([C.DATA, C.DROPPED, C.DROPPED, C.REPORT], np.int32)
    frame[C.REASON] = [None, C.BEHIND_PARTITION, C.NULL_EVENT_TIME, None]
    frame[C.EVENT_TIME] = pd.array([8 * SECOND, 3 * SECOND, None, 0], dtype="Int64")
    out = tester.testInPandas(0, frame)
    dropped = out[out[C.KIND] == C.DROPPED]
    got = [(None if pd.isna(t) else int(t) // SECOND, r, None if pd.isna(s) else int(s) // SECOND, int(e) // SECOND)
           for t, r, s, e in zip(dropped[C.EVENT_TIME], dropped[C.REASON], dropped[C.WINDOW_START],
                                 dropped[C.EMIT_TIME])]
    assert got == [(3, C.BEHIND_PARTITION, None, 110), (None, C.NULL_EVENT_TIME, None, 110),
                   (8, C.TOO_LATE, 0, 110)]
    metrics = out[out[C.KIND] == C.METRICS]
    assert int(metrics[C.metric_column("dropped_too_late")].sum()) == 1  # the first stage counts its own
    assert int(metrics[C.metric_column("engine_rows")].sum()) == 1
