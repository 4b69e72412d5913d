"""The vectorised step's state is its live windows and nothing else: once the watermark passes a
window's end + allowed lateness the window, its lineage, its pending input and its key leave the
state (exact counts, on the README's first query's trigger in retracting mode, with early panes in between)."""
import pickle

import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.stream_step import StreamStep
from sqlflow.errors import SqlflowExecutionError
from sqlflow.time import NEG_INF

D = ast.Duration
W = ast.Watermark()
CARD = ast.Sequence((ast.RepeatUntil(ast.Period(D(50)), W), ast.Repeat(W)))


def card_step(gap=10, lateness=100):
    w = ast.Windowing(ast.WindowClause(ast.Sessions(D(gap))), CARD, ast.AllowedLateness(D(lateness)),
                      ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
    plan = EnginePlan(w, (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n")), keys=("k",))
    return StreamStep(Engine(plan))


def lengths(state) -> set:
    """The lengths of every array the state holds (one per live window, or per key)."""
    out = {len(state["keys"])}
    for part in (state["windows"], state["trigger"], *state["pending"], state["lineage"][0], *state["lineage"][1]):
        out |= {len(a) for a in (part or {}).values()}
    return out


def test_expired_windows_leave_the_state():
    """1000 keys, one session each, [t, t + 15) with t = (key % 50) * 100; lateness 100."""
    step = card_step()
    keys = np.arange(1000)
    t = (keys % 50) * 100
    rows = pd.DataFrame({"k": np.repeat(keys, 2), EVENT_TIME: np.c_[t, t + 5].ravel(), "v": 1})
    result, state = step.run(None, rows, p=1, wm_prev=NEG_INF, wm_new=NEG_INF)
    assert len(result.panes) == 0
    assert step.summary(state, NEG_INF) == (1000, 1000, 50, 15)  # PERIOD 50 armed at the boundary 50
    assert lengths(state) == {1000, 0}  # no lineage yet

    # at 100 every session fires EARLY (its PERIOD is due); the watermark then passes the end of
    # the sessions of t <= 1985 and the expiry (end + 100 <= 2000) of those of t <= 1885
    result, state = step.run(pickle.loads(pickle.dumps(state)), rows.iloc[:0], p=100, wm_prev=NEG_INF,
                             wm_new=2000)
    assert result.panes["pane_timing"].tolist() == ["EARLY"] * 1000
    assert result.metrics["retractions"] == 0
    live = (t + 15 + 100 > 2000).sum()
    assert live == 620
    assert step.summary(state, 2000) == (620, 620, None, 2015)
    assert lengths(state) == {620}  # windows, keys, pending rows and one lineage pane each
    assert sorted(state["keys"]["k"]) == sorted(keys[t + 115 > 2000].tolist())

    # a late element for an expired session is dropped (too late) and leaves nothing behind
    late = pd.DataFrame({"k": [0], EVENT_TIME: [0], "v": [1]})
    result, state = step.run(state, late, p=150, wm_prev=2000, wm_new=2000)
    assert result.metrics["dropped_too_late"] == 1
    assert step.summary(state, 2000)[:2] == (620, 620)

    # the watermark passes every expiry: the state is empty
    result, state = step.run(state, rows.iloc[:0], p=200, wm_prev=2000, wm_new=10_000)
    assert state == {}
    # sessions past their end got ON_TIME panes with nothing new: none here; their panes stay
    assert len(result.panes) == 0


def test_a_long_stream_keeps_only_the_live_set():
    """40 micro-batches, each bringing one session for each of 200 new keys and extending the
    sessions of the 200 keys of the batch before; the watermark trails by 300. After every batch
    the state holds exactly the sessions whose end + lateness is past the watermark."""
    step = card_step(gap=10, lateness=50)
    state, wm = None, NEG_INF
    ends = {}  # key -> its session's end, as the test computes it
    for i in range(40):
        t0 = 100 * i
        new = np.arange(200 * i, 200 * (i + 1))
        again = np.arange(200 * (i - 1), 200 * i) if i else np.empty(0, np.int64)
        rows = pd.DataFrame({"k": np.r_[new, again], EVENT_TIME: np.r_[np.full(len(new), t0),
                                                                          np.full(len(again), t0 - 95)], "v": 1})
        for k in new.tolist():
            ends[k] = t0 + 10
        for k in again.tolist():  # [t0 - 95, t0 - 85) overlaps [t0 - 100, t0 - 90): the session grows
            ends[k] = max(ends[k], t0 - 85)
        new_wm = t0 - 300
        result, state = step.run(state, rows, p=t0 + 1, wm_prev=wm, wm_new=new_wm)
        state = pickle.loads(pickle.dumps(state))
        wm = new_wm
        ends = {k: e for k, e in ends.items() if e + 50 > wm}
        assert step.summary(state, wm)[:2] == (len(ends), len(ends))
        assert sorted(state["keys"]["k"]) == sorted(ends)
        assert lengths(state) <= {len(ends), 0} | {int((state["windows"]["next_index"] > 0).sum())}
    assert len(ends) == 800  # the keys of the last four batches: bounded, whatever the stream's length


def test_a_state_of_the_per_key_loop_is_refused_with_a_clear_error():
    """A checkpoint written when the operator ran the per-key loop holds its state format."""
    step = card_step()
    rows = pd.DataFrame({"k": [1], EVENT_TIME: [0], "v": [1]})
    _, old = step.engine.advance(None, rows, p=1, wm_prev=NEG_INF, wm_new=NEG_INF, reference=True)
    with pytest.raises(SqlflowExecutionError, match="new checkpoint"):
        step.run(old, rows, p=2, wm_prev=NEG_INF, wm_new=NEG_INF)
