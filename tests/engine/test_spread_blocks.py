"""A windowed SELECT without GROUP BY keys spread over buckets by blocks of event time
(`sqlflow.engine.windows.spread_blocks`, sqlflow/spark/engine_path.py) gives the panes, holds,
final marks, dropped rows and metrics of the one bucket holding every row: each bucket runs the
engine as a bucket job does (`udfs.bucket.BucketJob._run`), with the global watermark and, in a
replay, the global end of input."""
import numpy as np
import pandas as pd
from hypothesis import example, given
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, FINAL, HOLD_SINCE, HOLD_UNTIL
from sqlflow.engine.watermarks import Timeline
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.windows import spread_blocks

from .strategies import D, drawn_input, durations, inputs, output_times, triggers
from .test_properties import SETTINGS

AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"))

spreadable = st.one_of(
    st.builds(ast.Fixed, durations(5, 15), st.integers(0, 40).map(D)),
    st.builds(lambda s, k, o: ast.Cumulate(s, D(s.micros * k), D(o)), durations(3, 6), st.integers(1, 3),
              st.integers(0, 40)),
)


def run(plan, rows, tl, replay, p_end):
    final = FINAL if plan.windowing.mode.retracting else None
    return Engine(plan).run(rows.reset_index(drop=True), timeline=tl, replay=replay, p_end=p_end, ordered=False,
                            final=final, hold=(HOLD_SINCE, HOLD_UNTIL) if replay else None)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


@SETTINGS
@example(drawn_input(40, 3194, "steps"), ast.Fixed(D(50), D(21)), ast.WatermarkEarlyLate(None, ast.Delay(D(10))),
         ast.AccumulationMode.DISCARDING, 25, True, None, 2)
@given(inputs(), spreadable, triggers, st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]),
       st.booleans(), output_times, st.integers(2, 4))
def test_blocks_over_buckets_equal_one_bucket(data, window, trigger, mode, lateness, replay, output, n):
    rows, tl = data
    rows = rows.drop(columns=["k"])  # no GROUP BY keys: every row is one key
    windowing = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode),
                              output=output)
    plan = EnginePlan(windowing, AGGS, keys=())
    # as a replay's bucket jobs get it: the end of the whole input (`timeline.replay`)
    p_end = max(int(rows[ARRIVAL_TIME].max()) if len(rows) else tl.last_time, tl.last_time) if replay else None
    whole = run(plan, rows, tl, replay, p_end)
    blocks = spread_blocks(windowing, replay=replay)
    if blocks is None:  # the one reason FIXED and CUMULATE windows are not spread (the test below)
        assert replay and plan.uses_processing_time
        return
    size, offset = blocks
    block = (rows[EVENT_TIME].to_numpy(np.int64) - offset) // size
    bucket = block % n
    panes, dropped, metrics = [], [], {}
    for b in range(n):
        mine = rows[bucket == b]
        if not len(mine):
            continue
        got = run(plan, mine, tl, replay, p_end)
        panes.append(got.panes)
        # dropped rows name their row within the bucket: name it within the whole input instead
        dropped.append(got.dropped.assign(row=mine.index.to_numpy()[got.dropped["row"].to_numpy(np.int64)]))
        for name, value in got.metrics.items():
            metrics[name] = metrics.get(name, 0) + value
    spread = pd.concat(panes, ignore_index=True) if panes else whole.panes.iloc[:0]
    pd.testing.assert_frame_equal(ordered(spread.astype(whole.panes.dtypes)), ordered(whole.panes))
    gone = pd.concat(dropped, ignore_index=True) if dropped else whole.dropped.iloc[:0]
    pd.testing.assert_frame_equal(ordered(gone.astype(whole.dropped.dtypes)), ordered(whole.dropped))
    assert metrics == (whole.metrics if len(rows) else {})  # the counters add up over buckets


def test_a_replay_with_timers_ends_each_window_after_the_last_timer_of_any():
    """The end of input comes after the key's last processing-time timer, which may be another
    window's (docs/semantics.md, 1.2): [50, 100)'s pane waits for [0, 50)'s late DELAY timer at
    110, although its own rows ended at 100. A bucket holding only [50, 100)'s rows would end it
    at 100, so such a replay is not spread over buckets (found by the property above: one pane
    at 600 spread, 610 in one bucket)."""
    rows = pd.DataFrame({"v": [2, 4, 1], EVENT_TIME: [60, 20, 10], ARRIVAL_TIME: [20, 25, 100]})
    tl = Timeline.from_steps(np.array([30]), np.array([55]))
    late = ast.WatermarkEarlyLate(late=ast.Delay(D(10)))
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(D(50))), late, ast.AllowedLateness(D(25)),
                              ast.Emit(ast.AccumulationMode.DISCARDING))
    plan = EnginePlan(windowing, AGGS, keys=())
    columns = ["window_start", "total", "pane_timing", "emit_time"]
    whole = ordered(run(plan, rows, tl, True, 100).panes[columns])
    assert whole.values.tolist() == [[0, 1, "LATE", 110], [0, 4, "ON_TIME", 30], [50, 2, "ON_TIME", 110]]
    alone = run(plan, rows[rows[EVENT_TIME] >= 50], tl, True, 100).panes[columns]
    assert alone.values.tolist() == [[50, 2, "ON_TIME", 100]]  # what its own bucket would say
    assert spread_blocks(windowing, replay=True) is None
    assert spread_blocks(windowing, replay=False) == (50, 0)  # no processing time: no timer fires
    counted = ast.Windowing(windowing.window, ast.WatermarkEarlyLate(late=ast.Count(1)))
    assert spread_blocks(counted, replay=True) == (50, 0)
