"""The streaming panes equal the engine's: Engine.advance over the same micro-batches (same
arrival sequence, batch times and watermarks) and the replay path (Engine.run with those arrival
times, watermark steps and timer instants). Files are fed one per micro-batch."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.time import HOUR, MINUTE, NEG_INF, SECOND

from .harness import advance_oracle, paper_rows, replay_oracle, run_stream

D = ast.Duration
A, DISC, RETR = (ast.AccumulationMode.ACCUMULATING, ast.AccumulationMode.DISCARDING,
                 ast.AccumulationMode.ACCUMULATING_AND_RETRACTING)


def plan_of(window, trigger=None, mode=A, lateness=0, aggregates=None):
    aggregates = aggregates or (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"))
    windowing = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode))
    return EnginePlan(windowing, aggregates, keys=("k",))


def paper_batches() -> list[pd.DataFrame]:
    """The paper's input in its one-minute rounds (figure 11), one file per round."""
    rows = paper_rows()
    return [g.drop(columns="round").reset_index(drop=True) for _, g in rows.groupby("round", sort=True)]


def random_batches(seed: int, n_batches: int = 5, per_batch: int = 12) -> list[pd.DataFrame]:
    """Keys a-e, event times drifting forward with some rows minutes late."""
    rng = np.random.default_rng(seed)
    base = 1_700_000_000 * SECOND
    out = []
    for b in range(n_batches):
        et = base + b * 2 * MINUTE + rng.integers(-4 * MINUTE, 2 * MINUTE, per_batch)
        out.append(pd.DataFrame({"k": rng.choice(list("abcde"), per_batch), EVENT_TIME: et,
                                 "v": rng.integers(1, 10, per_batch)}))
    return out


def check(spark, stream_files, tmp_path, name, plan, batches, *, delay, streams: list | None = None, **options):
    """The stream of `plan` over `batches` equals its replays; its panes, batch log and counters
    (`streams`: the PaneStream is appended there)."""
    files = type(stream_files)(tmp_path / name / "input")
    panes, query, log, stream = run_stream(spark, files, plan, batches, delay=delay, name=name, **options)
    if streams is not None:
        streams.append(stream)
    assert stream.operator == "stateful"
    assert log[-1]["finished"], "the last batch finished the input"
    expected, engine_dropped = advance_oracle(plan, batches, log)
    replayed, replay_dropped = replay_oracle(plan, batches, log)
    pd.testing.assert_frame_equal(expected, replayed, check_dtype=False)
    pd.testing.assert_frame_equal(panes, expected[panes.columns], check_dtype=False)
    from sqlflow.spark.streaming import late_rows, query_metrics
    metrics = query_metrics(query)
    assert late_rows(metrics) == engine_dropped == replay_dropped
    assert metrics["panes"] + metrics["retractions"] == len(panes)
    return panes, log, metrics


def test_paper_example_fixed_windows_early_and_late(spark, stream_files, tmp_path):
    early_late = ast.WatermarkEarlyLate(early=ast.Repeat(ast.Period(D(SECOND))))
    plan = plan_of(ast.Fixed(D(2 * MINUTE)), early_late, RETR, lateness=HOUR)
    panes, log, _ = check(spark, stream_files, tmp_path, "paper_fixed", plan, paper_batches(),
                          delay=MINUTE, buckets=3)
    assert {"EARLY", "LATE"} <= set(panes["pane_timing"])
    assert panes["is_retraction"].any()
    # the operator's totals: the last pane of every window holds its whole input
    last = panes[~panes["is_retraction"]].groupby(["window_start"])["total"].last()
    assert last.sum() == paper_rows()["v"].sum()


def test_paper_example_sessions_retracting(spark, stream_files, tmp_path):
    plan = plan_of(ast.Sessions(D(MINUTE)), None, RETR, lateness=HOUR)
    panes, _, _ = check(spark, stream_files, tmp_path, "paper_sessions", plan, paper_batches(), delay=0, buckets=2)
    assert panes["is_retraction"].any(), "sessions merged across batches retract their earlier panes"


@pytest.mark.parametrize("seed, window, trigger, mode, lateness", [
    (1, ast.Sliding(D(2 * MINUTE), D(MINUTE)), ast.Repeat(ast.Count(2)), DISC, MINUTE),
    (2, ast.Sessions(D(MINUTE)), ast.WatermarkEarlyLate(early=ast.Repeat(ast.Period(D(SECOND))), late=ast.Count(2)),
     RETR, 3 * MINUTE),
])
def test_random_cases(spark, stream_files, tmp_path, seed, window, trigger, mode, lateness):
    plan = plan_of(window, trigger, mode, lateness)
    _, _, metrics = check(spark, stream_files, tmp_path, f"random_{seed}", plan, random_batches(seed),
                          delay=30 * SECOND, buckets=2)
    assert metrics["input_rows"] > 0


@pytest.mark.parametrize("heartbeat,combine", [(None, None), (False, None), (None, "false")])
def test_combined_rows_give_the_same_panes_and_counts(spark, stream_files, tmp_path, heartbeat, combine):
    """FIXED windows, early PERIOD firings, COUNT/SUM/MIN/MAX: the operator gets each micro-batch's
    rows combined per key and window (udfs/micro_batch_combine.py); its panes and counts (input rows, rows
    too late, rows without event time) equal the engine's over the rows themselves, and the
    watermark is max event time - delay over the rows, with or without heartbeats (a combined
    element keeps its smallest event time; Spark's watermark column uses its largest), and with no
    pass before the operator (`spark.sqlflow.streaming.combine` false: the rows as they are, poll
    timers for the heartbeats)."""
    from pyspark.sql import types as T

    from sqlflow.spark import conf
    from sqlflow.spark.streaming import combinable

    if combine is not None:
        spark.conf.set(conf.STREAMING_COMBINE, combine)

    aggs = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("count", "v", "nv"),
            Aggregate("min", "v", "lo"), Aggregate("max", "v", "hi"))
    plan = plan_of(ast.Fixed(D(MINUTE)), ast.WatermarkEarlyLate(early=ast.Period(D(SECOND))), RETR,
                   lateness=MINUTE, aggregates=aggs)
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField(EVENT_TIME, T.LongType()),
                           T.StructField("v", T.LongType())])
    assert combinable(plan, schema)
    batches = random_batches(3, per_batch=40)
    for i, batch in enumerate(batches):  # NULL keys, values and event times in some rows
        batch["k"] = batch["k"].astype(object).mask(np.arange(len(batch)) % 7 == i, None)
        batch["v"] = pd.array(batch["v"], dtype="Int64").copy()
        batch.loc[np.arange(len(batch)) % 5 == 1, "v"] = pd.NA
        batch[EVENT_TIME] = pd.array(batch[EVENT_TIME], dtype="Int64").copy()
        batch.loc[[3 + i, 20 + i], EVENT_TIME] = pd.NA
        batch.loc[[3 + i, 20 + i], "k"] = "b"
    batches[4].loc[10:14, EVENT_TIME] = batches[0][EVENT_TIME].iloc[10]  # 8 minutes late, one key and window
    batches[4].loc[10:14, "k"] = "a"
    streams: list = []
    panes, log, metrics = check(spark, stream_files, tmp_path, "combined", plan, batches, delay=30 * SECOND,
                                buckets=2, heartbeat=heartbeat, streams=streams)
    # the pass before the operator (combine, pack, heartbeats) is one mapInArrow; none without it
    passes = streams[0].panes._jdf.queryExecution().analyzed().toString().count("MapInArrow")
    assert passes == (0 if combine == "false" else 1)
    assert metrics["input_rows"] == sum(len(b) for b in batches) == 200
    seen, expected = None, []
    data = iter(batches)
    for b in log:
        if b["finished"]:
            break
        expected.append(NEG_INF if seen is None else (seen // 1000) * 1000 - 30 * SECOND)
        if b["rows"]:
            top = next(data)[EVENT_TIME].max()
            seen = top if seen is None else max(seen, top)
    assert len(expected) >= 5 and [b["wm"] for b in log[:len(expected)]] == expected
    assert metrics["dropped_null_event_time"] == 10
    assert metrics["dropped_too_late"] >= 5
    assert {"EARLY", "ON_TIME"} <= set(panes["pane_timing"])
    assert (panes.groupby(["k", "window_start"], dropna=False).size() > 1).any()


def test_beam_options_on_a_stream(spark, stream_files, tmp_path):
    """The options Beam users port, on a live stream: PERIOD OFFSET early firings, ALLOWED LATENESS UNBOUNDED
    (no window is ever collected until the input finishes: the stream runs on, state and all) and
    EMIT ... ON TIME ALWAYS CLOSING ALWAYS give the engine's panes, and every window ends with one
    is_last pane."""
    trigger = ast.WatermarkEarlyLate(early=ast.Repeat(ast.Period(D(SECOND), D(SECOND // 2))), late=ast.Count(1))
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(D(2 * MINUTE))), trigger, ast.AllowedLateness(ast.Unbounded()),
                              ast.Emit(A, on_time_always=True, closing_always=True))
    plan = EnginePlan(windowing, (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n")), keys=("k",))
    panes, _, metrics = check(spark, stream_files, tmp_path, "beam_options", plan, random_batches(3),
                              delay=30 * SECOND, buckets=2)
    assert metrics["dropped_too_late"] == 0
    for _, g in panes.groupby(["k", "window_start"]):
        assert g["is_last"].tolist() == [False] * (len(g) - 1) + [True]


def test_the_docs_example_without_the_pass_before_the_operator(spark_undone, tmp_path):
    """docs/streaming.md 3.2's example ("The pass before the operator is a trade") as written:
    `explain` names the setting that took the pass away."""
    import contextlib
    import io
    import re

    import sqlflow
    from sqlflow.spark import conf

    doc = (Path(__file__).parents[2] / "docs" / "streaming.md").read_text()
    section = doc[doc.index("**The pass before the operator is a trade**"):doc.index("### 3.3")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    printed = re.search(r"prints, for the stage, `(.*?)`\.", section, re.S).group(1).replace("\n", " ")
    (tmp_path / "in").mkdir()
    spark_undone.readStream.schema("user STRING, ts TIMESTAMP").json(str(tmp_path / "in")) \
        .createOrReplaceTempView("clicks")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"spark": spark_undone, "sqlflow": sqlflow})
    cores = conf.cores(spark_undone)
    assert "(spark.sqlflow.streaming.combine false: its rows as they arrive, no pass before it)" in printed
    assert printed.replace("2 hash buckets", f"{cores} hash buckets").replace("2 cores", f"{cores} cores") \
        in out.getvalue()
