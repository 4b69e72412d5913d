"""Sessions that late elements bridge run in the per-key loop while the other sessions of the same
key run in the vectorised schedule; a key's input still ends after its last processing-time timer,
whichever part fired it (docs/semantics.md, end of input)."""
import numpy as np
import pandas as pd

from sqlflow import ast
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.watermarks import Timeline

from .test_properties import D, engine

GAP, PERIOD, LATENESS = 10, 100, 1000
MODE = ast.AccumulationMode.ACCUMULATING_AND_RETRACTING


def run_both(elements, steps):
    """elements: (event time, arrival time); steps: (arrival, watermark). Returns (panes, reference)."""
    et, at = (np.array(c, np.int64) for c in zip(*elements))
    rows = pd.DataFrame({"k": np.zeros(len(et), np.int64), "v": np.arange(1, len(et) + 1), EVENT_TIME: et,
                         ARRIVAL_TIME: at})
    tl = Timeline.from_steps(*(np.array(c, np.int64) for c in zip(*steps)))
    e = engine(ast.Sessions(D(GAP)), ast.WatermarkEarlyLate(early=ast.Period(D(PERIOD))), MODE, LATENESS)
    got = e.run(rows, timeline=tl, replay=True)
    ref = e.run(rows, timeline=tl, replay=True, reference=True)
    return got.panes, ref.panes


def last_pane(panes, start):
    mine = panes[(panes.window_start == start) & ~panes.is_retraction]
    return mine.iloc[-1]


def test_a_bridged_sessions_timer_ends_the_input_of_the_keys_other_sessions():
    panes, ref = run_both(
        [(15, 10), (24, 60),  # session [15, 34): ON_TIME at 50, then one element the watermark never passes
         (100, 70), (115, 75), (108, 250)],  # [100, 110) and [115, 125), bridged at 250: timer at 300
        [(50, 30)])
    pd.testing.assert_frame_equal(panes, ref)
    bridged, other = last_pane(panes, 100), last_pane(panes, 15)
    assert (bridged.window_end, bridged.pane_timing, bridged.emit_time) == (125, "EARLY", 300)
    # the input (last arrival 250) ends after the timer at 300
    assert (other.window_end, other.pane_timing, other.total, other.emit_time) == (34, "LATE", 3, 300)


def test_a_scheduled_sessions_timer_ends_the_input_of_a_bridged_session():
    panes, ref = run_both(
        [(100, 70), (115, 75),  # EARLY panes at 100, both passed by the watermark at 200
         (108, 210), (122, 210),  # bridge them: [100, 132), beyond the last watermark (131)
         (500, 260)],  # a session of its own: timer at 300
        [(50, 30), (200, 131)])
    pd.testing.assert_frame_equal(panes, ref)
    bridged, other = last_pane(panes, 100), last_pane(panes, 500)
    assert (other.window_end, other.pane_timing, other.emit_time) == (510, "EARLY", 300)
    assert (bridged.window_end, bridged.pane_timing, bridged.total, bridged.emit_time) == (132, "ON_TIME", 10, 300)


def _bridged(sessions, gap=6):
    """`vectorised._bridged_sessions` over sessions given as lists of instants, each a list of
    element times (in the order they are handed over, which within an instant is any)."""
    from sqlflow.engine.vectorised import _bridged_sessions

    group, t, rank = [], [], []
    for g, instants in enumerate(sessions):
        for r, times in enumerate(instants):
            group += [g] * len(times)
            t += times
            rank += [r] * len(times)
    return _bridged_sessions(np.array(group), np.array(t, np.int64), np.array(rank, np.int64), gap).tolist()


def test_elements_of_one_instant_chain_to_the_span_together():
    assert _bridged([
        [[0], [10, 5]],         # 5 joins 0, 10 joins 5 at the same instant: always connected
        [[20], [10, 15]],       # likewise on the left: 15 joins 20, 10 joins 15
        [[0], [12], [6]],       # 12 arrives 12 >= 6 away from 0: two sessions until 6 bridges them
        [[0], [5, 10, 15]],     # a chain of three to the right
        [[0, 12], [6]],         # the first instant alone is not connected
        [[0], [-6]],            # exactly a gap away on the left: not connected
        [[3], [0, 8], [18, 13]],  # both sides at one instant, then a chain of two
        [[0], [5], [-4]],       # a left element joins the span's start, not its end
    ]) == [2, 4, 5]
