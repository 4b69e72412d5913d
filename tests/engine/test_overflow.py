"""Times at the edge of int64 microseconds: windows end at +inf instead of wrapping around,
durations past int64 are a sqlflow error naming the clause, and no raw OverflowError escapes."""
import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, GAP
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.engine.windows import window_fn
from sqlflow.errors import SqlflowError, SqlflowExecutionError, SqlflowUnsupportedError
from sqlflow.time import NEG_INF, POS_INF

D = ast.Duration
COUNT = (Aggregate("count_star", None, "n"),)


def engine(window, trigger=None, lateness=None):
    lateness = ast.AllowedLateness(D(lateness)) if lateness is not None else None
    return Engine(EnginePlan(ast.Windowing(ast.WindowClause(window), trigger, lateness), COUNT, keys=("k",)))


def windows(panes):
    return panes[["window_start", "window_end", "n"]].values.tolist()


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "per-key loop"])
def test_a_session_near_the_end_of_time_ends_at_infinity(reference):
    rows = pd.DataFrame({"k": ["a", "a"], EVENT_TIME: [POS_INF - 3, POS_INF - 1]})
    assert windows(engine(ast.Sessions(D(10))).run(rows, reference=reference).panes) == [[POS_INF - 3, POS_INF, 2]]


@pytest.mark.parametrize("gaps", [
    [float("inf"), 1e30, 5.0],
    pd.array([2**63 - 1, 2**62, 5], dtype="Int64"),
], ids=["float", "integer"])
@pytest.mark.parametrize("reference", [False, True], ids=["engine", "per-key loop"])
def test_a_huge_or_infinite_per_row_gap_ends_the_session_at_infinity(gaps, reference):
    rows = pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [5, 2**62 + 100, 7], GAP: gaps})
    panes = engine(ast.Sessions(ast.SqlExpr("gap"))).run(rows, reference=reference).panes
    assert windows(panes) == [[5, POS_INF, 2], [7, 12, 1]]


def test_fixed_sliding_and_cumulate_windows_saturate_at_infinity():
    t = np.array([POS_INF - 1], np.int64)
    for fn in (ast.Fixed(D(2**62)), ast.Sliding(D(2**62), D(2**61)), ast.Cumulate(D(2**61), D(2**62))):
        row, start, end = window_fn(fn).assign(t)
        assert (start <= t[0]).all() and (end == POS_INF).any() and (end > start).all(), fn


def test_durations_of_the_whole_int64_range_run():
    rows = pd.DataFrame({"k": ["a", "a"], EVENT_TIME: [5, -5], ARRIVAL_TIME: [1, 2]})
    panes = engine(ast.Fixed(D(POS_INF))).run(rows).panes
    assert windows(panes) == [[-POS_INF, 0, 1], [0, POS_INF, 1]]
    # a DELAY that never comes: the pane waits for the end of input; lateness +inf keeps the window
    e = engine(ast.Fixed(D(10)), ast.Repeat(ast.Delay(D(POS_INF))), lateness=POS_INF)
    panes = e.run(rows, timeline=Timeline.from_steps([], []), replay=True).panes
    assert panes[["window_start", "n", "pane_timing", "emit_time"]].values.tolist() == [
        [-10, 1, "ON_TIME", 2], [0, 1, "ON_TIME", 2]]
    e = engine(ast.Fixed(D(10)), ast.Repeat(ast.Period(D(POS_INF))))
    panes = e.run(rows, timeline=Timeline.from_steps([], []), replay=True).panes
    assert panes[["window_start", "n", "emit_time"]].values.tolist() == [[-10, 1, 2], [0, 1, 2]]


@pytest.mark.parametrize("window,trigger,lateness,clause", [
    (ast.Fixed(D(2**63)), None, None, "WINDOW"),
    (ast.Sliding(D(2**64), D(10)), None, None, "WINDOW"),
    (ast.Sessions(D(2**70)), None, None, "WINDOW"),
    (ast.Fixed(D(10)), ast.Repeat(ast.Delay(D(2**63))), None, "TRIGGER"),
    (ast.Fixed(D(10)), ast.WatermarkEarlyLate(early=ast.Period(D(2**64))), None, "TRIGGER"),
    (ast.Fixed(D(10)), None, 2**63, "ALLOWED LATENESS"),
], ids=["fixed", "sliding", "sessions", "delay", "period", "lateness"])
def test_a_duration_past_int64_is_an_error_naming_its_clause(window, trigger, lateness, clause):
    rows = pd.DataFrame({"k": ["a"], EVENT_TIME: [5], ARRIVAL_TIME: [1]})
    with pytest.raises(SqlflowUnsupportedError) as e:
        engine(window, trigger, lateness).run(rows, timeline=Timeline.from_steps([2], [20]), replay=True)
    assert e.value.clause == clause and "292,000 years" in str(e.value)


@pytest.mark.parametrize("how", ["run", "advance"])
def test_an_input_value_past_int64_is_a_sqlflow_error(how):
    rows = pd.DataFrame({"k": ["a"], EVENT_TIME: pd.Series([2**64], dtype=object)})
    e = engine(ast.Fixed(D(10)))
    with pytest.raises(SqlflowExecutionError, match="does not fit in 64 bits") as caught:
        if how == "run":
            e.run(rows)
        else:
            e.advance(None, rows, p=1, wm_prev=NEG_INF, wm_new=NEG_INF)
    assert isinstance(caught.value, SqlflowError) and not isinstance(caught.value, OverflowError)
