"""Event-time ordering and ascending per-partition watermarks in the engine, no Spark
(docs/semantics.md, 1.2 and 11). Every expected value is derived by hand in the comments."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.ordering import emit_times, ordered
from sqlflow.engine.partitions import ascending_per_partition, behind_partition
from tests.conftest import examples
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import bounded_delay, minimum
from sqlflow.time import NEG_INF


def test_out_of_order_rows_come_out_ordered_when_the_watermark_passes_them():
    # DELAY OF 10: W = max event time arrived - 10: 90 at 101, 102 at 113, 115 at 126 (the end)
    ids = np.array(["r1", "r2", "r3", "r4", "r5", "r6"])
    ts = np.array([100, 95, 112, 104, 99, 125])
    at = np.array([101, 102, 113, 114, 115, 126])
    tl = bounded_delay(at, ts, 10)
    assert tl.steps() == [(101, 90), (113, 102), (126, 115)]
    order, emit = ordered(tl, ts, at, p_end=126)
    # r5 (99) arrives at 115 behind W = 102: late. W > 95 and W > 100 first at 113 (102);
    # W > 104 and W > 112 at 126 (115); W never passes 125: the end of input emits it, at 126.
    assert ids[order].tolist() == ["r2", "r1", "r4", "r3", "r6"]
    assert emit[order].tolist() == [113, 113, 126, 126, 126]
    assert emit_times(tl, ts, at, 126)[1].tolist() == [False, False, False, False, True, False]


def test_ties_in_event_time_are_broken_by_the_further_keys():
    tl = bounded_delay([1, 2], [10, 30], 0)
    order, emit = ordered(tl, [10, 10, 10], [1, 1, 2], p_end=2, ties=[np.array(["b", "c", "a"])])
    assert order.tolist() == [2, 0, 1] and emit[order].tolist() == [2, 2, 2]


# Two partitions; B lags behind A in processing time. (partition, event time, arrival):
A_ROWS = [("A", 1, 1), ("A", 12, 2), ("A", 25, 3), ("A", 31, 6)]
B_ROWS = [("B", 0, 1), ("B", 2, 4), ("B", 8, 5), ("B", 15, 7), ("B", 33, 8)]
PART, TS, AT = (np.array(c) for c in zip(*(A_ROWS + B_ROWS)))


def test_per_partition_watermark_waits_for_the_lagging_partition():
    # latest per partition after each instant (A, B) -> min: 1:(1,0)->0 2:(12,0)->0 3:(25,0)->0
    # 4:(25,2)->2 5:(25,8)->8 6:(31,8)->8 7:(31,15)->15 8:(31,33)->31
    tl = ascending_per_partition(AT, TS, PART)
    assert tl.steps() == [(1, 0), (4, 2), (5, 8), (7, 15), (8, 31)]
    assert not behind_partition(AT, TS, PART).any()
    # the global rule (Spark's: largest event time anywhere, delay 0): 1, 12, 25, 31, 33
    assert bounded_delay(AT, TS, 0).steps() == [(1, 1), (2, 12), (3, 25), (6, 31), (8, 33)]


def _panes(tl):
    rows = pd.DataFrame({"v": np.ones(len(TS), np.int64), EVENT_TIME: TS, ARRIVAL_TIME: AT})
    plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(10)))),
                      (Aggregate("count", "v", "n"),), keys=())
    result = Engine(plan).run(rows, timeline=tl, replay=True)
    panes = result.panes[["window_start", "n", "pane_timing", "emit_time"]].values.tolist()
    return panes, result


def test_windowed_panes_under_each_rule():
    # per partition: [0,10) holds B0, A1, B2, B8 (all on time) and fires when W >= 10, at 7 (15);
    # [10,20) (A12, B15) and [20,30) (A25) when W >= 30, at 8 (31); [30,40) (A31, B33) at the end, 8
    panes, _ = _panes(ascending_per_partition(AT, TS, PART))
    assert panes == [[0, 4, "ON_TIME", 7], [10, 2, "ON_TIME", 8], [20, 1, "ON_TIME", 8], [30, 2, "ON_TIME", 8]]
    # global: [0,10) fires at 2 (W 12) with B0, A1, and expires; B2 (at 4) and B8 (at 5) are too
    # late; [10,20) fires at 3 (W 25) with A12, and B15 (at 7, W 31) is too late; [20,30) at 6 (31)
    panes, result = _panes(bounded_delay(AT, TS, 0))
    assert panes == [[0, 2, "ON_TIME", 2], [10, 1, "ON_TIME", 3], [20, 1, "ON_TIME", 6], [30, 2, "ON_TIME", 8]]
    dropped = result.dropped
    assert TS[dropped["row"].to_numpy()].tolist() == [2, 8, 15]
    assert dropped["reason"].tolist() == ["too late"] * 3


def test_ordering_under_each_rule():
    order, emit = ordered(ascending_per_partition(AT, TS, PART), TS, AT, p_end=8)
    # W passes 0, 1 at 4 (2); 2 at 5 (8); 8, 12 at 7 (15); 15, 25 at 8 (31); 31, 33 at the end (8)
    assert TS[order].tolist() == [0, 1, 2, 8, 12, 15, 25, 31, 33]
    assert emit[order].tolist() == [4, 4, 5, 7, 7, 8, 8, 8, 8]
    order, emit = ordered(bounded_delay(AT, TS, 0), TS, AT, p_end=8)
    # global: B2 (at 4, W 25), B8 (at 5), B15 (at 7, W 31) are late; W passes 0 at 1 (1), 1 at 2
    # (12), 12 at 3 (25), 25 at 6 (31); 31 at 8 (33), and 33 at the end (8)
    assert TS[order].tolist() == [0, 1, 12, 25, 31, 33]
    assert emit[order].tolist() == [1, 2, 3, 6, 8, 8]


def test_an_idle_partition_releases_the_watermark_after_its_timeout():
    # A: 10 at 1, 20 at 2, 30 at 3, 40 at 20; B: 5 at 1, then nothing
    part = ["A", "A", "A", "A", "B"]
    ts, at = np.array([10, 20, 30, 40, 5]), np.array([1, 2, 3, 20, 1])
    # without a timeout B holds the watermark at 5 until the end
    assert ascending_per_partition(at, ts, part).steps() == [(1, 5)]
    # timeout 5: B is idle from 1 + 5 = 6 on, so W = A's 30; A is idle from 3 + 5 = 8 too: every
    # partition idle, W stays; A's row at 20 makes it active again: 40
    tl = ascending_per_partition(at, ts, part, idle_timeout=5)
    assert tl.steps() == [(1, 5), (6, 30), (20, 40)]
    order, emit = ordered(tl, ts, at, p_end=20)
    assert ts[order].tolist() == [5, 10, 20, 30, 40] and emit[order].tolist() == [6, 6, 6, 20, 20]
    # a partition that comes back behind the watermark: its row is late for the source
    late = emit_times(tl, [25], [21], p_end=21)[1]
    assert late.tolist() == [True]


def test_a_row_behind_its_own_partition_is_late():
    # A: 10 at 1, 8 at 2 (behind A's 10); B: 3 at 1, 9 at 3. W: 1 -> 3, 3 -> 9 (A 10, B 9)
    part, ts, at = ["A", "A", "B", "B"], np.array([10, 8, 3, 9]), np.array([1, 2, 1, 3])
    behind = behind_partition(at, ts, part)
    assert behind.tolist() == [False, True, False, False]
    tl = ascending_per_partition(at, ts, part)
    assert tl.steps() == [(1, 3), (3, 9)]
    # under the source watermark alone 8 (at 2, W 3) would be on time; its partition said >= 10
    order, emit = ordered(tl, ts, at, p_end=3, behind=behind)
    assert ts[order].tolist() == [3, 9, 10] and emit[order].tolist() == [3, 3, 3]


def test_several_sources_take_the_minimum_of_both():
    parts = ascending_per_partition([1, 2], [50, 60], ["a", "a"])
    delay = bounded_delay([1, 3], [40, 100], 10)
    # parts: 50 at 1, 60 at 2; delay: 30 at 1, 90 at 3 -> the minimum: 30 at 1, 60 at 3
    assert minimum(parts, delay).steps() == [(1, 30), (3, 60)]


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.integers(0, 30)), min_size=1, max_size=40),
       st.one_of(st.none(), st.integers(1, 10)))
def test_the_matrix_matches_a_direct_evaluation(rows, idle):
    """The vectorised watermark equals the rule evaluated instant by instant (small inputs)."""
    part, ts, at = (np.array(c) for c in zip(*rows))
    tl = ascending_per_partition(at, ts, part, idle_timeout=idle)
    for chunk in (1, 2, 3):  # the chunked evaluation gives the same steps at every chunk size
        assert ascending_per_partition(at, ts, part, idle_timeout=idle, chunk=chunk).steps() == tl.steps()
    instants = sorted(set(at.tolist()) | ({a + idle for a in at.tolist() if a + idle <= at.max()} if idle else set()))
    w = NEG_INF
    for p in instants:
        held = []
        for k in set(part.tolist()):
            mine = (part == k) & (at <= p)
            if not mine.any() or (idle is not None and at[mine].max() <= p - idle):
                continue
            held.append(ts[mine].max())
        if held:
            w = max(w, min(held))
        assert tl.at(p) == w, (p, tl.steps())
    # rows behind their partition, directly
    behind = [bool(((part == k) & (at < a) & (ts > t)).any()) for k, t, a in zip(part, ts, at)]
    assert behind_partition(at, ts, part).tolist() == behind
