"""The vectorised micro-batch step (`stream_step.py`) on the default trigger (REPEAT(WATERMARK))
and early PERIOD firings over windows that do not merge gives exactly the per-key loop's panes,
drops and state size, micro-batch by micro-batch, with its state pickled in between, with
irregular batch times and periods shorter and longer than them, and value columns typed apart."""
import decimal
import pickle

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.time import NEG_INF
from sqlflow.engine.paths import watermark_shape
from tests.conftest import examples

D = ast.Duration
AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"),
        Aggregate("collect_list", "v", "vs"), Aggregate("first", "v", "head"), Aggregate("avg", "v", "mean"))
WINDOWS = [ast.Fixed(D(10)), ast.Fixed(D(10), D(3)), ast.Sliding(D(10), D(5)), ast.Sliding(D(9), D(4), D(1)),
           ast.Cumulate(D(5), D(15)), ast.Global()]


def comparable(panes: pd.DataFrame) -> pd.DataFrame:
    """The panes as emitted (the order is part of the contract: docs/semantics.md, 4), with lists
    as tuples and every NULL as None: how pandas holds a NULL (None, NaN, pd.NA) depends on the
    other rows of the frame, which the two paths group differently (keys that are not due)."""
    panes = panes.copy().reset_index(drop=True)
    if "is_retraction" not in panes:
        panes["is_retraction"] = False
    panes["vs"] = panes["vs"].map(tuple)
    for c in ("k", "total", "top", "head", "mean"):
        panes[c] = panes[c].astype(object).where(panes[c].notna(), None)
    return panes


def _values(vs, how):
    """A batch's value column as pandas types it: nullable Int64, or objects as Spark hands over
    decimals (and a column of NULLs only), where each batch is typed on its own."""
    if how == "Int64":
        return pd.array(vs, dtype="Int64")
    if how == "decimal":
        vs = [None if v is None else decimal.Decimal(v) / 4 for v in vs]
    return pd.Series(vs, dtype=object)


batches_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 60), st.one_of(st.none(), st.integers(-5, 9))),
             max_size=8),
    min_size=1, max_size=6)


W = ast.Watermark()
TRIGGERS = [None, ast.Sequence((W, ast.Repeat(W))),
            ast.Sequence((ast.RepeatUntil(ast.Period(D(700)), W), ast.Repeat(W))),
            ast.Sequence((ast.RepeatUntil(ast.Period(D(2000)), W), ast.Repeat(W))),
            ast.Sequence((ast.RepeatUntil(ast.Period(D(1000)), W), ast.Repeat(W))),
            ast.WatermarkEarlyLate(early=ast.Repeat(ast.Period(D(700))))]


@settings(max_examples=examples(150))
@given(batches_strategy, st.sampled_from(WINDOWS), st.sampled_from(list(ast.AccumulationMode)),
       st.sampled_from([0, 7, 30]), st.lists(st.integers(0, 25), min_size=6, max_size=6), st.booleans(),
       st.sampled_from(["Int64", "object", "decimal"]), st.sampled_from(TRIGGERS),
       st.lists(st.sampled_from([1000, 500, 1300, 2000]), min_size=6, max_size=6))
def test_fast_path_equals_engine_advance(batches, window, mode, lateness, steps, finish, values, trigger, gaps):
    """Batch by batch, with the default trigger and with early PERIOD firings (periods that are
    shorter, longer than and equal to the time between batches, which is irregular)."""
    windowing = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode))
    plan = EnginePlan(windowing, AGGS, keys=("k",))
    assert watermark_shape(plan.trigger) is not None
    engine = Engine(plan)
    e_state = f_state = None
    wm = NEG_INF
    e_out, f_out = [], []
    for i, batch in enumerate(batches):
        rows = pd.DataFrame({"k": pd.Series([r[0] for r in batch], dtype=object),
                             EVENT_TIME: pd.array([r[1] for r in batch], dtype="Int64"),
                             "v": _values([r[2] for r in batch], values)})
        new_wm = wm if (i == 0 and steps[i] == 0) else (steps[i] if wm == NEG_INF else wm + steps[i])
        last = finish and i == len(batches) - 1
        p = sum(gaps[:i + 1])
        er, e_state = engine.advance(e_state, rows, p=p, wm_prev=wm, wm_new=new_wm, end_of_input=last,
                                     reference=True)
        fr, f_state = engine.advance(f_state, rows, p=p, wm_prev=wm, wm_new=new_wm, end_of_input=last)
        f_state = pickle.loads(pickle.dumps(f_state))
        e_out.append(er.panes)
        f_out.append(fr.panes)
        assert er.metrics == fr.metrics
        pd.testing.assert_frame_equal(er.dropped, fr.dropped, check_dtype=False)
        assert engine.state_summary(e_state, new_wm)[:2] == engine.state_summary(f_state, new_wm)[:2]
        wm = new_wm
        pd.testing.assert_frame_equal(comparable(fr.panes), comparable(er.panes), check_dtype=False)
    pd.testing.assert_frame_equal(comparable(pd.concat(f_out, ignore_index=True)),
                                  comparable(pd.concat(e_out, ignore_index=True)), check_dtype=False)
