"""The options Beam users port (issue 19, item 15): PERIOD d OFFSET o, ALLOWED LATENESS UNBOUNDED,
EMIT ... ON TIME ALWAYS / CLOSING ALWAYS, with exact panes from the per-key loop (the definition),
the engine as dispatched (vectorised paths), and micro-batches (the stream step and the loop)."""
import pickle

import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import ARRIVAL_TIME, EVENT_TIME, EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF, POS_INF

D = ast.Duration
A = ast.AccumulationMode
AGGS = (Aggregate("count_star", None, "n"), Aggregate("sum", "v", "total"))
EARLY_PERIOD = ast.WatermarkEarlyLate(early=ast.Period(D(10)))


def engine(trigger=None, *, mode=A.ACCUMULATING, lateness=D(0), on_time=False, closing=False, window=None):
    w = ast.Windowing(ast.WindowClause(window or ast.Fixed(D(100))), trigger, ast.AllowedLateness(lateness),
                      ast.Emit(mode, on_time_always=on_time, closing_always=closing))
    return Engine(EnginePlan(w, AGGS, keys=("k",)))


def rows(*elements):
    """(event time, arrival time, v) of key 1."""
    et, at, v = zip(*elements)
    return pd.DataFrame({"k": 1, "v": np.array(v, np.int64), EVENT_TIME: np.array(et, np.int64),
                         ARRIVAL_TIME: np.array(at, np.int64)})


def panes(frame: pd.DataFrame) -> list[tuple]:
    """(n, total, pane_index, timing, is_last, emit_time[, is_retraction]) per pane row."""
    cols = ["n", "total", "pane_index", "pane_timing", "is_last", "emit_time"]
    cols += ["is_retraction"] if "is_retraction" in frame else []
    return [tuple(None if pd.isna(x) else x for x in r) for r in frame[cols].itertuples(index=False)]


def every_path(e: Engine, data: pd.DataFrame, timeline: Timeline, batches=None) -> list[tuple]:
    """The panes of the per-key loop; the dispatched engine gives exactly the same, and so do
    micro-batches (`batches`: their instants, each with the timeline's watermark; every arrival
    instant must be one) through the stream step and through the loop, as the replay whose timers
    fire at those instants does."""
    ref = e.run(data, timeline=timeline, replay=True, reference=True)
    got = e.run(data, timeline=timeline, replay=True)
    pd.testing.assert_frame_equal(got.panes, ref.panes)
    assert got.metrics == ref.metrics
    if batches is not None:
        clamped = e.run(data, timeline=timeline, replay=True, reference=True, timer_instants=np.array(batches))
        for reference in (True, False):
            state, out, prev = None, [], NEG_INF
            at = data[ARRIVAL_TIME].to_numpy()
            for i, p in enumerate(batches):
                lo = batches[i - 1] if i else NEG_INF
                batch = data[(at > lo) & (at <= p)].drop(columns=[ARRIVAL_TIME])
                wm = int(timeline.at(p))
                result, state = e.advance(state, batch, p=p, wm_prev=prev, wm_new=wm,
                                          end_of_input=i == len(batches) - 1, reference=reference)
                state = pickle.loads(pickle.dumps(state))
                out.append(result.panes)
                prev = wm
            assert panes(pd.concat(out, ignore_index=True)) == panes(clamped.panes), f"reference={reference}"
    return panes(ref.panes)


# ------------------------------------------------------------------ PERIOD d OFFSET o

DATA = rows((5, 1, 1), (6, 12, 2), (7, 14, 4))
#: the watermark passes the window [0, 100) at processing time 50
CROSS_AT_50 = Timeline.from_steps([50, 60], [100, 100])


def test_period_boundaries_are_shifted_by_the_offset():
    shifted = ast.WatermarkEarlyLate(early=ast.Period(D(10), D(3)))
    assert every_path(engine(shifted), DATA, CROSS_AT_50, batches=[1, 3, 12, 13, 14, 23, 50, 60]) == [
        (1, 1, 0, "EARLY", False, 3),
        (2, 3, 1, "EARLY", False, 13),
        (3, 7, 2, "EARLY", False, 23),
    ]
    assert every_path(engine(EARLY_PERIOD), DATA, CROSS_AT_50) == [
        (1, 1, 0, "EARLY", False, 10),
        (3, 7, 1, "EARLY", False, 20),
    ]


def test_an_arrival_on_a_shifted_boundary_is_in_that_boundarys_pane():
    e = engine(ast.Repeat(ast.Period(D(10), D(3))))
    assert every_path(e, rows((5, 13, 1), (6, 14, 2)), Timeline.from_steps([], [])) == [
        (1, 1, 0, "EARLY", False, 13),
        (2, 3, 1, "EARLY", False, 23),
    ]
