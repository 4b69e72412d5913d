"""Streaming: micro-batches through Engine.advance (state pickled between batches) emit exactly the
panes of a replay in which every row arrives at its batch's time, the watermark steps at batch
times, and processing-time timers fire at the first batch at or after their time."""
import pickle

import numpy as np
import pytest
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.triggers import uses_processing_time
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF

from .strategies import D, inputs, output_times, triggers, windows
from .test_stream_step import comparable
from tests.conftest import examples

AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"),
        Aggregate("collect_list", "v", "vs"))


def micro_batches(rows, tl, batch_times):
    batch_of = np.searchsorted(batch_times, rows[ARRIVAL_TIME].to_numpy())
    batch_of = np.minimum(batch_of, len(batch_times) - 1)
    marks = tl.at_many(batch_times)
    return batch_of, marks


def stream(engine, rows, batch_times, marks, batch_of, *, prepare=None, as_values=False):
    """Micro-batch i (rows with batch_of == i, through `prepare`) at batch_times[i], watermark
    marks[i]; panes of all batches (as plain values with `as_values`) and the rows dropped."""
    state, out, dropped = None, [], 0
    prev = NEG_INF
    for i, p in enumerate(batch_times.tolist()):
        batch = rows[batch_of == i]
        result, state = engine.advance(state, prepare(batch) if prepare else batch, p=p, wm_prev=prev,
                                       wm_new=int(marks[i]), end_of_input=(i == len(batch_times) - 1))
        state = pickle.loads(pickle.dumps(state))
        out.append(comparable(result.panes) if as_values else result.panes)
        dropped += result.metrics["dropped_too_late"] + result.metrics["dropped_closed_window"]
        prev = int(marks[i])
    assert state == {}, "the end of input empties the state"
    return pd.concat(out, ignore_index=True), dropped


def _batched(rows, tl, window, trigger, mode, lateness, n_batches, output=None):
    """The engine of the drawn query, and `n_batches` micro-batch cuts over the drawn rows."""
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode),
                      output=output)
    engine = Engine(EnginePlan(w, AGGS, keys=("k",)))
    last = int(rows[ARRIVAL_TIME].max())
    cuts = np.unique(np.r_[np.linspace(rows[ARRIVAL_TIME].min(), last, n_batches).astype(np.int64), last])
    batch_of, marks = micro_batches(rows, tl, cuts)
    return engine, cuts, batch_of, marks


def _replay(engine, rows, cuts, batch_of, marks):
    """The replay with the micro-batches' instants: every row arrives at its batch's cut."""
    replay_rows = rows.copy()
    replay_rows[ARRIVAL_TIME] = cuts[batch_of]
    steps = Timeline.from_steps(cuts, np.maximum.accumulate(marks))
    return engine.run(replay_rows, timeline=steps, replay=True, p_end=int(cuts[-1]), timer_instants=cuts)


@settings(max_examples=examples(150))
@given(inputs(), windows, triggers, st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]),
       st.integers(1, 6), output_times)
def test_micro_batches_equal_the_replay(data, window, trigger, mode, lateness, n_batches, output):
    rows, tl = data
    if len(rows) == 0:
        return
    engine, cuts, batch_of, marks = _batched(rows, tl, window, trigger, mode, lateness, n_batches, output)
    streamed, dropped = stream(engine, rows, cuts, marks, batch_of)

    replayed = _replay(engine, rows, cuts, batch_of, marks)
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


def _typed_by_itself(batch: pd.DataFrame) -> pd.DataFrame:
    """A micro-batch as Spark hands it to pandas, typed on its own: values, keys and predicates
    as Python objects with None for NULL (so a batch of NULLs only has no type)."""
    batch = batch.copy()
    for c in ["k", "v", *[c for c in batch if c.startswith("__sqlflow_when")]]:
        batch[c] = pd.Series([None if pd.isna(x) else x for x in batch[c].tolist()], dtype=object, index=batch.index)
    return batch


@settings(max_examples=examples(150))
@given(st.booleans().flatmap(lambda d: inputs(nulls=True, decimals=d)), windows, triggers,
       st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]), st.integers(1, 6))
def test_micro_batches_typed_apart_equal_the_replay(data, window, trigger, mode, lateness, n_batches):
    """Batch-split independence: however the input is split into micro-batches, each typed by
    pandas on its own (a batch of NULL decimals is a column of None), the panes are those of the
    replay of the whole input with the same instants: no value changes type, no batch breaks."""
    rows, tl = data
    if len(rows) == 0:
        return
    engine, cuts, batch_of, marks = _batched(rows, tl, window, trigger, mode, lateness, n_batches)
    streamed, _ = stream(engine, rows, cuts, marks, batch_of, prepare=_typed_by_itself, as_values=True)
    replayed = _replay(engine, rows, cuts, batch_of, marks)
    pd.testing.assert_frame_equal(streamed, comparable(replayed.panes), check_dtype=False)


@settings(max_examples=examples(100))
@given(st.booleans().flatmap(lambda d: inputs(nulls=True, decimals=d)), windows, triggers,
       st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]), st.integers(1, 6))
def test_empty_micro_batches_change_nothing(data, window, trigger, mode, lateness, n_batches):
    """Splitting the same stream into more micro-batches, the extra ones empty and with the
    watermark where it was, gives exactly the same panes (for triggers without processing-time
    timers, which extra batches would let fire earlier)."""
    rows, tl = data
    if len(rows) == 0 or (trigger is not None and uses_processing_time(trigger)):
        return
    engine, cuts, batch_of, marks = _batched(rows, tl, window, trigger, mode, lateness, n_batches)
    plain, _ = stream(engine, rows, cuts, marks, batch_of, as_values=True)
    # an empty batch just after every batch (and before the first), the watermark unchanged
    extra = np.r_[cuts[0] - 1, cuts[:-1] + 1]
    extra = extra[~np.isin(extra, cuts)]
    times = np.sort(np.r_[cuts, extra])
    is_real = np.isin(times, cuts)
    real_index = np.cumsum(is_real) - 1
    marks2 = np.where(real_index >= 0, marks[np.maximum(real_index, 0)], NEG_INF)
    batch_of2 = np.flatnonzero(is_real)[batch_of]
    split, _ = stream(engine, rows, times, marks2, batch_of2, as_values=True)
    pd.testing.assert_frame_equal(split, plain)
