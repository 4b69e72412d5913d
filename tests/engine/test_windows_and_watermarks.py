"""Window assignment (built-in and custom window functions) and watermark timelines."""
import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline, bounded_delay, minimum, perfect
from sqlflow.engine.windows import register_window_fn, window_fn
from sqlflow.errors import SqlflowExecutionError, SqlflowSemanticError
from sqlflow.time import NEG_INF, POS_INF

D = ast.Duration


def windows_of(fn, times):
    row, start, end = window_fn(fn).assign(np.asarray(times, np.int64))
    return sorted(zip(row.tolist(), start.tolist(), end.tolist()))


def test_fixed_windows_floor_negative_times_and_offsets():
    assert windows_of(ast.Fixed(D(10)), [-1, 0, 9, 10]) == [(0, -10, 0), (1, 0, 10), (2, 0, 10), (3, 10, 20)]
    assert windows_of(ast.Fixed(D(10), D(3)), [2, 3]) == [(0, -7, 3), (1, 3, 13)]


def test_sliding_windows_when_period_does_not_divide_size():
    assert windows_of(ast.Sliding(D(10), D(4)), [9]) == [(0, 0, 10), (0, 4, 14), (0, 8, 18)]
    assert windows_of(ast.Sliding(D(10), D(4)), [3]) == [(0, -4, 6), (0, 0, 10)]


def test_global_and_sessions():
    assert windows_of(ast.Global(), [5]) == [(0, NEG_INF, POS_INF)]
    assert windows_of(ast.Sessions(D(7)), [5]) == [(0, 5, 12)]


class EveryOtherDay:
    """A custom, non-merging window function: 2-unit windows starting on even multiples of `unit`."""

    def __init__(self, unit):
        self.unit = unit

    def assign(self, t):
        start = (t // (2 * self.unit)) * 2 * self.unit
        return np.arange(len(t)), start, start + 2 * self.unit


class Bursts:
    """A custom merging window function: like sessions of `gap`, but a burst never exceeds `cap`."""

    def __init__(self, gap, cap):
        self.gap, self.cap = gap, cap

    def assign(self, t):
        return np.arange(len(t)), t, t + self.gap

    def merge(self, windows):
        out = []
        for s, e in sorted(windows):
            if out and s < out[-1][0][1] and max(e, out[-1][0][1]) - out[-1][0][0] <= self.cap:
                (ms, me), src = out[-1]
                out[-1] = ((ms, max(me, e)), src + [(s, e)])
            else:
                out.append(((s, e), [(s, e)]))
        return out


def run_custom(fn, rows, **kw):
    plan = EnginePlan(ast.Windowing(ast.WindowClause(fn)), (Aggregate("sum", "v", "total"),), keys=("k",))
    return Engine(plan).run(rows, **kw).panes


def test_custom_window_functions_by_name():
    register_window_fn("every_other_day", EveryOtherDay)
    register_window_fn("bursts", Bursts)
    rows = pd.DataFrame({"k": ["a"] * 5, "v": [1, 2, 4, 8, 16], EVENT_TIME: [0, 15, 25, 31, 45]})
    panes = run_custom(ast.CustomWindow("every_other_day", (D(10),)), rows)
    assert panes[["window_start", "window_end", "total"]].values.tolist() == [[0, 20, 3], [20, 40, 12], [40, 60, 16]]
    # sessions with gap 12 would chain 0..42 into one; the cap keeps each burst within 30, so the
    # element at 20 opens a new burst that overlaps the first without merging into it
    rows = pd.DataFrame({"k": ["a"] * 4, "v": [1, 2, 4, 8], EVENT_TIME: [0, 10, 20, 30]})
    panes = run_custom(ast.CustomWindow("bursts", (D(12), D(30))), rows)
    assert panes[["window_start", "window_end", "total"]].values.tolist() == [[0, 22, 3], [20, 42, 12]]


def test_custom_window_errors_name_the_function():
    with pytest.raises(SqlflowSemanticError, match="unknown window function nope"):
        window_fn(ast.CustomWindow("nope", ()))

    class Broken:
        def assign(self, t):
            raise RuntimeError("boom")

    register_window_fn("broken", Broken)
    with pytest.raises(SqlflowExecutionError, match="window function broken.assign failed: boom"):
        window_fn(ast.CustomWindow("broken", ())).assign(np.array([1]))


def test_bounded_delay_watermark_never_moves_back():
    tl = bounded_delay(arrival=[1, 2, 3, 4], event=[100, 50, 130, 90], delay=10)
    assert tl.steps() == [(1, 90), (3, 120)]
    assert tl.before(3) == 90 and tl.at(3) == 120 and tl.at(100) == 120


def test_perfect_watermark_is_the_minimum_pending_event_time():
    tl = perfect(arrival=[1, 2, 2, 3], event=[50, 40, 70, 60])
    assert tl.steps() == [(1, 40), (2, 60), (3, POS_INF)]


def test_minimum_of_several_inputs():
    a = Timeline.from_steps([1, 5], [10, 50])
    b = Timeline.from_steps([2, 3], [20, 30])
    assert minimum(a, b).steps() == [(2, 10), (5, 30)]


def test_explicit_timeline_that_moves_backwards_is_an_error():
    with pytest.raises(SqlflowExecutionError) as e:
        Timeline.from_steps([1, 2], [50, 40])
    assert "moves backwards at processing time 1970-01-01 00:00:00.000002" in str(e.value)


def test_watermark_reaching_infinity_expires_everything():
    rows = pd.DataFrame({"k": ["a"], "v": [1], EVENT_TIME: [5], ARRIVAL_TIME: [6]})
    plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(D(10)))), (Aggregate("sum", "v", "total"),), keys=("k",))
    panes = Engine(plan).run(rows, timeline=Timeline.from_steps([7], [POS_INF]), replay=True).panes
    assert panes[["total", "pane_timing", "is_last", "emit_time"]].values.tolist() == [[1, "ON_TIME", True, 7]]


def test_timeline_rows_that_do_not_raise_the_watermark_still_end_the_input_there():
    """Each timeline row is an instant: the input ends at the last row, even one that leaves W as it
    was, so the end-of-input pane is emitted then."""
    tl = Timeline.from_steps([10, 20], [5, 5])
    assert tl.steps() == [(10, 5)] and tl.last_time == 20
    assert Timeline.from_steps([10], [NEG_INF]).last_time == 10
    rows = pd.DataFrame({"k": ["a"], "v": [1], EVENT_TIME: [7], ARRIVAL_TIME: [1]})
    plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(D(10)))), (Aggregate("sum", "v", "total"),), keys=("k",))
    panes = Engine(plan).run(rows, timeline=tl, replay=True).panes
    assert panes[["total", "pane_timing", "emit_time"]].values.tolist() == [[1, "ON_TIME", 20]]


def test_timeline_rows_at_the_same_processing_time_in_any_order():
    """Rows with equal processing times are one step, the largest watermark, whatever their order;
    whether the timeline moves backwards does not depend on that order either."""
    for times, values in [([1, 1, 2], [40, 50, 50]), ([1, 1, 2], [50, 40, 50]), ([2, 1, 1], [50, 50, 40])]:
        assert Timeline.from_steps(times, values).steps() == [(1, 50)]
    for values in ([40, 50, 45], [50, 40, 45]):
        with pytest.raises(SqlflowExecutionError, match="moves backwards at processing time 1970-01-01 00:00:00.000002"):
            Timeline.from_steps([1, 1, 2], values)


def test_minimum_ends_where_its_last_input_ends():
    a = Timeline.from_steps([1, 9], [10, 10])
    b = Timeline.from_steps([2], [20])
    assert minimum(a, b).steps() == [(2, 10)] and minimum(a, b).last_time == 9
