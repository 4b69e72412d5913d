"""Where Spark's native streaming window aggregation is equivalent (FIXED or SLIDING windows, the
default trigger, no allowed lateness, invertible aggregates), `build_stream` uses it; its panes
equal the stateful operator's on the same micro-batches, late rows included."""
import numpy as np
import pandas as pd

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.spark import streaming as S
from sqlflow.time import MINUTE, SECOND

from .harness import collect_panes, source, write_batches

D = ast.Duration
T0 = 1_700_000_000 * SECOND - (1_700_000_000 * SECOND) % (60 * MINUTE)
AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"),
        Aggregate("avg", "v", "mean"))


def plan(window, trigger=None, lateness=0, aggregates=AGGS):
    windowing = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)),
                              ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
    return EnginePlan(windowing, aggregates, keys=("k",))


def test_which_plans_are_native():
    assert S.native_equivalent(plan(ast.Fixed(D(MINUTE)))) is None
    assert S.native_equivalent(plan(ast.Sliding(D(2 * MINUTE), D(MINUTE)))) is None
    assert "SESSIONS" in S.native_equivalent(plan(ast.Sessions(D(MINUTE))))
    assert "trigger" in S.native_equivalent(plan(ast.Fixed(D(MINUTE)), ast.Repeat(ast.Count(2))))
    assert "LATENESS" in S.native_equivalent(plan(ast.Fixed(D(MINUTE)), lateness=MINUTE))
    assert "collect_list" in S.native_equivalent(plan(ast.Fixed(D(MINUTE)), aggregates=(Aggregate("collect_list", "v", "vs"),)))


def batches():
    rng = np.random.default_rng(3)
    out = []
    for b in range(6):
        n = 15
        et = T0 + b * MINUTE + rng.integers(-3 * MINUTE, MINUTE, n)
        out.append(pd.DataFrame({"k": rng.choice(list("abc"), n), EVENT_TIME: et, "v": rng.integers(1, 9, n)}))
    # late rows, two of them for the same key and window in one batch
    out.append(pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [T0 + 10 * SECOND, T0 + 20 * SECOND, T0 + MINUTE],
                             "v": [100, 100, 100]}))
    out.append(pd.DataFrame({"k": ["c"], EVENT_TIME: [T0 + 9 * MINUTE], "v": [1]}))
    return out


def run(spark, stream_files, tmp_path, name, native):
    files = type(stream_files)(tmp_path / name)
    write_batches(files, batches())
    stream = S.build_stream(source(spark, files), plan(ast.Sliding(D(2 * MINUTE), D(MINUTE))),
                            delay=30 * SECOND, native=native, buckets=2)
    query = S.start(stream, format="memory", query_name=name, available_now=True)
    panes = collect_panes(spark, name)
    panes["batch"] = panes["emit_time"].rank(method="dense").astype(int)
    return stream, panes.drop(columns="emit_time"), S.query_metrics(query)


def test_native_equals_stateful(spark, stream_files, tmp_path):
    native, native_panes, native_metrics = run(spark, stream_files, tmp_path, "native", None)
    stateful, stateful_panes, stateful_metrics = run(spark, stream_files, tmp_path, "stateful", False)
    assert (native.operator, stateful.operator) == ("native", "stateful")
    cols = list(stateful_panes.columns)
    order = ["batch", "window_start", "k"]
    pd.testing.assert_frame_equal(native_panes[cols].sort_values(order).reset_index(drop=True),
                                  stateful_panes.sort_values(order).reset_index(drop=True), check_dtype=False)
    assert native_metrics["input_rows"] == stateful_metrics["input_rows"] == sum(map(len, batches()))
    # the engine counts every (row, window) pair it drops; Spark's native operator counts late
    # (key, window) groups of a micro-batch after its partial aggregation: fewer, never none
    assert stateful_metrics["dropped_too_late"] == 16
    assert 0 < native_metrics["spark_dropped_late"] <= 16
