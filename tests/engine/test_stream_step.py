"""The vectorised micro-batch step (`stream_step.py`) gives exactly the per-key loop's panes (in
order), drops, counters and state summary, micro-batch by micro-batch, with its state pickled in
between: random trigger trees, every window function (sessions merging, with retractions), every
accumulation mode, allowed lateness, random micro-batch cuts and watermark steps."""
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, GAP
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.stream_step import StreamStep
from sqlflow.time import NEG_INF, POS_INF

from .strategies import D, durations, inputs, output_times, triggers, windows
from tests.conftest import examples

AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"),
        Aggregate("collect_list", "v", "vs"), Aggregate("first", "v", "head"))
SETTINGS = settings(max_examples=examples(120))
MODES = st.sampled_from(list(ast.AccumulationMode))
LATENESS = st.sampled_from([0, 25, 1000])
#: sessions whose gap is a per-row expression (the GAP column holds 5..40)
row_gap_sessions = st.just(ast.Sessions(ast.SqlExpr("g")))


def comparable(panes: pd.DataFrame) -> pd.DataFrame:
    """Panes as plain values: lists as tuples, every NULL as None (pandas holds a NULL as None,
    NaN or pd.NA depending on the other rows of the frame)."""
    panes = panes.reset_index(drop=True).copy()
    panes["vs"] = panes["vs"].map(tuple)
    for c in panes:
        if c != "vs":
            panes[c] = panes[c].astype(object).where(panes[c].notna(), None)
    return panes


def summary(engine, step, state, watermark, vectorised):
    """(keys, windows, next timer, next watermark); a timer armed at +inf never fires (None)."""
    keys, n, proc, mark = step.summary(state, watermark) if vectorised else engine.state_summary(state, watermark)
    return keys, n, None if proc == POS_INF else proc, mark


@st.composite
def micro_batches(draw, rows, tl):
    """Cut the rows (by arrival time) into 1-6 micro-batches at random instants, some empty; the
    watermark of each batch is the timeline's at its time, or (sometimes) where it was."""
    at = rows[ARRIVAL_TIME].to_numpy()
    lo, hi = (int(at.min()), int(at.max())) if len(at) else (0, 100)
    k = draw(st.integers(1, 6))
    cuts = np.unique(np.r_[draw(st.lists(st.integers(lo, hi + 50), min_size=k - 1, max_size=k - 1)), hi].astype(np.int64))
    hold = draw(st.lists(st.booleans(), min_size=len(cuts), max_size=len(cuts)))
    marks, wm = [], NEG_INF
    for c, h in zip(cuts.tolist(), hold):
        wm = wm if h else max(wm, int(tl.at(c)))
        marks.append(wm)
    batch_of = np.minimum(np.searchsorted(cuts, at), len(cuts) - 1)
    finish = draw(st.booleans())
    return cuts, marks, batch_of, finish


def assert_step_equals_loop(rows, window, trigger, mode, lateness, batches, *, prepare=lambda b: b, options=(False, False),
                            output=None):
    """Batch by batch, the stream step and the per-key loop give equal panes, metrics, dropped rows
    and live state, and both end empty after a finish. `lateness`: microseconds or ast.Unbounded();
    `options`: EMIT's (ON TIME ALWAYS, CLOSING ALWAYS)."""
    lateness = lateness if isinstance(lateness, ast.Unbounded) else D(lateness)
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(lateness), ast.Emit(mode, *options),
                      output=output)
    engine = Engine(EnginePlan(w, AGGS, keys=("k",)))
    step = StreamStep(engine)
    cuts, marks, batch_of, finish = batches
    ref = vec = None
    prev = NEG_INF
    for i, (p, wm) in enumerate(zip(cuts.tolist(), marks)):
        batch = prepare(rows[batch_of == i].drop(columns=[ARRIVAL_TIME]))
        last = finish and i == len(cuts) - 1
        r, ref = engine.advance(ref, batch, p=p, wm_prev=prev, wm_new=wm, end_of_input=last, reference=True)
        v, vec = step.run(vec, batch, p=p, wm_prev=prev, wm_new=wm, end_of_input=last)
        vec = pickle.loads(pickle.dumps(vec))
        pd.testing.assert_frame_equal(comparable(v.panes), comparable(r.panes), check_dtype=False)
        assert v.metrics == r.metrics
        pd.testing.assert_frame_equal(v.dropped, r.dropped, check_dtype=False)
        assert summary(engine, step, vec, wm, True) == summary(engine, step, ref, wm, False)
        prev = wm
    if finish:
        assert vec == {} and ref == {}


@SETTINGS
@given(st.data(), inputs(), windows, triggers, MODES, LATENESS, output_times)
def test_stream_step_equals_the_per_key_loop(data, drawn, window, trigger, mode, lateness, output):
    rows, tl = drawn
    assert_step_equals_loop(rows, window, trigger, mode, lateness, data.draw(micro_batches(rows, tl)), output=output)


@settings(max_examples=examples(100))
@given(st.data(), st.booleans().flatmap(lambda d: inputs(nulls=True, decimals=d)), windows, triggers, MODES,
       LATENESS)
def test_stream_step_equals_the_per_key_loop_with_nulls_and_batches_typed_apart(data, drawn, window, trigger, mode,
                                                                                lateness):
    """NULL keys, values and WHEN predicates, decimal values, and every batch typed by pandas on
    its own (a batch of NULLs only is a column of None)."""
    rows, tl = drawn

    def typed_by_itself(batch):
        batch = batch.copy()
        for c in ["k", "v", *[c for c in batch if c.startswith("__sqlflow_when")]]:
            batch[c] = pd.Series([None if pd.isna(x) else x for x in batch[c].tolist()], dtype=object,
                                 index=batch.index)
        return batch

    assert_step_equals_loop(rows, window, trigger, mode, lateness, data.draw(micro_batches(rows, tl)), prepare=typed_by_itself)


@settings(max_examples=examples(100))
@given(st.data(), inputs(max_rows=60), row_gap_sessions, triggers, MODES, LATENESS, st.integers(0, 2**32 - 1))
def test_stream_step_with_per_row_session_gaps(data, drawn, window, trigger, mode, lateness, seed):
    """Sessions of per-row gaps (some NULL or not positive: those rows are dropped and counted)."""
    rows, tl = drawn
    rng = np.random.default_rng(seed)
    gaps = pd.array(rng.integers(-1, 9, len(rows)) * 5, dtype="Int64")
    gaps[rng.random(len(rows)) < 0.1] = pd.NA
    rows = rows.assign(**{GAP: gaps})
    assert_step_equals_loop(rows, window, trigger, mode, lateness, data.draw(micro_batches(rows, tl)))


@settings(max_examples=examples(150))
@given(st.data(), inputs(max_rows=80), st.builds(ast.Sessions, durations(2, 8)),
       st.sampled_from([ast.WatermarkEarlyLate(early=ast.Period(D(60))),
                        ast.Sequence((ast.RepeatUntil(ast.Period(D(35)), ast.Watermark()), ast.Repeat(ast.Watermark()))),
                        ast.Repeat(ast.Count(2)), None]),
       st.just(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING), LATENESS)
def test_session_merges_with_retractions(data, drawn, window, trigger, mode, lateness):
    """Many rows over few keys: sessions that merge across batches, each merge retracting the last
    panes of the sessions it joins (the README's first query's trigger among them)."""
    rows, tl = drawn
    assert_step_equals_loop(rows, window, trigger, mode, lateness, data.draw(micro_batches(rows, tl)))


@pytest.mark.parametrize("window", [ast.Fixed(D(10)), ast.Sessions(D(10))], ids=["fixed", "sessions"])
def test_the_callers_state_is_left_alone(window):
    """A retried micro-batch: the same batch from the same state twice gives the same panes and
    the same new state, and the state passed in is not changed."""
    trigger = ast.Sequence((ast.Count(1), ast.Repeat(ast.Delay(D(5)))))
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(0)),
                      ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
    step = StreamStep(Engine(EnginePlan(w, AGGS, keys=("k",))))
    rows = pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [1, 8, 3], "v": [1, 2, 3]})
    _, state = step.run(None, rows.iloc[:1], p=10, wm_prev=NEG_INF, wm_new=NEG_INF)
    before = pickle.dumps(state)
    first, s1 = step.run(state, rows.iloc[1:], p=20, wm_prev=NEG_INF, wm_new=NEG_INF)
    assert pickle.dumps(state) == before
    again, s2 = step.run(state, rows.iloc[1:], p=20, wm_prev=NEG_INF, wm_new=NEG_INF)
    pd.testing.assert_frame_equal(first.panes, again.panes)
    assert pickle.dumps(s1) == pickle.dumps(s2)


def test_nullable_bigint_keys_beyond_2_53_stay_exact():
    """Keys typed Int64 with a NULL (how packed input arrives): 2^53 and 2^53 + 1 stay two keys,
    in the state and in the panes."""
    big = 2**53
    w = ast.Windowing(ast.WindowClause(ast.Fixed(D(10))), None, ast.AllowedLateness(D(0)),
                      ast.Emit(ast.AccumulationMode.ACCUMULATING))
    step = StreamStep(Engine(EnginePlan(w, (Aggregate("count_star", None, "n"),), keys=("k",))))
    rows = pd.DataFrame({"k": pd.array([big, big + 1, None], dtype="Int64"), EVENT_TIME: [1, 2, 3]})
    _, state = step.run(None, rows, p=5, wm_prev=NEG_INF, wm_new=NEG_INF)
    result, state = step.run(state, rows.iloc[:2], p=6, wm_prev=NEG_INF, wm_new=100)
    assert [(None if pd.isna(k) else int(k), n) for k, n in zip(result.panes["k"], result.panes["n"])] == [
        (big, 2), (big + 1, 2), (None, 1)]
    assert state == {}
