"""Streaming: micro-batches through Engine.advance (state pickled between batches) emit exactly the
panes of a replay in which every row arrives at its batch's time, the watermark steps at batch
times, and processing-time timers fire at the first batch at or after their time."""
import pickle

import numpy as np
import pytest
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import ARRIVAL_TIME, EVENT_TIME, EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF

from .strategies import D, inputs, triggers, windows

AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"),
        Aggregate("collect_list", "v", "vs"))


def micro_batches(rows, tl, batch_times):
    batch_of = np.searchsorted(batch_times, rows[ARRIVAL_TIME].to_numpy())
    batch_of = np.minimum(batch_of, len(batch_times) - 1)
    marks = tl.at_many(batch_times)
    return batch_of, marks


def stream(engine, rows, batch_times, marks, batch_of):
    state, out, dropped = None, [], 0
    prev = NEG_INF
    for i, p in enumerate(batch_times.tolist()):
        batch = rows[batch_of == i]
        result, state = engine.advance(state, batch, p=p, wm_prev=prev, wm_new=int(marks[i]),
                                       end_of_input=(i == len(batch_times) - 1))
        state = pickle.loads(pickle.dumps(state))
        out.append(result.panes)
        dropped += result.metrics["dropped_too_late"] + result.metrics["dropped_closed_window"]
        prev = int(marks[i])
    assert state == {}, "the end of input empties the state"
    return pd.concat(out, ignore_index=True), dropped


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs(), windows, triggers, st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]),
       st.integers(1, 6))
def test_micro_batches_equal_the_replay(data, window, trigger, mode, lateness, n_batches):
    rows, tl = data
    if len(rows) == 0:
        return
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode))
    engine = Engine(EnginePlan(w, AGGS, keys=("k",)))
    last = int(rows[ARRIVAL_TIME].max())
    cuts = np.unique(np.r_[np.linspace(rows[ARRIVAL_TIME].min(), last, n_batches).astype(np.int64), last])
    batch_of, marks = micro_batches(rows, tl, cuts)
    streamed, dropped = stream(engine, rows, cuts, marks, batch_of)

    replay_rows = rows.copy()
    replay_rows[ARRIVAL_TIME] = cuts[batch_of]
    steps = Timeline.from_steps(cuts, np.maximum.accumulate(marks))
    replayed = engine.run(replay_rows, timeline=steps, replay=True, p_end=int(cuts[-1]), timer_instants=cuts)
    pd.testing.assert_frame_equal(streamed, replayed.panes, check_dtype=False)
    assert dropped == replayed.metrics["dropped_too_late"] + replayed.metrics["dropped_closed_window"]


def _count_engine(trigger, window=None, mode=ast.AccumulationMode.ACCUMULATING, lateness=0):
    w = ast.Windowing(ast.WindowClause(window or ast.Fixed(D(10))), trigger, ast.AllowedLateness(D(lateness)),
                      ast.Emit(mode))
    return Engine(EnginePlan(w, (Aggregate("count_star", None, "n"),), keys=("k",)))


@pytest.mark.parametrize("trigger,window", [
    (ast.Repeat(ast.Count(2)), None),
    (ast.Sequence((ast.Count(1), ast.Repeat(ast.Delay(D(5))))), None),
    (None, ast.Sessions(D(5))),
    (None, None),
], ids=["count", "sequence", "sessions", "default"])
def test_advance_leaves_the_callers_state_alone(trigger, window):
    """A state given to advance is not changed: the same batch from the same state twice gives the
    same panes and the same new state (a retried micro-batch must)."""
    import copy

    e = _count_engine(trigger, window)
    rows = pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [1, 2, 3]})
    _, state = e.advance(None, rows.iloc[:1], p=10, wm_prev=NEG_INF, wm_new=NEG_INF)
    before = pickle.dumps(state)
    snapshot = copy.deepcopy(state)
    first, s1 = e.advance(state, rows.iloc[1:], p=20, wm_prev=NEG_INF, wm_new=NEG_INF)
    assert pickle.dumps(state) == before
    if isinstance(state, dict) and all(isinstance(v, list) for v in state.values()):
        assert [w.trigger for ws in state.values() for w in ws] == [w.trigger for ws in snapshot.values() for w in ws]
    again, s2 = e.advance(state, rows.iloc[1:], p=20, wm_prev=NEG_INF, wm_new=NEG_INF)
    pd.testing.assert_frame_equal(first.panes, again.panes)
    assert pickle.dumps(s1) == pickle.dumps(s2)


def test_a_stale_timer_is_not_an_evaluation():
    """Micro-batch timers (timer_instants): a window whose timer was consumed early (a DELAY due at
    21 fires at the watermark crossing at 50, before the batch at 100 it was booked for) is not
    evaluated at 100 just because its booking is still there. Evaluating it would fire the WATERMARK
    stage that the SEQUENCE moved to at 50 (with nothing to emit) and restart it, so the late element
    at 120 would wait for the next DELAY instead of firing its LATE pane at once."""
    trigger = ast.RepeatUntil(ast.Sequence((ast.Delay(D(20)), ast.Watermark())), ast.Delay(D(150)))
    e = _count_engine(trigger, mode=ast.AccumulationMode.DISCARDING, lateness=1000)
    rows = pd.DataFrame({"k": ["a", "a"], EVENT_TIME: [1, 2], ARRIVAL_TIME: [1, 120]})
    panes = e.run(rows, timeline=Timeline.from_steps([50], [10]), replay=True, timer_instants=[100, 300]).panes
    assert panes[["emit_time", "n", "pane_index", "pane_timing", "is_last"]].values.tolist() == [
        [50, 1, 0, "ON_TIME", False], [120, 1, 1, "LATE", False]]
