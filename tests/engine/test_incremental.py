"""Streaming: micro-batches through Engine.advance (state pickled between batches) emit exactly the
panes of a replay in which every row arrives at its batch's time, the watermark steps at batch
times, and processing-time timers fire at the first batch at or after their time."""
import pickle

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import ARRIVAL_TIME, EnginePlan
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
