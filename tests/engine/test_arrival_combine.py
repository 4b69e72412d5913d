"""Replayed rows combined per key, gap-aligned slice and arrival period (sqlflow/engine/arrival_combine.py)
give the panes and dropped rows of the single rows, by the per-key reference loop."""
import pandas as pd
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.arrival_combine import ChunkedCombine, arrival_grid, combine
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.holds import output_watermark
from sqlflow.engine.paths import REPLAY, path_for
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine

from .strategies import D, durations, inputs, output_times, schedule_triggers
from tests.conftest import examples

SETTINGS = settings(max_examples=examples(200))
AGGS = (Aggregate("count_star", None, "n"), Aggregate("count", "v", "nv"), Aggregate("sum", "v", "total"),
        Aggregate("min", "v", "lo"), Aggregate("max", "v", "hi"))
PARTS = (("p0", "count_star", None), ("p1", "count", "v"), ("p2", "sum", "v"), ("p3", "min", "v"),
         ("p4", "max", "v"))
#: the engine over the partials: COUNTs add up, SUM/MIN/MAX as before
LIFTED = (Aggregate("sum", "p0", "n"), Aggregate("sum", "p1", "nv"), Aggregate("sum", "p2", "total"),
          Aggregate("min", "p3", "lo"), Aggregate("max", "p4", "hi"))


def _windowing(gap, trigger, mode, lateness, fixed_offset=None, output=None):
    """Sessions of this gap, or (`fixed_offset` given) FIXED windows of this size and offset."""
    fn = ast.Sessions(D(gap)) if fixed_offset is None else ast.Fixed(D(gap), D(fixed_offset))
    return ast.Windowing(ast.WindowClause(fn), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode),
                         output=output)


def _dropped(result, rows):
    d = result.dropped
    picked = rows.iloc[d["row"].to_numpy()]
    return sorted(zip(picked["k"].tolist(), picked[EVENT_TIME].tolist(), picked[ARRIVAL_TIME].tolist(),
                      d["reason"].tolist(), d["window_start"].tolist(), d["window_end"].tolist()), key=repr)


@SETTINGS
@given(inputs(max_rows=60, nulls=True), durations(1, 8), schedule_triggers,
       st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]), st.booleans())
def test_combined_rows_give_the_reference_panes(data, gap, trigger, mode, lateness, missing_times):
    rows, tl = data
    rows = rows[["k", "v", EVENT_TIME, ARRIVAL_TIME]].copy()
    if missing_times and len(rows):  # rows without an event or arrival time stay single and are dropped
        rows[EVENT_TIME] = rows[EVENT_TIME].astype("Int64")
        rows[ARRIVAL_TIME] = rows[ARRIVAL_TIME].astype("Int64")
        rows.loc[rows.index[::7], EVENT_TIME] = pd.NA
        rows.loc[rows.index[3::11], ARRIVAL_TIME] = pd.NA
    windowing = _windowing(gap.micros, trigger, mode, lateness)
    grid = arrival_grid(windowing)
    assert grid is not None
    period, offset = grid
    p_end = int(rows[ARRIVAL_TIME].max()) if rows[ARRIVAL_TIME].notna().any() else 0
    p_end = max(p_end, tl.end)
    ref = Engine(EnginePlan(windowing, AGGS, keys=("k",))).run(rows, timeline=tl, replay=True, p_end=p_end,
                                                                 reference=True)
    elements = combine(rows, keys=("k",), gap=gap.micros, period=period, offset=offset, timeline=tl, parts=PARTS, weight="w")
    got = Engine(EnginePlan(windowing, LIFTED, keys=("k",))).run(elements, timeline=tl, replay=True, p_end=p_end)
    assert int(elements["w"].sum()) == len(rows)
    # COUNTs become SUMs of partial counts: their overflow flags (sqlflow/engine/exact.py) are extra, never set
    extra = [c for c in got.panes.columns if c not in ref.panes.columns]
    assert extra == [c for c in ("n__overflow", "nv__overflow") if c in got.panes.columns]
    assert not got.panes[extra].to_numpy().any()
    pd.testing.assert_frame_equal(got.panes[list(ref.panes.columns)], ref.panes, check_dtype=False)
    assert _dropped(got, elements) == _dropped(ref, rows)


def _grid(trigger, **emit):
    return arrival_grid(ast.Windowing(ast.WindowClause(ast.Sessions(D(60))), trigger,
                                      emit=ast.Emit(ast.AccumulationMode.ACCUMULATING, **emit)))


def test_arrival_grid_follows_the_trigger():
    W = ast.Watermark()
    assert _grid(ast.WatermarkEarlyLate(early=ast.Period(D(60)))) == (60, 0)
    assert _grid(ast.WatermarkEarlyLate(early=ast.Period(D(60), D(25)))) == (60, 25)
    assert _grid(ast.Repeat(W)) == (60_000_000, 0)  # watermark triggers only: any grid, whole minutes
    assert _grid(ast.Repeat(ast.Count(2))) is None
    assert _grid(ast.WatermarkEarlyLate(early=ast.Delay(D(60)))) is None
    assert _grid(ast.Repeat(W), on_time_always=True) is None  # emits without new input


def test_a_partial_sum_that_could_overflow_keeps_the_rows_single():
    from sqlflow.engine.watermarks import bounded_delay
    rows = pd.DataFrame({"k": [1, 1, 1], "v": [2**62, 2**62, -(2**62)], EVENT_TIME: [0, 1, 2],
                         ARRIVAL_TIME: [1, 2, 3]})  # one arrival period (0, 10]
    out = combine(rows, keys=("k",), gap=10, period=10, timeline=bounded_delay(rows[ARRIVAL_TIME], rows[EVENT_TIME], 5),
                  parts=(("s", "sum", "v"),), weight="w")
    assert out["w"].tolist() == [1, 1, 1] and out["s"].tolist() == [2**62, 2**62, -(2**62)]
    small = rows.assign(v=[1, 2, 3])
    out = combine(small, keys=("k",), gap=10, period=10, timeline=bounded_delay(rows[ARRIVAL_TIME], rows[EVENT_TIME], 5),
                  parts=(("s", "sum", "v"),), weight="w")
    assert out["w"].tolist() == [3, 0] and out["s"].fillna(-1).tolist() == [6, -1]  # the neutral element: NULL


@SETTINGS
@given(inputs(max_rows=60, nulls=True), durations(1, 8), schedule_triggers,
       st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]),
       st.lists(st.integers(0, 60), max_size=6), st.booleans(), st.booleans(), st.none() | st.integers(0, 7),
       output_times)
def test_a_bucket_combined_in_chunks_gives_the_reference_panes(data, gap, trigger, mode, lateness, cuts, big,
                                                               missing_times, fixed_offset, output):
    """A bucket read in chunks (udfs/bucket.py, a hot key): each chunk's groups merge into the
    earlier ones' and its single rows are kept; the panes and drops are those of the single rows
    by the per-key loop, sessions merging and retracting included, and of FIXED windows (with an
    offset: a window is its own slice). With `big` values a partial SUM could overflow from some
    chunk on: its rows and the later ones stay single."""
    rows, tl = data
    rows = rows[["k", "v", EVENT_TIME, ARRIVAL_TIME]].reset_index(drop=True)
    if big and len(rows):
        rows["v"] = rows["v"].astype("Int64") * (2**58)
    if missing_times and len(rows) > 3:  # in some chunks only: their time columns are nullable there
        rows[EVENT_TIME] = rows[EVENT_TIME].astype("Int64")
        rows.loc[rows.index[3::11], EVENT_TIME] = pd.NA
    windowing = _windowing(gap.micros, trigger, mode, lateness, fixed_offset, output)
    assume(path_for(EnginePlan(windowing, AGGS, keys=("k",)), input=REPLAY, operator="combine",
                    types={"k": "bigint", "v": "bigint"}).name == "combined")
    period, offset = arrival_grid(windowing)
    slices = {"gap": gap.micros, "slice_offset": 0 if fixed_offset is None else fixed_offset % gap.micros}
    p_end = max(int(rows[ARRIVAL_TIME].max()) if len(rows) else 0, tl.end)
    hold = ("hold_since", "hold_until")  # the holds a later stage's output watermark reads (sqlflow.engine.holds)
    ref = Engine(EnginePlan(windowing, AGGS, keys=("k",))).run(rows, timeline=tl, replay=True, p_end=p_end,
                                                                 reference=True, hold=hold)
    assert set(hold) <= set(ref.panes.columns)
    chunked = ChunkedCombine(keys=("k",), period=period, offset=offset, timeline=tl, parts=PARTS, **slices)
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    for lo, hi in zip(bounds, bounds[1:]):
        chunked.add(rows.iloc[lo:hi].reset_index(drop=True))
    if not len(rows):
        chunked.add(rows)
    elements = chunked.elements("w")
    assert int(elements["w"].sum()) == len(rows)
    if len(bounds) > 2 and not big:  # the rows of a key, slice and period in different chunks are one group
        whole = combine(rows, keys=("k",), period=period, offset=offset, timeline=tl, parts=PARTS, weight="w",
                        **slices)
        assert len(elements) == len(whole)
    got = Engine(EnginePlan(windowing, LIFTED, keys=("k",))).run(elements, timeline=tl, replay=True, p_end=p_end,
                                                                   hold=hold)
    panes = [c for c in ref.panes.columns if c not in hold]
    pd.testing.assert_frame_equal(got.panes[panes], ref.panes[panes], check_dtype=False)
    # the holds themselves can differ within an arrival period (a group merges sessions at its
    # first arrival, a row of it may do so later), never the output watermark a later stage reads
    assert _output_watermark(got.panes, tl, p_end) == _output_watermark(ref.panes, tl, p_end)
    assert _dropped(got, elements) == _dropped(ref, rows)


def _output_watermark(panes, timeline, p_end):
    """The output watermark of a stage's panes (as sqlflow/plan/pipelines.py reads it)."""
    held = panes[panes["hold_since"].notna()]
    until = held["hold_until"].fillna(held["emit_time"])
    return output_watermark(timeline, since=held["hold_since"].to_numpy("int64"), until=until.to_numpy("int64"),
                            value=held["output_time"].to_numpy("int64"), end=p_end).steps()


def test_a_group_merging_sessions_at_its_first_arrival_holds_earlier_but_the_output_watermark_is_the_same():
    """Sessions of 60: the pane of [64, 124) is out at 100; at 145 a row at 170 arrives, at 150 one
    at 121 joins both sessions. The two rows are one group (slice [120, 180), period (140, 150]),
    arriving at 145: the retraction of [64, 124) is held from 145, where the single rows hold it
    from 150 (its emission: not at all). END OF WINDOW and START OF WINDOW hold the merged pane
    from 145 at or below it: the output watermark is the same. Under EARLIEST and LATEST the merged
    pane's output time (121, 170) is above the retraction's (64): the watermark rising to 100 at 147
    is held at 64 until 150, so such sessions do not combine (sqlflow/engine/arrival_combine.py)."""
    from sqlflow.engine.watermarks import Timeline

    rows = pd.DataFrame({"k": [1, 1, 1], "v": [1, 2, 3], EVENT_TIME: [64, 170, 121], ARRIVAL_TIME: [100, 145, 150]})
    steps = Timeline.from_steps([100, 147], [0, 100])
    tl = Timeline(steps.times, steps.values, 300)
    hold = ("hold_since", "hold_until")
    for output in [None, *map(ast.OutputTimestamp, ast.OutputTime)]:
        windowing = _windowing(60, ast.WatermarkEarlyLate(early=ast.Period(D(10))),
                               ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, 0, output=output)
        ref = Engine(EnginePlan(windowing, AGGS, keys=("k",))).run(rows, timeline=tl, replay=True, p_end=300,
                                                                     reference=True, hold=hold).panes
        chunked = ChunkedCombine(keys=("k",), period=10, offset=0, timeline=tl, parts=PARTS, gap=60, slice_offset=0)
        chunked.add(rows)
        got = Engine(EnginePlan(windowing, LIFTED, keys=("k",))).run(chunked.elements("w"), timeline=tl, replay=True,
                                                                       p_end=300, hold=hold).panes
        assert got["n"].tolist() == ref["n"].tolist() == [1, 1, 3]
        assert got["is_retraction"].tolist() == [False, True, False]
        assert ref["hold_since"].tolist()[1:] == [pd.NA, 145] and got["hold_since"].tolist()[1:] == [145, 145]
        policy = windowing.output_time
        path = path_for(EnginePlan(windowing, AGGS, keys=("k",)), input=REPLAY, operator="combine",
                        types={"k": "bigint", "v": "bigint"})
        assert path.name == ("rows" if policy.of_elements else "combined")
        held, free = [(100, 0), (147, 64), (150, 100)], [(100, 0), (147, 100)]  # held at 64 in [147, 150)
        start = policy is ast.OutputTime.START_OF_WINDOW  # the merged pane holds at its start, 64
        assert _output_watermark(ref, tl, 300) == (held if start else free)
        assert _output_watermark(got, tl, 300) == (held if start or policy.of_elements else free)
