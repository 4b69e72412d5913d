"""Watermark holds and output watermarks across stages (docs/semantics.md, 1.3; sqlflow/engine/holds.py)."""
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.holds import output_watermark
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF, POS_INF

from . import paper
from .paper import clock
from .strategies import D, durations, inputs, output_times, schedule_triggers, triggers
from tests.conftest import examples

HOLD = ("hold_since", "hold_until")
SINCE, UNTIL = HOLD
US = 1
# kept small: each example runs two engines (CI time)
SETTINGS = settings(max_examples=examples(60))


def direct_output_watermark(iwm: Timeline, since, until, value) -> list[tuple[int, int]]:
    """The definition, one instant at a time: running max of min(W(q), holds active at q)."""
    points = sorted(set(iwm.times.tolist()) | set(since) | set(until))
    best, steps = NEG_INF, []
    for q in points:
        held = [v for s, u, v in zip(since, until, value) if s <= q < u]
        mark = min([iwm.at(q)] + held)
        if mark > best:
            best = mark
            steps.append((q, mark))
    return steps


@settings(max_examples=examples(200))
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 60)), min_size=1, max_size=6, unique_by=lambda x: x[0]),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(0, 60)), max_size=12))
def test_output_watermark_is_its_definition(steps, holds):
    steps = sorted(steps)
    iwm = Timeline.from_steps([t for t, _ in steps], np.maximum.accumulate([w for _, w in steps]))
    since = [s for s, _, _ in holds]
    until = [s + d for s, d, _ in holds]
    value = [v for _, _, v in holds]
    got = output_watermark(iwm, since=since, until=until, value=value)
    assert got.steps() == direct_output_watermark(iwm, since, until, value)


def stage1(window, trigger, mode, lateness, output=None):
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode),
                      output=output)
    return Engine(EnginePlan(w, (Aggregate("sum", "v", "total"),), keys=("k",)))


def read_as_emitted(panes: pd.DataFrame) -> pd.DataFrame:
    """Stage 1's rows as stage 2's input: arriving at emit_time, event time output_time, +1 or -1."""
    sign = np.where(panes["is_retraction"].to_numpy(bool), -1, 1) if "is_retraction" in panes else 1
    return pd.DataFrame({
        EVENT_TIME: panes["output_time"].astype("Int64"),
        ARRIVAL_TIME: panes["emit_time"].astype("Int64"),
        "n": pd.array(np.broadcast_to(sign, len(panes)), dtype="Int64"),
        "total": pd.array(panes["total"].to_numpy(), dtype="Int64") * np.broadcast_to(sign, len(panes)),
    })


def stage_output_watermark(panes: pd.DataFrame, iwm: Timeline) -> Timeline:
    held = panes[SINCE].notna().to_numpy()
    p = panes[held]
    return output_watermark(iwm, since=p[SINCE].to_numpy(np.int64), until=p[UNTIL].to_numpy(np.int64),
                            value=p["output_time"].to_numpy(np.int64))


def test_the_paper_example_output_watermark():
    """Figure 14's sessions (early every minute, late per instant, retracting): the holds and the
    output watermark worked out in tests/spark/test_two_stage_replay.py's module doc."""
    plain = paper.run(ast.Sessions(D(60_000_000)), paper.EARLY_LATE, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING,
                      replay=True, timeline=paper.heuristic_watermark()).panes
    assert SINCE not in plain  # only when asked for
    engine = stage1(ast.Sessions(D(60_000_000)), paper.EARLY_LATE, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING,
                    3_600_000_000)
    panes = engine.run(paper.inputs(), timeline=paper.heuristic_watermark(), replay=True, hold=HOLD).panes
    held = [(None if pd.isna(h) else int(h), int(e), int(o), bool(r))
            for h, e, o, r in zip(panes[SINCE], panes["emit_time"], panes["output_time"], panes["is_retraction"])]
    c = clock
    assert held == [
        (c("12:05:19"), c("12:06:00"), c("12:01:26") - US, False),   # P1 {e1}
        (c("12:05:39"), c("12:06:00"), c("12:03:24") - US, False),   # P2 {e2}
        (c("12:06:13"), c("12:07:00"), c("12:05:19") - US, False),   # P3 {e3, e4, e5}
        (c("12:07:06"), c("12:07:40"), c("12:03:24") - US, True),    # -P2, held with P4 (e6)
        (c("12:07:06"), c("12:07:40"), c("12:05:19") - US, True),    # -P3
        (c("12:07:06"), c("12:07:40"), c("12:05:19") - US, False),   # P4 ON_TIME
        (c("12:07:19"), c("12:08:00"), c("12:07:39") - US, False),   # P5 {e7}
        (None, c("12:08:19"), c("12:01:26") - US, True),             # -P1: e8 is late, nothing held
        (None, c("12:08:19"), c("12:05:19") - US, True),             # -P4
        (None, c("12:08:19"), c("12:05:19") - US, False),            # P6 LATE
        (c("12:08:39"), c("12:09:00"), c("12:07:39") - US, True),    # -P5, held with P7 (e9, e10)
        (c("12:08:39"), c("12:09:00"), c("12:08:46") - US, False),   # P7
    ]
    ow = stage_output_watermark(panes, paper.heuristic_watermark())
    assert ow.steps() == [(c("12:06:05"), c("12:02:00")), (c("12:07:30"), c("12:03:24") - US),
                          (c("12:07:40"), c("12:06:00")), (c("12:09:30"), c("12:08:30")), (c("12:10:00"), POS_INF)]


windows1 = st.one_of(
    st.builds(ast.Fixed, durations(5, 15), st.just(D(0))),
    st.builds(lambda s, k: ast.Sliding(D(s.micros * k), s), durations(3, 8), st.integers(1, 3)),
    st.builds(ast.Sessions, durations(1, 8)),
)


@SETTINGS
@given(inputs(), windows1, triggers, st.sampled_from([ast.AccumulationMode.DISCARDING,
                                                      ast.AccumulationMode.ACCUMULATING_AND_RETRACTING]),
       st.sampled_from([0, 25, 1000]), output_times, durations(2, 12), schedule_triggers, st.sampled_from([0, 30]))
def test_two_stage_pipelines(data, window, trigger, mode, lateness, output, size, trigger2, lateness2):
    """Random two-stage replays: stage 2 counts stage 1's rows (signed) per fixed window of their
    output_time under stage 1's output watermark.

    - a stage-1 pane that is not LATE is never behind stage 2's watermark when it arrives (with
      OUTPUT TIMESTAMP START OF WINDOW it can be: docs/semantics.md, 1.3);
    - no stage-2 window changes after its ON_TIME pane except in panes marked LATE;
    - with DISCARDING stage 2 and unbounded lateness nothing is lost: per window, its panes add up
      to the signed rows of stage 1 whose output_time falls in it."""
    rows, iwm = data
    panes = stage1(window, trigger, mode, lateness, output).run(rows, timeline=iwm, replay=True, hold=HOLD).panes
    ow = stage_output_watermark(panes, iwm)
    policy = output.policy if output is not None else ast.OutputTime.END_OF_WINDOW
    if policy is not ast.OutputTime.START_OF_WINDOW and len(panes):
        fresh = panes[~panes.get("is_retraction", pd.Series(False, index=panes.index)).to_numpy(bool)
                      & (panes["pane_timing"] != "LATE").to_numpy()]
        before = ow.before_many(fresh["emit_time"].to_numpy(np.int64))
        assert (fresh["output_time"].to_numpy(np.int64) >= before).all()
    down = read_as_emitted(panes)
    for mode2, late2 in ((ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, lateness2),
                         (ast.AccumulationMode.DISCARDING, None)):
        lateness_clause = ast.AllowedLateness(D(late2) if late2 is not None else ast.Unbounded())
        w2 = ast.Windowing(ast.WindowClause(ast.Fixed(size, D(0))), trigger2, lateness_clause, ast.Emit(mode2))
        plan2 = EnginePlan(w2, (Aggregate("sum", "n", "n"), Aggregate("sum", "total", "total")), keys=())
        out = Engine(plan2).run(down, timeline=ow, replay=True).panes
        values = out[~out["is_retraction"]] if "is_retraction" in out else out
        after_on_time = values.groupby("window_start")["pane_timing"].agg(list)
        for timings in after_on_time:
            if "ON_TIME" in timings:
                assert all(t == "LATE" for t in timings[timings.index("ON_TIME") + 1:]), timings
        if mode2 is ast.AccumulationMode.DISCARDING:
            kept = down.dropna(subset=[EVENT_TIME])
            start = kept[EVENT_TIME].to_numpy(np.int64) // size.micros * size.micros
            expected = kept.assign(w=start).groupby("w")["n"].sum()
            got = values.groupby("window_start")["n"].sum()
            assert {int(k): int(v) for k, v in expected.items() if v} == {int(k): int(v) for k, v in got.items() if v}


def output_watermark_from_prefix(engine, rows: pd.DataFrame, iwm: Timeline, q: int) -> int:
    """The stage's output watermark at instant q as an operator that has seen only the input
    arrived by q computes it: the holds of what it would emit were its input to end just after
    q (each pending pane held at the output_time it would carry now)."""
    arrived = rows[rows[ARRIVAL_TIME].to_numpy() <= q]
    known = iwm.times <= q
    steps = Timeline.from_steps(iwm.times[known], iwm.values[known])
    panes = engine.run(arrived, timeline=steps, replay=True, hold=HOLD, p_end=q + 1).panes
    return stage_output_watermark(panes, steps).at(q)


#: every window kind with an end (END OF WINDOW is an error on GLOBAL)
bounded_windows = st.one_of(
    windows1,
    st.builds(lambda s, k: ast.Cumulate(s, D(s.micros * k)), durations(3, 6), st.integers(1, 3)),
)
modes = st.sampled_from([ast.AccumulationMode.DISCARDING, ast.AccumulationMode.ACCUMULATING,
                         ast.AccumulationMode.ACCUMULATING_AND_RETRACTING])


def instants_of(rows: pd.DataFrame, iwm: Timeline, panes: pd.DataFrame) -> list[int]:
    """Every instant at which the stage's input, watermark or output changes."""
    return sorted(set(rows[ARRIVAL_TIME].tolist()) | set(iwm.times.tolist()) | set(panes["emit_time"].tolist())
                  | set(panes[UNTIL].dropna().tolist()))


@SETTINGS
@given(inputs(), bounded_windows, triggers, modes, st.sampled_from([0, 25, 1000]))
def test_end_of_window_holds_nothing_below_the_watermark_but_merged_retractions(data, window, trigger, mode,
                                                                                lateness):
    """With OUTPUT TIMESTAMP END OF WINDOW (the default) the output watermark is the input
    watermark (docs/semantics.md, 1.3), except for the retractions of panes of sessions merged
    into a bigger one: a pane's own hold is its window's end - 1us, and it holds only while one of
    its elements is timely, i.e. while the watermark has not passed the end of the window it is
    pending in; a retraction of a window that does not merge carries that same end and is released
    when the watermark passes it. So over FIXED, SLIDING and CUMULATE windows, and over sessions
    without retractions, a stream passes W on as it is."""
    rows, iwm = data
    if type(iwm) is not Timeline:  # ON PROCESSING TIME: a clock, not steps
        return
    panes = stage1(window, trigger, mode, lateness).run(rows, timeline=iwm, replay=True, hold=HOLD).panes
    ow = stage_output_watermark(panes, iwm)
    instants = instants_of(rows, iwm, panes)
    if isinstance(window, ast.Sessions) and mode.retracting:
        # the panes' own holds never matter: the retractions alone give the same output watermark
        retractions = panes[panes["is_retraction"].to_numpy(bool)]
        assert [ow.at(q) for q in instants] == [stage_output_watermark(retractions, iwm).at(q) for q in instants]
    else:
        assert [ow.at(q) for q in instants] == [iwm.at(q) for q in instants]


@SETTINGS
@given(inputs(max_rows=25), bounded_windows, triggers, modes, st.sampled_from([0, 25, 1000]), st.randoms())
def test_end_of_window_output_watermark_is_known_online(data, window, trigger, mode, lateness, rnd):
    """With END OF WINDOW the output watermark at every instant is what an operator that has seen
    only the input arrived by then computes (`output_watermark_from_prefix`): every hold that
    can be below the watermark is a retraction, held from the instant it became certain at a
    value known then (docs/semantics.md, 1.3). So a stream can give the replay's output
    watermark batch by batch, for every window kind, trigger, lateness and mode. (A sample of
    the instants of each case: each costs a run of the prefix.)"""
    online, replayed = online_and_replayed(data, window, trigger, mode, lateness, rnd)
    assert online == replayed


def online_and_replayed(data, window, trigger, mode, lateness, rnd) -> tuple[list, list]:
    """At a sample of instants before the end of the input: the output watermark an operator that
    has seen only the input arrived by then computes, and the replay's, as (instant, value) lists."""
    rows, iwm = data
    if type(iwm) is not Timeline:
        return [], []
    engine = stage1(window, trigger, mode, lateness)
    panes = engine.run(rows, timeline=iwm, replay=True, hold=HOLD).panes
    ow = stage_output_watermark(panes, iwm)
    # before the end of the input: at its last instant the replay emits every pending pane, which
    # an operator does only once told that the input ended (a stream's finish)
    end = max(iwm.last_time, int(rows[ARRIVAL_TIME].max()) if len(rows) else iwm.last_time)
    instants = [q for q in instants_of(rows, iwm, panes) if q < end]
    below = [q for q in instants if ow.at(q) != iwm.at(q)]  # where a retraction holds it: all of them
    others = sorted(set(instants) - set(below))
    sample = sorted(below[:8] + rnd.sample(others, min(4, len(others))))
    return ([(q, output_watermark_from_prefix(engine, rows, iwm, q)) for q in sample],
            [(q, ow.at(q)) for q in sample])


@settings(max_examples=examples(40))
@given(inputs(max_rows=25), st.builds(ast.Sessions, durations(1, 8)), triggers, st.sampled_from([0, 25, 1000]),
       st.randoms())
def test_merged_retractions_output_watermark_is_known_online(data, window, trigger, lateness, rnd):
    """The same over retracting sessions, the one shape where OW differs from W."""
    online, replayed = online_and_replayed(data, window, trigger, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING,
                                           lateness, rnd)
    assert online == replayed


def test_a_late_merge_holds_its_retraction_from_the_merge():
    """Sessions of gap 30, END OF WINDOW, ALLOWED LATENESS 100, retracting; W 0 @0, 40 @10,
    60 @30, 100 @50. a@0 (at 5) is emitted ON_TIME at 10 as [0, 30), output_time 29, held from
    5 to 10. a@50 (at 20, timely: 50 >= W 40) opens [50, 80), pending, held from 20. a@25
    arrives late at 40 (W 60) and bridges them: the pane at 50 ([0, 80), LATE: W 100 >= 80)
    retracts [0, 30). That retraction is certain only from 40, the arrival of the element that
    merged [0, 30) into the pending pane, so it is held from 40 (not from 20, the pending pane's
    start: docs/semantics.md, 1.3), at 29, until 50; W 60 had not passed [0, 80)'s end, so it is
    not released before. OW: 0 @0; min(40, 79) = 40 @10; min(60, 79) = 60 @30; at 40 the hold
    of 29 begins behind the 60 already reached, which does not move back; 100 @50, once every
    hold is released. An operator that has seen the input to 30 computes the same 60 at 30."""
    iwm = Timeline.from_steps([0, 10, 30, 50], [0, 40, 60, 100])
    engine = stage1(ast.Sessions(D(30)), None, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, 100)
    rows = pd.DataFrame({"k": [0] * 3, "v": [1, 2, 4], EVENT_TIME: [0, 50, 25], ARRIVAL_TIME: [5, 20, 40]})
    panes = engine.run(rows, timeline=iwm, replay=True, hold=HOLD).panes
    assert panes[["window_start", "window_end", "emit_time", "output_time", "pane_timing", "is_retraction", SINCE,
                  UNTIL]].values.tolist() == [[0, 30, 10, 29, "ON_TIME", False, 5, 10],
                                              [0, 30, 50, 29, "ON_TIME", True, 40, 50],
                                              [0, 80, 50, 79, "LATE", False, 20, 50]]
    replayed = stage_output_watermark(panes, iwm)
    assert replayed.steps() == [(0, 0), (10, 40), (30, 60), (50, 100)]
    assert [output_watermark_from_prefix(engine, rows, iwm, q) for q in (10, 20, 30, 40)] == [40, 40, 60, 60]


def test_a_timely_merge_holds_its_retraction_below_the_watermark():
    """Why a retraction is held at all, and why OW is not W over sessions: gap 30, END OF
    WINDOW, retracting, TRIGGER WATERMARK EARLY COUNT 2; W 0 @0, 20 @10, 40 @30, 100 @50.
    The retraction the pending session will emit is held from the merge at its old output time,
    which the watermark passes before the session's end: OW stays below W until it is emitted,
    so the retraction is on time downstream (31 >= OW before 50), which it would not be were OW
    W (40 from 30 on). An operator knows the hold at each instant: the prefix's OW is the same."""
    iwm = Timeline.from_steps([0, 10, 30, 50], [0, 20, 40, 100])
    trigger = ast.WatermarkEarlyLate(early=ast.Count(2))
    engine = stage1(ast.Sessions(D(30)), trigger, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, 0)
    rows = pd.DataFrame({"k": [0] * 3, "v": [1, 2, 4], EVENT_TIME: [0, 2, 25], ARRIVAL_TIME: [5, 5, 10]})
    panes = engine.run(rows, timeline=iwm, replay=True, hold=HOLD).panes
    # a@0 and a@2 (both at 5) fire [0, 32) EARLY at 5 (COUNT 2), output_time 31, held from 5 to 5:
    # nothing. a@25 (at 10) extends it to [0, 55), pending (a fresh COUNT 2 has 1): its
    # retraction of [0, 32) (31) held from 10; the pane (54) held from 10 as well
    assert panes[["window_start", "window_end", "emit_time", "output_time", "pane_timing", "is_retraction", SINCE,
                  UNTIL]].astype(object).where(panes.notna(), None).values.tolist() == [
        [0, 32, 5, 31, "EARLY", False, None, None],
        [0, 32, 50, 31, "EARLY", True, 10, 50],
        [0, 55, 50, 54, "ON_TIME", False, 10, 50]]
    replayed = stage_output_watermark(panes, iwm)
    # OW: 0 @0; 20 @10; min(40, 31, 54) = 31 @30; 100 @50
    assert replayed.steps() == [(0, 0), (10, 20), (30, 31), (50, 100)]
    assert [output_watermark_from_prefix(engine, rows, iwm, q) for q in (10, 30, 40)] == [20, 31, 31]


def test_a_latest_hold_depends_on_later_input():
    """With OUTPUT TIMESTAMP LATEST a pending pane's hold grows with every later element, and the
    output watermark before an arrival depends on it: FIXED(SIZE 100), W 0 @0, 50 @20, 200 @40;
    a@10 arrives at 10, held from then. Alone, its pane (emitted at 40) holds 10, so OW is 10 at
    20; with b@60 arriving at 30 the pane carries 60, and OW is 50 at 20, which no operator can
    know at 20. So a stream cannot give the replay's output watermark for LATEST (nor for
    START OF WINDOW, below, or EARLIEST, where a random search found cases with WHEN triggers)."""
    iwm = Timeline.from_steps([0, 20, 40], [0, 50, 200])
    engine = stage1(ast.Fixed(D(100), D(0)), None, ast.AccumulationMode.DISCARDING, 0,
                    ast.OutputTimestamp(ast.OutputTime.LATEST))
    rows = pd.DataFrame({"k": [0, 0], "v": [1, 2], EVENT_TIME: [10, 60], ARRIVAL_TIME: [10, 30]})
    alone = stage_output_watermark(engine.run(rows.iloc[:1], timeline=iwm, replay=True, hold=HOLD).panes, iwm)
    both = stage_output_watermark(engine.run(rows, timeline=iwm, replay=True, hold=HOLD).panes, iwm)
    assert (alone.steps(), both.steps()) == ([(0, 0), (20, 10), (40, 200)], [(0, 0), (20, 50), (40, 200)])
    assert output_watermark_from_prefix(engine, rows, iwm, 20) == 10 != both.at(20)


def test_a_start_of_window_hold_depends_on_later_input():
    """With OUTPUT TIMESTAMP START OF WINDOW a merge lowers a pending session's start: sessions of
    gap 100, EARLY after 2 elements, W 0 @0, 90 @20, 1000 @40. a@0 (at 3) and a@10 (at 5) fire
    [0, 110) EARLY at 5; a@130 (at 10) opens [130, 230), pending, held from 10. a@100 (at 30)
    bridges them: the pane at 30 is [0, 230) with output_time 0, so the replay holds OW at 0 from
    10 on and it reaches 90 only at 30, where an operator at 20 knew only the hold of 130."""
    iwm = Timeline.from_steps([0, 20, 40], [0, 90, 1000])
    engine = stage1(ast.Sessions(D(100)), ast.WatermarkEarlyLate(early=ast.Count(2)),
                    ast.AccumulationMode.DISCARDING, 0, ast.OutputTimestamp(ast.OutputTime.START_OF_WINDOW))
    rows = pd.DataFrame({"k": [0] * 4, "v": [1, 2, 4, 8], EVENT_TIME: [0, 10, 130, 100], ARRIVAL_TIME: [3, 5, 10, 30]})
    panes = engine.run(rows, timeline=iwm, replay=True, hold=HOLD).panes
    assert panes[["window_start", "window_end", "emit_time", "output_time", SINCE, UNTIL]].values.tolist() == [
        [0, 110, 5, 0, 3, 5], [0, 230, 30, 0, 10, 30]]
    replayed = stage_output_watermark(panes, iwm)
    assert replayed.steps() == [(0, 0), (30, 90), (40, 1000)]
    assert output_watermark_from_prefix(engine, rows, iwm, 20) == 90 != replayed.at(20)
