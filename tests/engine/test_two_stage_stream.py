"""Two windowed stages on a stream, at the engine level (docs/semantics.md, 1.3): the
first stage advanced micro-batch by micro-batch (`Engine.advance`, its state pickled in
between), its output watermark after each batch the running maximum of min(its watermark, what
its state holds, `Engine.held`), and the second stage advanced on the first's panes of each
batch under that watermark, give the replay's panes of both stages.

Compared at the level where the two are defined equal: the replay runs with its processing-time
timers at the micro-batch instants (`timer_instants`: a stream fires a PERIOD or DELAY timer at
the first batch at or after its time, a replay at its exact time), and at every instant before
the end of the input (at its last instant a replay emits every pending pane; a stream does so
only once told the input ended)."""
import pickle

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, when_column
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF, POS_INF

from . import paper
from .strategies import D, durations, inputs, triggers
from .test_holds import HOLD, bounded_windows, read_as_emitted, stage_output_watermark
from tests.conftest import examples
from tests.two_stage_expected import stage2_panes

SETTINGS = settings(max_examples=examples(60))
MODES = st.sampled_from([ast.AccumulationMode.DISCARDING, ast.AccumulationMode.ACCUMULATING,
                         ast.AccumulationMode.ACCUMULATING_AND_RETRACTING])
#: stage 2's triggers: the watermark, early firings by processing time or count, late firings
stage2_triggers = st.one_of(
    st.none(),
    st.builds(lambda d: ast.WatermarkEarlyLate(early=ast.Period(d, D(0))), durations(1, 6)),
    st.builds(lambda n: ast.WatermarkEarlyLate(early=ast.Count(n), late=ast.Count(1)), st.integers(1, 3)),
)
COLUMNS = ["window_start", "window_end", "pane_index", "pane_timing", "is_last", "emit_time", "output_time",
           "is_retraction", "n", "total"]


def stage1_engine(window, trigger, mode, lateness):
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode))
    return Engine(EnginePlan(w, (Aggregate("sum", "v", "total"),), keys=("k",)))


def stage2_engine(size, trigger, lateness):
    w = ast.Windowing(ast.WindowClause(ast.Fixed(size, D(0))), trigger, ast.AllowedLateness(D(lateness)),
                      ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
    return Engine(EnginePlan(w, (Aggregate("sum", "n", "n"), Aggregate("sum", "total", "total")), keys=()))


def split(rows: pd.DataFrame, iwm: Timeline, cuts: list[int]):
    """The rows cut into micro-batches at instants `cuts` (each row in the first batch at or after
    its arrival, arriving then), and the watermark after each batch (the timeline's there)."""
    at = rows[ARRIVAL_TIME].to_numpy()
    batch_of = np.searchsorted(np.asarray(cuts), at)
    rows = rows.assign(**{ARRIVAL_TIME: np.asarray(cuts, np.int64)[batch_of]})
    marks = np.maximum.accumulate([iwm.at(c) for c in cuts]).tolist()
    return rows, batch_of, marks


def as_rows(panes: pd.DataFrame) -> list[tuple]:
    keep = [c for c in COLUMNS if c in panes]
    return [tuple(None if pd.isna(v) else v for v in r) for r in panes[keep].itertuples(index=False)]


def unmarked_changes_after_on_time(panes: pd.DataFrame) -> list[list[str]]:
    """The pane timings of every window whose ON_TIME pane is followed by one not marked LATE."""
    values = panes[~panes["is_retraction"].to_numpy(bool)]
    bad = []
    for _, timings in values.groupby("window_start")["pane_timing"]:
        timings = list(timings)
        if "ON_TIME" in timings and any(t != "LATE" for t in timings[timings.index("ON_TIME") + 1:]):
            bad.append(timings)
    return bad


def stream_and_replay(rows, iwm, cuts, one, two):
    """Both stages streamed over micro-batches at `cuts`, and replayed. Returns the input watermark
    and the stream's output watermark after each batch, stage 2's streamed panes, and (got, want):
    the stream's and the replay's output watermarks before the end of the input, both stages' rows
    emitted before it, and the windows changed after ON_TIME without LATE (none wanted)."""
    last = cuts[-1]
    rows, batch_of, marks = split(rows, iwm, cuts)
    timeline = Timeline.from_steps(cuts, marks)

    # the replay: stage 1 over the batches' arrivals, stage 2 over its rows under its output watermark
    replay1 = one.run(rows, timeline=timeline, replay=True, hold=HOLD, timer_instants=np.asarray(cuts)).panes
    ow = stage_output_watermark(replay1, timeline)
    replay2 = two.run(read_as_emitted(replay1), timeline=ow, replay=True, timer_instants=np.asarray(cuts)).panes

    # the stream: batch by batch, the states pickled in between; no batch ends the input
    state1 = state2 = None
    wm, out_wm = NEG_INF, NEG_INF
    got1, got2, marks2, watermarks = [], [], [], []
    for i, p in enumerate(cuts):
        res1, state1 = one.advance(state1, rows[batch_of == i], p=p, wm_prev=wm, wm_new=marks[i])
        wm = marks[i]
        state1 = pickle.loads(pickle.dumps(state1))
        new_out = max(out_wm, min(wm, one.held(state1)))
        res2, state2 = two.advance(state2, read_as_emitted(res1.panes), p=p, wm_prev=out_wm, wm_new=new_out)
        out_wm = new_out
        state2 = pickle.loads(pickle.dumps(state2))
        if p < last:  # the replay's output watermark, batch by batch
            watermarks.append((p, out_wm, ow.at(p)))
        got1.append(res1.panes)
        got2.append(res2.panes)
        marks2.append(out_wm)
    stream1 = pd.concat(got1, ignore_index=True)
    stream2 = pd.concat(got2, ignore_index=True)
    before = [as_rows(f[f["emit_time"].to_numpy() < last]) for f in (stream1, replay1, stream2, replay2)]
    got = ([(p, w) for p, w, _ in watermarks], before[0], before[2], unmarked_changes_after_on_time(stream2))
    want = ([(p, w) for p, _, w in watermarks], before[1], before[3], [])
    return marks, marks2, stream2, (got, want)


def test_a_merged_retraction_holds_the_second_stage_on_a_stream():
    """test_holds.py's timely merge, streamed in batches at 5, 10, 30, 50 and 60: stage 1's
    watermark 0, 20, 40, 100, 100; its output watermark 0, 20, 31 (the retraction of [0, 32),
    pending in [0, 55) since 10, holds it at 31 once W is 40), 100 ([0, 55) emitted at 50), 100.
    Stage 2 (FIXED 20 over output_time, the default trigger, ALLOWED LATENESS 100) gets +[0, 32)
    (output_time 31) at 5; at 30 its watermark 31 has not passed [20, 40); at 50 -[0, 32) (31)
    and +[0, 55) (54) arrive on time, then its watermark reaches 100: [20, 40) ON_TIME with n 0
    (the session left it) and [40, 60) ON_TIME with n 1, total 7. Were stage 2's watermark W
    itself, 40 at 30 would fire [20, 40) ON_TIME with n 1 there, and the retraction at 50 would
    change it in a LATE pane."""
    iwm = Timeline.from_steps([0, 10, 30, 50], [0, 20, 40, 100])
    rows = pd.DataFrame({"k": [0] * 3, "v": [1, 2, 4], EVENT_TIME: [0, 2, 25], ARRIVAL_TIME: [5, 5, 10],
                         "flag": [False] * 3})
    one = stage1_engine(ast.Sessions(D(30)), ast.WatermarkEarlyLate(early=ast.Count(2)),
                        ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, 0)
    two = stage2_engine(D(20), None, 100)
    cuts = [5, 10, 30, 50, 60]
    marks, marks2, panes, (got, want) = stream_and_replay(rows, iwm, cuts, one, two)
    assert got == want
    assert (marks, marks2) == ([0, 20, 40, 100, 100], [0, 20, 31, 100, 100])
    assert as_rows(panes) == [
        (20, 40, 0, "ON_TIME", False, 50, 39, False, 0, 0),
        (40, 60, 0, "ON_TIME", False, 50, 59, False, 1, 7),
    ]
    timed, _, _ = split(rows, iwm, cuts)
    stage1 = one.run(timed, timeline=Timeline.from_steps(cuts, marks), replay=True).panes
    by_w = two.run(read_as_emitted(stage1), timeline=Timeline.from_steps(cuts, marks), replay=True).panes
    assert as_rows(by_w[~by_w["is_retraction"]])[:2] == [(20, 40, 0, "ON_TIME", False, 30, 39, False, 1, 3),
                                                         (20, 40, 1, "LATE", False, 50, 39, False, 0, 0)]


def test_a_retraction_is_released_when_the_watermark_passes_its_pending_window():
    """Sessions of gap 30, TRIGGER REPEAT(COUNT 2) (no watermark firing), ALLOWED LATENESS 1000,
    retracting; W 0 @0, 20 @10, 60 @30, 100 @50; batches at 5, 10, 30, 40, 50. a@0 and a@2 (at 5)
    fire [0, 32) at 5. a@25 (at 10) makes [0, 55), pending: the retraction of [0, 32) holds at 31
    from 10. At 30 the watermark (60) passes 55 with the session still pending: the retraction
    is released (its input stopped being timely, docs/semantics.md 1.3), so the output watermark
    is 60, not 31, and stays released when a@50 (at 40) grows the session to [0, 80) and fires it
    with the retraction.
    Output watermark after each batch: 0, 20, 60, 60, 100."""
    iwm = Timeline.from_steps([0, 10, 30, 50], [0, 20, 60, 100])
    rows = pd.DataFrame({"k": [0] * 4, "v": [1, 2, 4, 8], EVENT_TIME: [0, 2, 25, 50], ARRIVAL_TIME: [5, 5, 10, 40],
                         "flag": [False] * 4})
    one = stage1_engine(ast.Sessions(D(30)), ast.Repeat(ast.Count(2)), ast.AccumulationMode.ACCUMULATING_AND_RETRACTING,
                        1000)
    marks, marks2, _, (got, want) = stream_and_replay(rows, iwm, [5, 10, 30, 40, 50], one, stage2_engine(D(20), None, 100))
    assert got == want
    assert (marks, marks2) == ([0, 20, 60, 60, 100], [0, 20, 60, 60, 100])


def test_the_paper_example_on_a_stream_gives_the_two_stage_replays_panes():
    """tests/spark/test_two_stage_replay.py's pipeline, streamed: stage 1 the paper's sessions
    (gap 1m, early every minute, late per instant, ALLOWED LATENESS 1h, retracting), stage 2
    COUNT and SUM of them per 2-minute window of output_time (early every minute, ALLOWED LATENESS
    1h, retracting). The micro-batches run at every arrival, every watermark step and every minute
    from 12:05 to 12:10, so the stream's PERIOD timers fire at their exact boundaries and its
    panes are the replay's exactly: the 15 stage-2 panes derived by hand in that test's doc, and
    the output watermark after each batch the one worked out there (12:02 from 12:06:05,
    12:03:23.999999 from 12:07:30, 12:06 from 12:07:40, 12:08:30 from 12:09:30)."""
    c = paper.clock
    rows, iwm = paper.inputs(), paper.heuristic_watermark()
    rows["flag"] = False
    minutes = [c(f"12:{m:02d}:00") for m in range(5, 11)]
    cuts = sorted(set(rows[ARRIVAL_TIME].tolist()) | set(iwm.times.tolist()) | set(minutes))
    one = stage1_engine(ast.Sessions(D(paper.MINUTE)), paper.EARLY_LATE,
                        ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, paper.HOUR)
    two = stage2_engine(D(2 * paper.MINUTE), ast.WatermarkEarlyLate(early=ast.Period(D(paper.MINUTE), D(0))),
                        paper.HOUR)
    _, marks2, panes, (got_all, want_all) = stream_and_replay(rows, iwm, cuts, one, two)
    assert got_all == want_all
    steps = [(p, m) for p, m, before in zip(cuts, marks2, [NEG_INF, *marks2]) if m != before]
    assert steps[:5] == [(c("12:06:05"), c("12:02:00")), (c("12:07:30"), c("12:03:24") - 1),
                         (c("12:07:40"), c("12:06:00")), (c("12:09:30"), c("12:08:30")), (c("12:10:00"), POS_INF)]
    T = c
    got = [(n, total, start, index, timing, retraction, emit)
           for start, _, index, timing, _, emit, _, retraction, n, total in as_rows(panes)]
    assert got == stage2_panes(T)


@SETTINGS
@given(inputs(max_rows=30), bounded_windows, triggers, MODES, st.sampled_from([0, 25, 1000]),
       durations(2, 12), stage2_triggers, st.sampled_from([0, 30]),
       st.lists(st.integers(0, 400), min_size=1, max_size=8))
def test_two_stages_on_a_stream_give_the_replays_panes(data, window, trigger, mode, lateness, size, trigger2,
                                                       lateness2, extra_cuts):
    got, want = streamed_and_replayed(data, window, trigger, mode, lateness, size, trigger2, lateness2, extra_cuts)
    assert got == want


def streamed_and_replayed(data, window, trigger, mode, lateness, size, trigger2, lateness2, extra_cuts):
    """(got, want) of `stream_and_replay` on drawn input, cut at the drawn instants and its last
    arrival; equal for input of another time domain or without rows (nothing to compare)."""
    rows, iwm = data
    if type(iwm) is not Timeline or not len(rows):  # ON PROCESSING TIME: another domain
        return None, None
    last = int(rows[ARRIVAL_TIME].max())
    cuts = sorted({c for c in extra_cuts if c < last} | {last})
    return stream_and_replay(rows, iwm, cuts, stage1_engine(window, trigger, mode, lateness),
                             stage2_engine(size, trigger2, lateness2))[3]


@SETTINGS
@given(inputs(max_rows=30), st.builds(ast.Sessions, durations(1, 8)), triggers, st.sampled_from([25, 1000]),
       durations(2, 12), stage2_triggers, st.lists(st.integers(0, 400), min_size=1, max_size=8))
def test_two_stages_over_retracting_sessions_on_a_stream(data, window, trigger, lateness, size, trigger2, cuts):
    """The same over retracting sessions, where the output watermark is not the input watermark."""
    got, want = streamed_and_replayed(data, window, trigger, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING,
                                      lateness, size, trigger2, 0, cuts)
    assert got == want


@st.composite
def growing_sessions(draw):
    """Sessions that grow while the watermark jumps: per key a chain of elements less than the gap
    (40) apart, arriving in order, so each extends the key's session and retracts its early pane;
    a watermark of random steps, which passes retracted ends while the sessions still grow."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    keys, per_key = int(rng.integers(1, 4)), int(rng.integers(2, 8))
    et = np.cumsum(rng.integers(5, 40, (keys, per_key)), axis=1) + rng.integers(0, 100, (keys, 1))
    at = et + rng.integers(0, 30, et.shape)
    at = np.maximum.accumulate(at, axis=1)
    rows = pd.DataFrame({"k": np.repeat(np.arange(keys), per_key), "v": rng.integers(1, 9, keys * per_key),
                         EVENT_TIME: et.ravel().astype(np.int64), ARRIVAL_TIME: at.ravel().astype(np.int64),
                         "flag": rng.random(keys * per_key) < 0.2})
    for i in range(6):  # WHEN(flag) in any part of a trigger tree
        rows[when_column(i)] = rows["flag"]
    n = int(rng.integers(2, 8))
    times = np.sort(rng.choice(np.arange(0, int(at.max()) + 60, 5), n, replace=False))
    values = np.sort(rng.integers(0, int(et.max()) + 40, n))
    return rows, Timeline.from_steps(times, values)


@SETTINGS
@given(growing_sessions(), st.one_of(st.builds(lambda n: ast.WatermarkEarlyLate(early=ast.Count(n)), st.integers(1, 3)),
                                     st.builds(lambda d: ast.WatermarkEarlyLate(early=ast.Period(d, D(0))),
                                               durations(1, 6)), triggers),
       st.sampled_from([0, 25, 1000]), durations(2, 12), stage2_triggers,
       st.lists(st.integers(50, 400), min_size=4, max_size=24))
def test_two_stages_over_growing_sessions_on_a_stream(data, trigger, lateness, size, trigger2, cuts):
    """The same over sessions that keep growing under a jumping watermark (their retractions hold
    the output watermark below the input watermark often)."""
    got, want = streamed_and_replayed(data, ast.Sessions(D(40)), trigger,
                                      ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, lateness, size, trigger2, 0, cuts)
    assert got == want
