"""`path_for`: which implementation runs a plan, per situation and question, with its reason; the
engine dispatches on it and explain prints it (`describe`)."""
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.columns import EVENT_TIME
from sqlflow.engine import BOUNDED, REPLAY, STREAM, Aggregate, Engine, EnginePlan, describe, path_for

D = ast.Duration
MIN = 60_000_000
W = ast.Watermark()
EARLY_PERIOD = ast.WatermarkEarlyLate(early=ast.Period(D(MIN)))
SUM = (Aggregate("sum", "v", "total"),)


def plan(window, trigger=None, lateness=0, aggregates=SUM, keys=("k",), emit=None, output=None,
         domain=ast.TimeDomain.EVENT_TIME):
    windowing = ast.Windowing(ast.WindowClause(window, domain=domain), trigger,
                              ast.AllowedLateness(D(lateness)) if lateness else None, emit, output=output)
    return EnginePlan(windowing, aggregates, keys=keys)


FIXED, SESSIONS = ast.Fixed(D(MIN)), ast.Sessions(D(MIN))
CUSTOM = ast.CustomWindow("triangle", ())


@pytest.mark.parametrize("window, trigger, expected", [
    # bounded, replay, stream
    (FIXED, None, ("collapse", "schedule", "micro-batch")),
    (FIXED, EARLY_PERIOD, ("collapse", "schedule", "micro-batch")),
    (FIXED, ast.Repeat(ast.Count(2)), ("keyloop", "keyloop", "micro-batch")),
    (FIXED, ast.Repeat(ast.Period(D(MIN))), ("collapse", "keyloop", "micro-batch")),
    (FIXED, ast.WatermarkPercentile(50), ("keyloop", "keyloop", "micro-batch")),
    (FIXED, ast.WatermarkPercentile(100), ("collapse", "keyloop", "micro-batch")),
    (ast.Sliding(D(2 * MIN), D(MIN)), None, ("collapse", "schedule", "micro-batch")),
    (ast.Cumulate(D(MIN), D(4 * MIN)), None, ("collapse", "schedule", "micro-batch")),
    (ast.Global(), EARLY_PERIOD, ("collapse", "schedule", "micro-batch")),
    (SESSIONS, None, ("collapse", "schedule", "micro-batch")),
    (ast.Sessions(ast.SqlExpr("gap")), None, ("collapse", "keyloop", "micro-batch")),
    (CUSTOM, None, ("keyloop", "keyloop", "micro-batch")),
    (FIXED, ast.WatermarkEarlyLate(early=ast.Period(D(MIN), D(7))), ("collapse", "schedule", "micro-batch")),
])
def test_the_engine_path_of_each_situation(window, trigger, expected):
    p = plan(window, trigger)
    assert tuple(path_for(p, input=i).name for i in (BOUNDED, REPLAY, STREAM)) == expected


@pytest.mark.parametrize("option", ["on_time_always", "closing_always"])
def test_emit_always_sends_a_replay_to_the_per_key_loop(option):
    """The watermark schedule emits panes of new input only; on bounded input every window fires
    once, at the end, with all its input, so the options change nothing there."""
    p = plan(FIXED, emit=ast.Emit(ast.AccumulationMode.ACCUMULATING, **{option: True}))
    assert tuple(path_for(p, input=i).name for i in (BOUNDED, REPLAY, STREAM)) == ("collapse", "keyloop", "micro-batch")


class Merging:
    """A custom window function whose windows merge (it has `merge`): only the per-key loop runs it."""

    def assign(self, t):
        raise NotImplementedError

    def merge(self, windows):
        raise NotImplementedError


def test_a_custom_merging_window_function_runs_on_the_per_key_loop_on_a_stream():
    p = EnginePlan(ast.Windowing(ast.WindowClause(ast.CustomWindow("merging", ()))), SUM, keys=("k",),
                   custom_windows={"merging": Merging})
    assert path_for(p, input=STREAM) == ("keyloop", "custom merging window function: its merge is Python code per key")


def test_explain_text_of_each_engine_path():
    assert describe(path_for(plan(FIXED))) == "vectorised (one pane per window)"
    assert describe(path_for(plan(FIXED), input=REPLAY)) == "vectorised watermark schedule"
    assert describe(path_for(plan(FIXED), input=STREAM)) == "vectorised micro-batch step"
    assert describe(path_for(plan(SESSIONS), input=STREAM)) == "vectorised micro-batch step"
    assert describe(path_for(plan(FIXED, ast.Repeat(ast.Count(2))))) == \
        "per-key event loop (the definition of the semantics)"
    assert describe(path_for(plan(CUSTOM))) == "per-key event loop (custom window function)"


def test_the_engine_runs_the_path_it_names(monkeypatch):
    """Engine.run dispatches on path_for: the collapse path gives one ON_TIME pane per window, and
    forcing path_for to answer keyloop gives the per-key loop's (here the same) panes."""
    rows = pd.DataFrame({"k": ["a", "a", "b"], "v": [1, 2, 4], EVENT_TIME: [0, MIN + 1, 5]})
    fast = Engine(plan(FIXED)).run(rows).panes
    import sqlflow.engine.runner as runner
    from sqlflow.engine.paths import Path

    monkeypatch.setattr(runner, "path_for", lambda *a, **k: Path("keyloop", "forced"))
    slow = Engine(plan(FIXED)).run(rows).panes
    expected = [["a", 1, 0, "ON_TIME"], ["b", 4, 0, "ON_TIME"], ["a", 2, MIN, "ON_TIME"]]
    assert fast[["k", "total", "window_start", "pane_timing"]].values.tolist() == expected
    assert slow[["k", "total", "window_start", "pane_timing"]].values.tolist() == expected


@pytest.mark.parametrize("p, input, why", [
    (plan(FIXED), BOUNDED, None),
    (plan(SESSIONS), BOUNDED, None),
    (plan(FIXED, ast.Repeat(ast.Count(2))), BOUNDED,
     "its trigger can fire before the end of the input (COUNT, WHEN or WATERMARK PERCENTILE), so a window may "
     "emit several panes"),
    (plan(ast.Cumulate(D(MIN), D(4 * MIN))), BOUNDED, "Spark has no cumulating windows"),
    (plan(CUSTOM), BOUNDED, "triangle is a custom window function"),
    (plan(FIXED), REPLAY, "its input is replayed: panes depend on the arrival order, which only the engine follows"),
    (plan(FIXED), STREAM, None),
    (plan(ast.Sliding(D(2 * MIN), D(MIN))), STREAM, None),
    (plan(SESSIONS), STREAM, "window SESSIONS (only FIXED and SLIDING are native)"),
    (plan(FIXED, EARLY_PERIOD), STREAM, "a trigger other than the default REPEAT(WATERMARK)"),
    (plan(FIXED, lateness=MIN), STREAM, "ALLOWED LATENESS (Spark drops a window when the watermark passes its end)"),
    (plan(FIXED, aggregates=(Aggregate("collect_list", "v", "vs"),)), STREAM,
     "aggregate collect_list (order- or distinct-dependent in Spark's streaming aggregation)"),
    (plan(FIXED, output=ast.OutputTimestamp(ast.OutputTime.EARLIEST)), STREAM,
     "OUTPUT TIMESTAMP EARLIEST (over a pane's timely elements only; Spark's aggregation also takes rows behind "
     "the watermark in windows still open)"),
])
def test_whether_spark_gives_the_engines_panes(p, input, why):
    path = path_for(p, input=input, operator="spark")
    assert (path.name, path.why if path.name == "engine" else None) == ("native" if why is None else "engine", why)


@pytest.mark.parametrize("domain", [ast.TimeDomain.PROCESSING_TIME, ast.TimeDomain.INGESTION_TIME])
def test_only_the_engine_follows_processing_and_ingestion_time(domain):
    p = plan(FIXED, domain=domain)
    assert [path_for(p, input=i, operator="spark") for i in (BOUNDED, REPLAY, STREAM)] == [
        ("engine", f"it is on {domain.value}, whose clock only the engine follows")] * 2 + [
        ("engine", f"{domain.value} (Spark's watermark lags a batch behind the batch's time)")]


def test_spark_facts_are_arguments():
    assert path_for(plan(FIXED), input=STREAM, operator="spark", time_shift=1).why == "a time shift"
    assert path_for(plan(FIXED), input=REPLAY, operator="spark", arrival="at").why.startswith(
        "its input is replayed (ARRIVAL at): ")


LONG = {"k": "string", "v": "bigint"}


@pytest.mark.parametrize("p, input, types, why", [
    (plan(SESSIONS), BOUNDED, LONG, None),
    (plan(SESSIONS, aggregates=(Aggregate("count_star", None, "n"), Aggregate("max", "v", "m"))), BOUNDED,
     {"k": "double", "v": "double"}, None),
    (plan(SESSIONS), BOUNDED, {"k": "string", "v": "double"},
     "SUM of a floating-point column (combining changes the order of additions)"),
    (plan(SESSIONS, aggregates=(Aggregate("avg", "v", "a"),)), BOUNDED, LONG, "aggregate avg has no exact partial"),
    (plan(SESSIONS, ast.Repeat(ast.Count(2))), BOUNDED, LONG, "the trigger can fire before the end of the input"),
    (plan(ast.Sessions(ast.SqlExpr("gap"))), BOUNDED, LONG,
     "per-row values (WHEN, a per-row gap or a custom window) belong to single rows"),
    (plan(FIXED), BOUNDED, LONG, "only sessions combine on bounded input"),
    (plan(SESSIONS, aggregates=(Aggregate("sum", "v", "t"), Aggregate("count", "v", "n"))), REPLAY, LONG, None),
    (plan(SESSIONS, EARLY_PERIOD), REPLAY, LONG, None),
    (plan(FIXED), REPLAY, LONG, None),
    (plan(SESSIONS, EARLY_PERIOD, output=ast.OutputTimestamp(ast.OutputTime.START_OF_WINDOW)), REPLAY, LONG, None),
    (plan(FIXED, EARLY_PERIOD, output=ast.OutputTimestamp(ast.OutputTime.EARLIEST)), REPLAY, LONG, None),
    (plan(SESSIONS, EARLY_PERIOD, output=ast.OutputTimestamp(ast.OutputTime.LATEST)), REPLAY, LONG,
     "OUTPUT TIMESTAMP LATEST of merging sessions (a combined group would hold a retraction earlier than its rows do)"),
    (plan(ast.Sliding(ast.Duration(120), ast.Duration(60))), REPLAY, LONG,
     "only sessions and FIXED windows combine on a replay"),
    (plan(SESSIONS, ast.Repeat(ast.Count(2))), REPLAY, LONG,
     "the trigger does not follow the watermark only, or EMIT ... ALWAYS emits without new input"),
    (plan(SESSIONS, emit=ast.Emit(ast.AccumulationMode.ACCUMULATING, on_time_always=True)), REPLAY, LONG,
     "the trigger does not follow the watermark only, or EMIT ... ALWAYS emits without new input"),
    (plan(SESSIONS, aggregates=(Aggregate("max", "v", "m"),)), REPLAY, {"k": "string", "v": "decimal(10,2)"},
     "MAX of a non-integer column"),
    (plan(SESSIONS), BOUNDED, {"k": "string", "v": "decimal(28,2)"}, None),
    (plan(SESSIONS), BOUNDED, {"k": "string", "v": "decimal(29,2)"},
     "SUM of a decimal of precision above 28 (a partial sum could overflow)"),
    (plan(FIXED), STREAM, LONG, None),
    (plan(FIXED, EARLY_PERIOD), STREAM, {"k": "decimal(10,2)", "v": "int"}, None),
    (plan(SESSIONS), STREAM, LONG, "only FIXED windows with a watermark-only trigger combine on a stream"),
    (plan(FIXED, ast.Repeat(ast.Count(2))), STREAM, LONG,
     "only FIXED windows with a watermark-only trigger combine on a stream"),
    (plan(FIXED), STREAM, {"k": "double", "v": "bigint"},
     "a key of a floating-point or nested type (pyarrow groups it otherwise than Spark)"),
    (plan(FIXED), STREAM, {"k": "string", "v": "decimal(10,2)"}, "SUM of a non-integer column"),
    (plan(FIXED, aggregates=(Aggregate("min", "v", "m"),)), STREAM, {"k": "string", "v": "float"},
     "MIN of a floating-point or nested column (NaN is ordered apart)"),
    (plan(FIXED, aggregates=(Aggregate("max", "v", "m"),)), STREAM, {"k": "string", "v": "timestamp"}, None),
])
def test_whether_rows_combine_before_the_engine(p, input, types, why):
    path = path_for(p, input=input, operator="combine", types=types)
    assert (path.name, path.why if path.name == "rows" else None) == ("combined" if why is None else "rows", why)


def test_an_unknown_question_is_an_error():
    with pytest.raises(ValueError, match="no path for input 'live'"):
        path_for(plan(FIXED), input="live")
