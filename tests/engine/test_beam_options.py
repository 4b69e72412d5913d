"""The options Beam users port: PERIOD d OFFSET o, ALLOWED LATENESS UNBOUNDED,
EMIT ... ON TIME ALWAYS / CLOSING ALWAYS, with exact panes from the per-key loop (the definition),
the engine as dispatched (vectorised paths), and micro-batches (the stream step and the loop)."""
import pickle

import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import ProcessingClock, Timeline
from sqlflow.time import NEG_INF, POS_INF

D = ast.Duration
A = ast.AccumulationMode
AGGS = (Aggregate("count_star", None, "n"), Aggregate("sum", "v", "total"))
EARLY_PERIOD = ast.WatermarkEarlyLate(early=ast.Period(D(10)))
NO_LATENESS = D(0)


def engine(trigger=None, *, mode=A.ACCUMULATING, lateness=NO_LATENESS, on_time=False, closing=False, window=None,
           reopen=False):
    w = ast.Windowing(ast.WindowClause(window or ast.Fixed(D(100))), trigger, ast.AllowedLateness(lateness),
                      ast.Emit(mode, on_time_always=on_time, closing_always=closing, reopen_on_merge=reopen))
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


# ------------------------------------------------------------------ EMIT ... ON TIME ALWAYS

#: early panes at 10 and 20 leave nothing for the watermark's pass at 50
EARLY_ONLY_BATCHES = [1, 10, 12, 14, 20, 50, 60]


def test_by_default_a_firing_without_new_input_emits_no_on_time_pane():
    assert every_path(engine(EARLY_PERIOD), DATA, CROSS_AT_50, batches=EARLY_ONLY_BATCHES) == [
        (1, 1, 0, "EARLY", False, 10),
        (3, 7, 1, "EARLY", False, 20),
    ]


@pytest.mark.parametrize("mode, expected", [
    (A.ACCUMULATING, [(1, 1, 0, "EARLY", False, 10), (3, 7, 1, "EARLY", False, 20), (3, 7, 2, "ON_TIME", True, 50)]),
    # no new input: count 0, sum NULL (Spark's aggregates over no rows)
    (A.DISCARDING, [(1, 1, 0, "EARLY", False, 10), (2, 6, 1, "EARLY", False, 20), (0, None, 2, "ON_TIME", True, 50)]),
])
def test_on_time_always_emits_the_on_time_pane_without_new_input(mode, expected):
    e = engine(EARLY_PERIOD, mode=mode, on_time=True)
    assert every_path(e, DATA, CROSS_AT_50, batches=EARLY_ONLY_BATCHES) == expected


def test_on_time_always_in_retracting_mode_supersedes_the_early_pane():
    e = engine(EARLY_PERIOD, mode=A.ACCUMULATING_AND_RETRACTING, on_time=True)
    assert every_path(e, DATA, CROSS_AT_50, batches=EARLY_ONLY_BATCHES) == [
        (1, 1, 0, "EARLY", False, 10, False),
        (1, 1, 0, "EARLY", False, 20, True),
        (3, 7, 1, "EARLY", False, 20, False),
        (3, 7, 1, "EARLY", False, 50, True),
        (3, 7, 2, "ON_TIME", True, 50, False),
    ]


def test_on_time_always_needs_a_firing_at_the_watermark():
    """REPEAT(PERIOD 10) does not fire when the watermark passes the end: no ON_TIME pane."""
    e = engine(ast.Repeat(ast.Period(D(10))), on_time=True)
    assert every_path(e, DATA, CROSS_AT_50, batches=EARLY_ONLY_BATCHES) == [
        (1, 1, 0, "EARLY", False, 10),
        (3, 7, 1, "EARLY", False, 20),
    ]


def test_the_end_of_input_is_the_instant_of_the_last_timer():
    """The input ends at the last timer that fired (20): the watermark's pass to +inf is at the
    instant of the EARLY pane, so ON TIME ALWAYS adds no pane, and CLOSING ALWAYS marks that pane
    last (it is the window's last)."""
    no_watermark = Timeline.from_steps([], [])
    assert every_path(engine(EARLY_PERIOD, on_time=True), DATA, no_watermark) == [
        (1, 1, 0, "EARLY", False, 10),
        (3, 7, 1, "EARLY", False, 20),
    ]
    assert every_path(engine(EARLY_PERIOD, closing=True), DATA, no_watermark) == [
        (1, 1, 0, "EARLY", False, 10),
        (3, 7, 1, "EARLY", True, 20),
    ]


def test_the_options_add_no_second_pane_at_an_instant():
    """The PERIOD boundary at 50 is also where the watermark passes the end: the timer's EARLY pane
    (step 2) holds everything and is the last; neither option adds a pane after it (a window
    emits at most one pane per instant)."""
    data = rows((5, 1, 1), (6, 42, 2))
    for on_time, closing in ((False, False), (True, False), (False, True), (True, True)):
        e = engine(EARLY_PERIOD, on_time=on_time, closing=closing)
        assert every_path(e, data, CROSS_AT_50, batches=[1, 10, 42, 50, 60]) == [
            (1, 1, 0, "EARLY", False, 10),
            (2, 3, 1, "EARLY", True, 50),
        ]


# ------------------------------------------------------------------ EMIT ... CLOSING ALWAYS

#: ON_TIME at 50, a late element at 60, the window expires (lateness 100) at 80
LATE_DATA = rows((5, 1, 1), (6, 12, 2), (8, 60, 4))
EXPIRES_AT_80 = Timeline.from_steps([50, 80], [100, 250])
LATE_BATCHES = [1, 12, 50, 60, 80]


def test_by_default_an_expiry_without_new_input_emits_nothing():
    assert every_path(engine(lateness=D(100)), LATE_DATA, EXPIRES_AT_80, batches=LATE_BATCHES) == [
        (2, 3, 0, "ON_TIME", False, 50),
        (3, 7, 1, "LATE", False, 60),
    ]


@pytest.mark.parametrize("mode, expected", [
    (A.ACCUMULATING, [(2, 3, 0, "ON_TIME", False, 50), (3, 7, 1, "LATE", False, 60), (3, 7, 2, "LATE", True, 80)]),
    (A.DISCARDING, [(2, 3, 0, "ON_TIME", False, 50), (1, 4, 1, "LATE", False, 60), (0, None, 2, "LATE", True, 80)]),
])
def test_closing_always_emits_a_last_pane_at_expiry(mode, expected):
    e = engine(lateness=D(100), mode=mode, closing=True)
    assert every_path(e, LATE_DATA, EXPIRES_AT_80, batches=LATE_BATCHES) == expected


def test_closing_always_emits_one_last_pane_when_the_expiry_has_input():
    """Lateness 0: the ON_TIME pane is the last one; no second pane at the same instant."""
    e = engine(closing=True, on_time=True)
    assert every_path(e, LATE_DATA, EXPIRES_AT_80, batches=LATE_BATCHES) == [(2, 3, 0, "ON_TIME", True, 50)]


def test_closing_always_when_the_trigger_finishes_without_new_input():
    """SEQUENCE(COUNT 2, WATERMARK): COUNT 2 takes both elements; WATERMARK then fires and finishes
    the trigger with nothing new: by default nothing, with CLOSING ALWAYS a last pane."""
    t = ast.Sequence((ast.Count(2), ast.Watermark()))
    assert every_path(engine(t), LATE_DATA, EXPIRES_AT_80, batches=LATE_BATCHES) == [(2, 3, 0, "EARLY", False, 12)]
    assert every_path(engine(t, closing=True), LATE_DATA, EXPIRES_AT_80, batches=LATE_BATCHES) == [
        (2, 3, 0, "EARLY", False, 12),
        (2, 3, 1, "ON_TIME", True, 50),
    ]


def test_closing_always_on_sessions_closes_the_merged_window_once():
    e = engine(window=ast.Sessions(D(10)), lateness=D(100), closing=True)
    data = rows((5, 1, 1), (12, 2, 2), (30, 3, 4))
    tl = Timeline.from_steps([50, 80], [100, 500])
    assert every_path(e, data, tl, batches=[1, 2, 3, 50, 80]) == [
        (2, 3, 0, "ON_TIME", False, 50),
        (1, 4, 0, "ON_TIME", False, 50),
        (2, 3, 1, "LATE", True, 80),
        (1, 4, 1, "LATE", True, 80),
    ]


# ------------------------------------------------------------------ EMIT ... REOPEN ON MERGE

#: sessions of gap 10: [0, 10) (v 1, arriving at 1) and [25, 35) (v 2, at 2); the watermark passes
#: [0, 10) at 5 (W = 12), so TRIGGER WATERMARK fires and finishes it; at 8 a late element (event 8,
#: v 4) opens [8, 18), which merges with the closed [0, 10) into [0, 18), whose end the watermark
#: (12) has not passed; at 20 the watermark (40) passes every end
REOPEN_DATA = rows((0, 1, 1), (25, 2, 2), (8, 8, 4))
REOPEN_TIMELINE = Timeline.from_steps([5, 20], [12, 40])
REOPEN_BATCHES = [1, 2, 5, 8, 20]


def test_by_default_a_late_element_merging_into_a_closed_session_is_dropped():
    """docs/semantics.md 3.3: an element that would merge only into closed windows is dropped."""
    e = engine(ast.Watermark(), window=ast.Sessions(D(10)), lateness=D(100))
    assert every_path(e, REOPEN_DATA, REOPEN_TIMELINE, batches=REOPEN_BATCHES) == [
        (1, 1, 0, "ON_TIME", True, 5),    # [0, 10) fires and finishes
        (1, 2, 0, "ON_TIME", True, 20),   # [25, 35)
    ]
    assert e.run(REOPEN_DATA, timeline=REOPEN_TIMELINE, replay=True).metrics["dropped_closed_window"] == 1


def test_reopen_on_merge_reopens_the_merged_session_as_beam_does():
    """Beam's AfterWatermark.onMerge: the merged [0, 18), whose end the watermark has not passed,
    is open again with a fresh trigger; at 20 the watermark passes 18 and it fires with everything
    (accumulating: 1 + 4), as pane 1 of the session, LATE: the session had its ON_TIME pane (a
    window's timings run EARLY, ON_TIME, LATE, in Beam's PaneInfo too)."""
    e = engine(ast.Watermark(), window=ast.Sessions(D(10)), lateness=D(100), reopen=True)
    got = every_path(e, REOPEN_DATA, REOPEN_TIMELINE, batches=REOPEN_BATCHES)
    assert got == [
        (1, 1, 0, "ON_TIME", True, 5),
        (2, 5, 1, "LATE", True, 20),      # [0, 18), reopened
        (1, 2, 0, "ON_TIME", True, 20),
    ]
    run = e.run(REOPEN_DATA, timeline=REOPEN_TIMELINE, replay=True)
    assert run.metrics["dropped_closed_window"] == 0
    assert run.panes[["window_start", "window_end"]].values.tolist() == [[0, 10], [0, 18], [25, 35]]


def test_reopen_on_merge_keeps_a_session_whose_end_the_watermark_passed_closed():
    """The late element (event 1, arriving at 8) falls inside [0, 10) and [1, 11) merges it into
    [0, 11), whose end the watermark (12) has passed: it stays closed, and the element is dropped."""
    e = engine(ast.Watermark(), window=ast.Sessions(D(10)), lateness=D(100), reopen=True)
    data = rows((0, 1, 1), (25, 2, 2), (1, 8, 4))
    assert every_path(e, data, REOPEN_TIMELINE, batches=REOPEN_BATCHES) == [
        (1, 1, 0, "ON_TIME", True, 5),
        (1, 2, 0, "ON_TIME", True, 20),
    ]
    assert e.run(data, timeline=REOPEN_TIMELINE, replay=True).metrics["dropped_closed_window"] == 1


# ------------------------------------------------------------------ ALLOWED LATENESS UNBOUNDED

FAR_AHEAD = Timeline.from_steps([50, 90], [10**9, 10**9])


def test_unbounded_lateness_keeps_every_window():
    """A watermark a billion past the window's end: with any finite lateness below it the element
    arriving at 60 is too late; with UNBOUNDED it fires a LATE pane."""
    assert every_path(engine(lateness=D(1000)), LATE_DATA, FAR_AHEAD, batches=[1, 12, 50, 60, 90]) == [
        (2, 3, 0, "ON_TIME", True, 50),
    ]
    e = engine(lateness=ast.Unbounded())
    assert every_path(e, LATE_DATA, FAR_AHEAD, batches=[1, 12, 50, 60, 90]) == [
        (2, 3, 0, "ON_TIME", False, 50),
        (3, 7, 1, "LATE", False, 60),
    ]
    assert e.run(LATE_DATA, timeline=FAR_AHEAD, replay=True).metrics["dropped_too_late"] == 0


def test_unbounded_lateness_state_is_never_collected_on_a_stream():
    """Without an end of input a window's state stays (state grows; docs/streaming.md); the
    operator is told no watermark ever expires it, and the end of input still closes it."""
    e = engine(lateness=ast.Unbounded(), closing=True)
    for reference in (False, True):
        state = None
        _, state = e.advance(state, LATE_DATA.iloc[:2].drop(columns=[ARRIVAL_TIME]), p=12, wm_prev=NEG_INF,
                             wm_new=10**9, reference=reference)
        assert e.state_summary(state, 10**9)[:2] == (1, 1)
        assert e.state_summary(state, 10**9)[3] == POS_INF
        result, state = e.advance(state, LATE_DATA.iloc[2:].drop(columns=[ARRIVAL_TIME]), p=60, wm_prev=10**9,
                                  wm_new=10**12, end_of_input=True, reference=reference)
        assert panes(result.panes) == [(3, 7, 1, "LATE", True, 60)]  # the end of input is this instant
        assert not state


# ------------------------------------------------------------------ every path, on random input

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from .strategies import inputs, schedule_triggers, triggers, windows  # noqa: E402
from .test_stream_step import micro_batches, assert_step_equals_loop  # noqa: E402
from tests.conftest import examples  # noqa: E402

PROPERTY = settings(max_examples=examples(120))
OPTIONS = st.tuples(st.booleans(), st.booleans())
LATENESS = st.sampled_from([D(0), D(25), ast.Unbounded()])
PROPERTY_AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"))


@PROPERTY
@given(inputs(), windows, st.one_of(triggers, schedule_triggers), st.sampled_from(list(A)), LATENESS, OPTIONS,
       st.booleans())
def test_the_engine_as_dispatched_equals_the_reference_with_the_options(data, window, trigger, mode, lateness,
                                                                        options, replay):
    rows_, tl = data
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(lateness), ast.Emit(mode, *options))
    e = Engine(EnginePlan(w, PROPERTY_AGGS, keys=("k",)))
    ref = e.run(rows_, timeline=tl, replay=replay, reference=True)
    got = e.run(rows_, timeline=tl, replay=replay)
    pd.testing.assert_frame_equal(got.panes, ref.panes)
    assert got.metrics == ref.metrics
    pd.testing.assert_frame_equal(got.dropped, ref.dropped)


@PROPERTY
@given(st.data(), inputs(), windows, triggers, st.sampled_from(list(A)), st.sampled_from([0, 25, ast.Unbounded()]),
       OPTIONS)
def test_the_stream_step_equals_the_per_key_loop_with_the_options(data, drawn, window, trigger, mode, lateness,
                                                                  options):
    rows_, tl = drawn
    assert_step_equals_loop(rows_, window, trigger, mode, lateness, data.draw(micro_batches(rows_, tl)), options=options)


@PROPERTY
@given(inputs(), windows, triggers, LATENESS)
def test_closing_always_ends_every_window_with_exactly_one_last_pane(data, window, trigger, lateness):
    """On recorded input run to its end, every window that emitted ends with one is_last pane,
    its last; by default a window may end on a pane that is not marked last. (A session merged
    into a bigger one lives on in it: its panes are continued by the merged window's.)"""
    assume(not isinstance(window, ast.Sessions))
    rows_, tl = data
    # a processing clock comes with no allowed lateness: SQL refuses ALLOWED LATENESS on a window
    # ON PROCESSING TIME (docs/semantics.md 10), and the engine's end of input does not yet run
    # such a clock on past the windows it still owes (a closing pane came before the ON_TIME one)
    assume(not isinstance(tl, ProcessingClock) or (isinstance(lateness, ast.Duration) and lateness.micros == 0))
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(lateness),
                      ast.Emit(A.ACCUMULATING, closing_always=True))
    panes_ = Engine(EnginePlan(w, PROPERTY_AGGS, keys=("k",))).run(rows_, timeline=tl, replay=True).panes
    for _, g in panes_.groupby(["k", "window_start", "window_end"], dropna=False, sort=False):
        assert g["is_last"].tolist() == [False] * (len(g) - 1) + [True]


@PROPERTY
@given(inputs(), windows, triggers, st.sampled_from(list(A)), LATENESS, OPTIONS)
def test_the_options_change_nothing_where_the_native_paths_run(data, window, trigger, mode, lateness, options):
    """Why the native rewrite (bounded data without arrival times, a trigger that cannot fire
    before the end: sqlflow/plan/native_rewrite.py) and Spark's native streaming aggregation (default
    trigger, no lateness: sqlflow/spark/streaming/native.py) need no check of the options: there
    every window fires once, with all its input, and that pane is its last."""
    from sqlflow.engine import collapsible

    rows_, tl = data

    def run(opts, lateness, trigger, replay):
        w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(lateness), ast.Emit(mode, *opts))
        return Engine(EnginePlan(w, PROPERTY_AGGS, keys=("k",))).run(rows_, timeline=tl, replay=replay,
                                                                      reference=True).panes

    if collapsible(trigger or ast.default_trigger()):
        pd.testing.assert_frame_equal(run(options, lateness, trigger, False), run((False, False), lateness, trigger, False))
    pd.testing.assert_frame_equal(run(options, D(0), None, True), run((False, False), D(0), None, True))


def test_the_watermark_schedule_hands_the_options_to_the_per_key_loop():
    """One predicate for the engine's dispatch and the planner's explanation (`path_for`)."""
    from sqlflow.engine import REPLAY, EnginePlan, path_for, schedule_shape

    def w(**emit):
        return ast.Windowing(ast.WindowClause(ast.Fixed(D(100))), EARLY_PERIOD, None, ast.Emit(A.ACCUMULATING, **emit))

    assert schedule_shape(w()) == ("early_period", (10, 0))
    assert schedule_shape(w(on_time_always=True)) is None
    assert schedule_shape(w(closing_always=True)) is None
    assert [path_for(EnginePlan(w(**emit), ()), input=REPLAY).name
            for emit in ({}, {"on_time_always": True}, {"closing_always": True})] == ["schedule", "keyloop", "keyloop"]


def _without_watermark():
    from .strategies import _extend, durations, periods

    leaves = st.one_of(periods, st.builds(ast.Delay, durations(1, 6)), st.builds(ast.Count, st.integers(1, 4)),
                       st.just(ast.When(ast.SqlExpr("flag"))))
    return st.recursive(leaves, _extend, max_leaves=4)


@PROPERTY
@given(inputs(), windows, _without_watermark(), st.sampled_from(list(A)), LATENESS, st.booleans())
def test_on_time_always_adds_nothing_to_a_trigger_without_watermark(data, window, trigger, mode, lateness, replay):
    """What sqlflow.spark.trigger_checks.option_notes warns: without a WATERMARK in the trigger no
    firing happens as the watermark passes a window's end, so ON TIME ALWAYS changes nothing."""
    rows_, tl = data

    def run(on_time):
        w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(lateness), ast.Emit(mode, on_time))
        return Engine(EnginePlan(w, PROPERTY_AGGS, keys=("k",))).run(rows_, timeline=tl, replay=replay,
                                                                      reference=True).panes

    pd.testing.assert_frame_equal(run(True), run(False))
