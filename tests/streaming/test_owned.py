"""The owned-sink executor on Spark (foreachBatch over files fed one per micro-batch): its panes
equal `Engine.advance` over the same micro-batches and the TIMELINE replay of its own watermark
log; the streaming DataFrame's operator gives the same panes on the same batches; state versions
under the checkpoint, pruned; sqlflow.sql results and file sinks."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.classic.dataframe import DataFrame

from sqlflow import ast
from sqlflow.columns import EVENT_TIME
from sqlflow.engine import state_codec
from sqlflow.spark import streaming as S
from sqlflow.spark.conf import STREAMING_DRIVER_ROWS as DRIVER_ROWS
from sqlflow.spark.streaming import owned
from sqlflow.time import MINUTE, NEG_INF, SECOND

from .harness import advance_oracle, collect_panes, replay_oracle, source, write_batches
from .test_equivalence import RETR, paper_batches, plan_of, random_batches

D = ast.Duration


def owned_log(query) -> list[dict]:
    run = owned.run_of(query)
    return [{"batch": b["batchId"], "p": b["batch_time"], "wm": b["watermark"], "rows": b["input_rows"],
             "finished": bool(b["finished"])} for b in run.progress]


def run_owned(spark, files, plan, batches, *, delay, name, tmp_path):
    write_batches(files, batches)
    stream = S.build_stream(source(spark, files), plan, delay=delay, finish_dir=str(tmp_path / "finish"))
    query = S.start(stream, format="memory", query_name=name, checkpoint=str(tmp_path / "cp"),
                    available_now=True, finish=True, executor="owned")
    assert owned.run_of(query) is not None
    return collect_panes(spark, name), query, owned_log(query)


@pytest.fixture(params=["driver", "distributed"])
def step(request, spark):
    """Each micro-batch through the driver-local step (this size of batch's default) or, with
    `spark.sqlflow.streaming.driverStepRows = 0`, the distributed one (docs/streaming.md 3.0)."""
    spark.conf.set(DRIVER_ROWS, "0" if request.param == "distributed" else "1000")
    yield request.param
    spark.conf.unset(DRIVER_ROWS)


def driver_steps(query) -> list[int]:
    return [b["driver_steps"] for b in owned.run_of(query).progress]


# Each case on one step, the combined one on both (Spark's partials, pyarrow's): that the steps
# give the same panes on any input is the property of tests/streaming/test_owned_step.py
@pytest.mark.parametrize("case, step", [("fixed-early-late", "driver"), ("sessions-retracting", "distributed"),
                                        ("fixed-default-combined", "driver"),
                                        ("fixed-default-combined", "distributed")], indirect=["step"])
def test_owned_panes_equal_advance_and_the_timeline_replay(spark, stream_files, tmp_path, case, step):
    if case == "fixed-early-late":
        plan = plan_of(ast.Fixed(D(2 * MINUTE)), ast.WatermarkEarlyLate(early=ast.Period(D(MINUTE)),
                                                                      late=ast.Count(1)), lateness=5 * MINUTE)
        batches = paper_batches()
    elif case == "sessions-retracting":
        plan = plan_of(ast.Sessions(D(MINUTE)), ast.WatermarkEarlyLate(early=ast.Period(D(MINUTE)), late=ast.Watermark()),
                       mode=RETR, lateness=5 * MINUTE)
        batches = paper_batches()
    else:
        plan = plan_of(ast.Fixed(D(MINUTE)), None, lateness=MINUTE)
        batches = random_batches(3)
    panes, query, log = run_owned(spark, stream_files, plan, batches, delay=30 * SECOND, name=case.replace("-", "_"),
                                  tmp_path=tmp_path)
    assert log[-1]["finished"] and len(log) == len(batches) + 1
    assert [b["wm"] for b in log][0] == NEG_INF
    expected, engine_dropped = advance_oracle(plan, batches, log)
    replayed, replay_dropped = replay_oracle(plan, batches, log)
    pd.testing.assert_frame_equal(panes, expected[panes.columns], check_dtype=False)
    pd.testing.assert_frame_equal(panes, replayed[panes.columns], check_dtype=False)
    metrics = S.query_metrics(query)
    assert driver_steps(query) == [int(step == "driver")] * len(log)
    # the driver-local step read each data batch's parquet file itself (docs/streaming.md 3.0)
    assert [b["direct_reads"] for b in owned.run_of(query).progress] == [int(step == "driver")] * len(batches) + [0]
    assert metrics["dropped_too_late"] == engine_dropped == replay_dropped
    assert metrics["panes"] + metrics["retractions"] == len(panes)
    assert metrics["input_rows"] == sum(len(b) for b in batches)
    assert S.watermark_log(query) == [(b["p"], b["wm"]) for b in log if b["wm"] > NEG_INF]
    # versions under the checkpoint: the last KEEP_VERSIONS, each a parquet row per bucket
    versions = sorted((tmp_path / "cp" / owned.STATE_DIR).glob("v=*"))
    assert [v.name for v in versions] == [f"v={b['batch']}" for b in log[-owned.KEEP_VERSIONS:]]
    state = spark.read.parquet(str(versions[-1])).toPandas()
    assert set(state["__sqlflow_state_format"]) == {state_codec.FORMAT_VERSION}
    assert state["__sqlflow_s_windows"].sum() == 0  # finished: nothing is live


def test_owned_equals_the_operator_on_a_backlog(spark, stream_files, tmp_path):
    """The same files as a backlog (batches back to back, so the operator runs no batch without
    data in between, but one after the last, where the owned executor has none): with a trigger
    that follows the watermark (no processing-time firing the operator's extra batch could make),
    both executors give the same panes (sessions, retracting, late firings);
    only `emit_time` differs."""
    plan = plan_of(ast.Sessions(D(MINUTE)), ast.WatermarkEarlyLate(late=ast.Watermark()), mode=RETR,
                   lateness=5 * MINUTE)
    batches = random_batches(7, n_batches=4)
    ours, _, log = run_owned(spark, stream_files, plan, batches, delay=10 * SECOND, name="owned_backlog",
                             tmp_path=tmp_path)
    other = type(stream_files)(tmp_path / "theirs" / "input")
    write_batches(other, batches)
    stream = S.build_stream(source(spark, other), plan, delay=10 * SECOND, finish_dir=str(tmp_path / "theirs" / "fin"))
    S.start(stream, format="memory", query_name="operator_backlog", checkpoint=str(tmp_path / "theirs" / "cp"),
            available_now=True, finish=True, executor="operator")
    theirs = collect_panes(spark, "operator_backlog")
    cols = [c for c in ours.columns if c != "emit_time"]
    assert len(ours) > 10
    pd.testing.assert_frame_equal(ours[cols].sort_values(cols).reset_index(drop=True),
                                  theirs[cols].sort_values(cols).reset_index(drop=True), check_dtype=False)


def test_a_sqlflow_sql_result_to_a_parquet_sink(spark, stream_files, tmp_path, step):
    """INSERT-like use: a sqlflow.sql result (expressions over the aggregates, HAVING) written by
    the owned executor, one directory per micro-batch."""
    batches = [pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [10, 20, 30], "v": [1, 2, 3]}),
               pd.DataFrame({"k": ["a", "b"], EVENT_TIME: [70 * SECOND, 200 * SECOND], "v": [4, 5]}),
               pd.DataFrame({"k": ["c"], EVENT_TIME: [300 * SECOND], "v": [6]})]
    write_batches(stream_files, [b.assign(**{EVENT_TIME: b[EVENT_TIME] + 1_700_000_000 * SECOND}) for b in batches])
    src = spark.readStream.schema("k string, et long, v long").option("maxFilesPerTrigger", 1).parquet(
        str(stream_files.path)).selectExpr("k", "timestamp_micros(et) AS ts", "v")
    src.createOrReplaceTempView("owned_src")
    import sqlflow

    df = sqlflow.sql(spark, """SELECT k, SUM(v) * 10 AS total10 FROM owned_src
                               WATERMARK ts DELAY OF INTERVAL 1 SECOND
                               GROUP BY k HAVING SUM(v) > 1 WINDOW FIXED(SIZE 1m)""")
    text = sqlflow.explain("""SELECT k, SUM(v) AS total FROM owned_src WATERMARK ts DELAY OF INTERVAL 1 SECOND
                              GROUP BY k WINDOW FIXED(SIZE 1m)""", spark)
    assert ("executor: when sqlflow writes the sink (start, INSERT INTO): the operator above by default; with "
            "spark.sqlflow.streaming.executor = owned or auto, the owned-sink executor") in text
    out = tmp_path / "out"
    query = S.start(df, format="parquet", path=str(out), checkpoint=str(tmp_path / "cp"), available_now=True,
                    executor="owned")
    assert owned.run_of(query) is not None
    rows = spark.read.parquet(str(out)).orderBy("batch_id", "k", "total10").select("batch_id", "k", "total10")
    # W(1) = 30 us - 1 s closes nothing; W(2) = 200 s - 1 s closes [0, 60) (a 3, b 3) and [60, 120)
    # (a 4); [180, 240) and [300, 360) stay open (no finish); HAVING keeps SUM > 1
    assert [tuple(r) for r in rows.collect()] == [(2, "a", 30), (2, "a", 40), (2, "b", 30)]


def test_a_checkpoint_spark_wrote_goes_on_with_files_the_buckets_write(spark, tmp_path, monkeypatch):
    """A checkpoint pyarrow cannot open has its state versions written by Spark (one parquet
    dataset of all buckets, `SPARK_LAYOUT`); where it can, each bucket's call writes its own file
    (`BUCKET_LAYOUT`, one Spark job a batch). A run of the first kind restarted as the second
    reads the versions Spark wrote and gives the panes of an uninterrupted run (sessions,
    retracting with late firings, 3 buckets; every column but emit_time, the batches' wall-clock
    time)."""
    import json

    from sqlflow.spark.streaming.checkpoint_files import CheckpointFiles
    from sqlflow.udfs.batch_step import BUCKET_LAYOUT, SPARK_LAYOUT
    from tests.conftest import StreamFiles

    plan = plan_of(ast.Sessions(D(MINUTE)), ast.WatermarkEarlyLate(late=ast.Watermark()), mode=RETR,
                   lateness=5 * MINUTE)  # no processing-time firing: the two runs' batch times differ
    batches = random_batches(5, n_batches=4)

    def run(name: str, spark_first: bool) -> pd.DataFrame:
        files = StreamFiles(tmp_path / name / "input")
        out, cp, finish = tmp_path / name / "out", tmp_path / name / "cp", str(tmp_path / name / "finish")

        def start(**kw):
            stream = S.build_stream(source(spark, files), plan, delay=10 * SECOND, finish_dir=finish, buckets=3)
            return S.start(stream, format="parquet", path=str(out), checkpoint=str(cp), available_now=True,
                           executor="owned", **kw)

        write_batches(files, batches[:2])
        if spark_first:
            with monkeypatch.context() as patch:
                patch.setattr(CheckpointFiles, "opened_by_pyarrow", lambda self: False)
                start()
            books = [json.loads(b.read_text()) for b in (cp / owned.STATE_DIR).glob("v=*/_sqlflow.json")]
            assert books and {b["layout"] for b in books} == {SPARK_LAYOUT}
            assert all(list(v.glob("part-*.parquet")) for v in (cp / owned.STATE_DIR).glob("v=*"))
        write_batches(files, batches[2:])
        start(finish=True)
        last = max((cp / owned.STATE_DIR).glob("v=*"), key=lambda v: int(v.name[2:]))
        assert json.loads((last / owned.BOOK).read_text())["layout"] == BUCKET_LAYOUT
        assert sorted(f.name for f in last.glob("*.parquet")) == [f"bucket-{b:05d}.parquet" for b in range(3)]
        rows = spark.read.parquet(str(out)).drop("emit_time").toPandas()
        return rows.sort_values(list(rows.columns)).reset_index(drop=True)

    expected = run("uninterrupted", False)
    assert len(expected) > 10 and expected["is_retraction"].any()
    pd.testing.assert_frame_equal(run("restarted", True), expected, check_dtype=False)


@pytest.mark.parametrize("step", ["distributed"], indirect=True)
def test_a_sink_that_reads_some_panes_still_writes_every_buckets_state(spark, stream_files, tmp_path, step):
    """`console` shows the first 20 panes: its action stops after the first partition that holds
    them, so the buckets of the other partition would not run and their state version would lack
    a file. A job after it runs them: the next batch reads every bucket's state, and the counters
    count every pane (200 keys, one window each, fired in batch 2; 2 buckets, 2 partitions). The
    distributed step's case: the driver-local one writes every bucket's state before the sink."""
    base = 1_700_000_000 * SECOND
    keys = [f"k{i}" for i in range(200)]
    batches = [pd.DataFrame({"k": keys, EVENT_TIME: [base + SECOND] * 200, "v": [1] * 200}),
               pd.DataFrame({"k": ["k0"], EVENT_TIME: [base + 10 * MINUTE], "v": [1]}),
               pd.DataFrame({"k": ["k1"], EVENT_TIME: [base + 10 * MINUTE + SECOND], "v": [1]}),
               pd.DataFrame({"k": ["k2"], EVENT_TIME: [base + 30 * MINUTE], "v": [1]})]
    write_batches(stream_files, batches)
    stream = S.build_stream(source(spark, stream_files), plan_of(ast.Fixed(D(MINUTE))), delay=10 * SECOND,
                            buckets=2)
    query = S.start(stream, format="console", checkpoint=str(tmp_path / "cp"), available_now=True,
                    executor="owned")
    run = owned.run_of(query)
    assert [b["panes"] for b in run.progress] == [0, 0, 200, 0]
    assert driver_steps(query) == [int(step == "driver")] * 4
    last = tmp_path / "cp" / owned.STATE_DIR / f"v={len(batches) - 1}"
    assert sorted(f.name for f in last.glob("*.parquet")) == ["bucket-00000.parquet", "bucket-00001.parquet"]


@pytest.mark.parametrize("collect", ["limit", "whole"])
def test_the_driver_step_runs_batches_up_to_its_limit_of_rows(spark, stream_files, tmp_path, monkeypatch, collect):
    """`driverStepRows = 3`: a batch of at most 3 rows runs in the driver; a larger one is found
    by its collect's limit (4 rows) and runs distributed; the batch after a larger one runs
    distributed without trying (its rows are not read twice), and the one after that tries the
    driver again. The two steps share the state files, so the stream's panes are still
    `Engine.advance`'s over the same batches (FIXED, default trigger: the partials by pyarrow or
    by Spark, batch by batch; the finish batch, one marker row per bucket, in the driver).
    `whole`: the batches' files are small enough (here: any size) to be collected without the
    limit and counted after, with the same outcome; `limit`: none is."""
    base = 1_700_000_000 * SECOND
    sizes = [2, 5, 2, 2, 3]
    rng = np.random.default_rng(3)
    batches = [pd.DataFrame({"k": rng.choice(list("abc"), n), EVENT_TIME: base + i * MINUTE + rng.integers(0, MINUTE, n),
                             "v": rng.integers(1, 9, n)}) for i, n in enumerate(sizes)]
    plan = plan_of(ast.Fixed(D(MINUTE)), None, lateness=MINUTE)
    monkeypatch.setattr(owned, "DRIVER_STEP_BYTES_PER_ROW", 0 if collect == "limit" else 10**9)
    limits = []
    limit = DataFrame.limit
    monkeypatch.setattr(DataFrame, "limit", lambda self, n: limits.append(n) or limit(self, n))
    spark.conf.set(DRIVER_ROWS, "3")
    try:
        panes, query, log = run_owned(spark, stream_files, plan, batches, delay=10 * SECOND,
                                      name=f"driver_limit_{collect}", tmp_path=tmp_path)
    finally:
        spark.conf.unset(DRIVER_ROWS)
    assert driver_steps(query) == [1, 0, 0, 1, 1, 1]
    assert limits == ([4] * 5 if collect == "limit" else [])  # every batch tried but the one after 5 rows
    expected, _ = advance_oracle(plan, batches, log)
    pd.testing.assert_frame_equal(panes, expected[panes.columns], check_dtype=False)
    assert len(panes) == 11 and S.query_metrics(query)["driver_steps"] == 4


@pytest.mark.parametrize("value", ["lots", "-1"])
def test_a_driver_step_limit_that_is_not_a_number_of_rows_is_a_located_error(spark, value):
    from sqlflow.errors import SqlflowError
    from sqlflow.spark.conf import driver_step_rows

    spark.conf.set(DRIVER_ROWS, value)
    try:
        with pytest.raises(SqlflowError, match=rf"spark.sqlflow.streaming.driverStepRows must be a number of rows "
                                               rf"\(0: never\), not '{value}'"):
            driver_step_rows(spark)
    finally:
        spark.conf.unset(DRIVER_ROWS)


class Crash(Exception):
    pass


def test_a_failure_at_any_point_loses_and_duplicates_nothing(spark, tmp_path, step):
    """One run fails three times (four on the driver-local step), each failure followed by a
    restart from the checkpoint: in micro-batch 1 mid-batch, in batch 2 after its state version
    and the sink are written (one job; the driver-local step: its panes to the version's outbox)
    but before the bookkeeping that marks the version complete, in batch 3 after the bookkeeping
    before Spark's commit; on the driver-local step, in batch 4 after Spark's commit, as its
    panes' delivery begins (the failure surfaces in the next batch, and the restart writes them
    from the outbox). The sink then holds exactly the rows of an
    uninterrupted run (every column but emit_time, the batch's wall-clock time), one directory
    per batch, none twice. Partial aggregates (FIXED, default trigger; Spark's in the distributed
    step, pyarrow's in the driver-local one)."""
    from tests.conftest import StreamFiles

    plan = plan_of(ast.Fixed(D(MINUTE)), None, lateness=5 * MINUTE)
    batches = random_batches(11, n_batches=5)
    faults = {1: "mid-batch", 2: "after-outputs", 3: "after-sink"}
    if step == "driver":
        faults[4] = "before-delivery"

    def run(name: str, failing: bool):
        files = StreamFiles(tmp_path / name / "input")
        write_batches(files, batches)
        out, cp = tmp_path / name / "out", str(tmp_path / name / "cp")

        def start():
            stream = S.build_stream(source(spark, files), plan, delay=10 * SECOND,
                                    finish_dir=str(tmp_path / name / "finish"))
            return S.start(stream, format="parquet", path=str(out), checkpoint=cp, available_now=True, finish=True,
                           executor="owned")

        pending = dict(faults) if failing else {}

        def fail(at, batch_id):
            if pending.get(batch_id) == at:
                del pending[batch_id]
                raise Crash(f"injected at {at} of batch {batch_id}")

        owned.fault = fail
        try:
            for batch_id, at in faults.items() if failing else ():
                with pytest.raises(Exception, match=f"injected at {at} of batch {batch_id}"):
                    start()
                committed = (tmp_path / name / "cp" / "commits" / str(batch_id)).exists()
                assert committed == (at == "before-delivery")
                if committed:  # the panes wait in the version's outbox, not in the sink
                    assert (tmp_path / name / "cp" / owned.STATE_DIR / f"v={batch_id}" / owned.OUTBOX).exists()
                    assert not (out / f"batch_id={batch_id}").exists()
            start()
        finally:
            owned.fault = None
        assert not pending
        rows = spark.read.parquet(str(out)).drop("emit_time").toPandas()
        return rows.sort_values(list(rows.columns)).reset_index(drop=True)

    expected = run("uninterrupted", False)
    assert len(expected) > 10 and set(expected["batch_id"]) >= {1, 2, 3}
    pd.testing.assert_frame_equal(run("interrupted", True), expected, check_dtype=False)


def test_a_batchs_panes_are_in_the_sink_when_the_query_says_it_processed_them(spark, stream_files, tmp_path,
                                                                             monkeypatch):
    """The driver-local step's panes are written to the sink in a thread as the batch function
    returns (delivery after the batch): a live query's `processAllAvailable` and `stop` return
    only once they are there, however long the write takes, and a write that fails is the
    query's error there (its panes stay in the version's outbox for the next run). The thread
    builds no DataFrame (that would make the batch's session the active one of every thread,
    the user's included, while it runs)."""
    import contextlib
    import threading
    import time

    from pyspark.sql import SparkSession

    monkeypatch.setattr(owned, "fault", lambda at, batch_id: time.sleep(0.5) if at == "before-delivery" else None)
    built_in = []
    frame = owned.local_frame

    def recorded(*args, **kwargs):
        built_in.append(threading.current_thread().name)
        return frame(*args, **kwargs)

    monkeypatch.setattr(owned, "local_frame", recorded)
    write_batches(stream_files, [pd.DataFrame({"k": ["a"], EVENT_TIME: [10 * SECOND], "v": [1]})])
    plan = plan_of(ast.Fixed(D(MINUTE)), None)
    out, cp = tmp_path / "out", tmp_path / "cp"

    def start(**how):
        stream = S.build_stream(source(spark, stream_files), plan, delay=SECOND, finish_dir=str(tmp_path / "finish"))
        return S.start(stream, format="parquet", path=str(out), checkpoint=str(cp), executor="owned", **how)

    query = start()
    try:
        assert isinstance(query, owned.OwnedQuery)
        query.processAllAvailable()
        assert (out / "batch_id=0").exists() and not (cp / owned.STATE_DIR / "v=0" / owned.OUTBOX).exists()
        write_batches(stream_files, [pd.DataFrame({"k": ["b"], EVENT_TIME: [200 * SECOND], "v": [2]})])
        query.processAllAvailable()
        assert (out / "batch_id=1").exists()

        def failing(at, batch_id):
            if at == "before-delivery":
                raise RuntimeError(f"the sink failed at batch {batch_id}")

        monkeypatch.setattr(owned, "fault", failing)
        # W(2) = 200 s - 1 s closes a's [0 s, 60 s)
        write_batches(stream_files, [pd.DataFrame({"k": ["c"], EVENT_TIME: [400 * SECOND], "v": [3]})])
        with pytest.raises(Exception, match="the sink failed at batch 2"):
            query.processAllAvailable()
        assert (cp / owned.STATE_DIR / "v=2" / owned.OUTBOX).exists() and not (out / "batch_id=2").exists()
        with pytest.raises(Exception, match="the sink failed at batch 2"):  # stopped, and says so again
            query.stop()
        assert not query.isActive
    finally:
        monkeypatch.setattr(owned, "fault", None)
        if query.isActive:
            with contextlib.suppress(Exception):
                query.stop()
    # the next run of the checkpoint writes them as it starts, with no batch to run
    start(available_now=True)
    assert not (cp / owned.STATE_DIR / "v=2" / owned.OUTBOX).exists()
    assert [tuple(r) for r in spark.read.parquet(str(out)).select("batch_id", "k", "total").collect()] == [(2, "a", 1)]
    assert len(built_in) >= 4 and not [name for name in built_in if name.startswith("sqlflow-delivery")]
    assert SparkSession.getActiveSession() is spark


def test_the_drivers_rows_go_to_tasks_small_enough_for_spark_not_to_warn(spark):
    """`local_frame` sends the driver's Arrow table as one batch a partition, which each task
    carries: at most `LOCAL_TASK_BYTES` a batch (Spark warns of every task above 1000 KiB, one
    line a batch of a large stream's panes), else the partitions asked for; the rows as they were."""
    import pyarrow as pa
    from pyspark.sql import types as T

    n = 300_000
    table = pa.table({"k": pa.array(np.arange(n) % 977, pa.int64()), "v": pa.array(np.arange(n, dtype=np.float64))})
    schema = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.DoubleType())])
    assert table.nbytes == 4_800_000
    big = owned.local_frame(spark, table, schema, 2)
    assert big.rdd.getNumPartitions() == 7  # 4,800,000 bytes in batches of at most 786,432
    assert big.agg({"v": "sum"}).first()[0] == float(n * (n - 1) // 2) and big.count() == n
    assert owned.local_frame(spark, table.slice(0, 1000), schema, 2).rdd.getNumPartitions() == 2


def test_the_documented_example_runs_and_goes_on_from_its_checkpoint(spark, tmp_path, repo_root):
    """docs/streaming.md 3.0's example as written (paths replaced): two files, then a third and
    the same code again: the second run goes on from the checkpoint, so the sink holds each
    window's pane once, in the batch that emitted it."""
    import re

    from tests.conftest import StreamFiles

    text = (repo_root / "docs" / "streaming.md").read_text(encoding="utf-8")
    section = text[text.index("### 3.0 The owned-sink executor"):text.index("**When panes fire**")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    for path, name in (("/data/clicks-per-minute", "out"), ("/data/checkpoints/clicks", "cp"), ("/data/clicks", "in")):
        code = code.replace(path, str(tmp_path / name))
    t0 = pd.Timestamp("2024-05-01 09:00", tz="UTC")
    files = StreamFiles(tmp_path / "in")

    def clicks(rows):
        return pd.DataFrame({"user": [u for u, _, _ in rows],
                             "ts": (t0 + pd.to_timedelta([s for _, s, _ in rows], unit="s")).astype("datetime64[us, UTC]"),
                             "amount": [a for _, _, a in rows]})

    # batch N is judged against W(N-1) and steps to W(N) = the largest event time before N - 10 s
    files.write(clicks([("ann", 5, 3), ("bob", 20, 4), ("ann", 50, 1)]))  # batch 0: W none
    files.write(clicks([("ann", 75, 2), ("bob", 110, 6)]))  # batch 1: W 0:40, nothing ends
    exec(code, {"spark": spark})
    assert spark.read.parquet(str(tmp_path / "out")).count() == 0
    files.write(clicks([("bob", 130, 5)]))  # batch 2: W 1:40 passes [0, 1m)
    files.write(clicks([("ann", 200, 7)]))  # batch 3: W 2:00 passes [1m, 2m); [3m, 4m) stays open
    exec(code, {"spark": spark})
    rows = spark.read.parquet(str(tmp_path / "out")).orderBy("window_start", "user").collect()
    got = [(r["user"], r["n"], r["total"], (pd.Timestamp(r["window_start"], tz="UTC") - t0).total_seconds(),
            r["batch_id"]) for r in rows]
    assert got == [("ann", 2, 4, 0, 2), ("bob", 1, 4, 0, 2), ("ann", 1, 2, 60, 3), ("bob", 1, 6, 60, 3)]


@pytest.mark.parametrize("executor", ["owned", "operator"])
def test_finishing_a_stream_built_without_a_finish_directory_says_how_to_build_one(spark, stream_files, executor):
    """`start(df, finish=True)` of a `sqlflow.sql` stream built while no finish directory was set:
    a located refusal, before anything starts, naming the setting for Python and SQL."""
    import sqlflow
    from sqlflow.errors import SqlflowUnsupportedError

    stream_files.write(pd.DataFrame({"k": ["a"], "ts": ["2024-01-01 00:00:10"]}), fmt="json")
    spark.readStream.schema("k string, ts timestamp").json(str(stream_files.path)).createOrReplaceTempView("unfinished")
    df = sqlflow.sql(spark, "SELECT k, COUNT(*) AS n FROM unfinished WATERMARK ts DELAY OF INTERVAL 1 MINUTE "
                            "GROUP BY k WINDOW FIXED(SIZE 1m)")
    with pytest.raises(SqlflowUnsupportedError) as refused:
        S.start(df, format="memory", query_name=f"unfinished_{executor}", available_now=True, finish=True,
                executor=executor)
    assert str(refused.value).startswith("sqlflow: STREAM: finish needs a stream built with a finish directory")
    assert 'spark.conf.set("spark.sqlflow.streaming.finishDir", path) in Python, SET in SQL' in str(refused.value)
    assert not spark.streams.active


def sql_source(spark, stream_files, batches, view):
    """`batches` (k, seconds since 2023-11-14 22:13:20 UTC, v) as parquet files read one per
    micro-batch, the view `view` over them with `ts` a TIMESTAMP."""
    base = 1_700_000_000 * SECOND
    for rows in batches:
        stream_files.write(pd.DataFrame({"k": [r[0] for r in rows], "et": [base + r[1] * SECOND for r in rows],
                                         "v": [r[2] for r in rows]}))
    spark.readStream.schema("k string, et long, v long").option("maxFilesPerTrigger", 1).parquet(
        str(stream_files.path)).selectExpr("k", "timestamp_micros(et) AS ts", "v").createOrReplaceTempView(view)


def test_a_sqlflow_sql_result_that_renames_the_panes_on_both_steps(spark, stream_files, tmp_path, step):
    """A statement that only picks and renames the panes' columns: the driver-local step gives
    its rows by pyarrow (`statement_projection`, a SUM's ANSI overflow flag checked by pyarrow),
    the distributed step by Spark; the same rows, the statement's names."""
    import sqlflow

    sql_source(spark, stream_files, [[("a", 1, 1), ("a", 2, 2), ("b", 3, 3)], [("a", 70, 4), ("b", 200, 5)],
                                     [("c", 300, 6)]], "renamed_src")
    df = sqlflow.sql(spark, """SELECT k AS key, SUM(v) AS total, COUNT(*) AS n FROM renamed_src
                               WATERMARK ts DELAY OF INTERVAL 1 SECOND GROUP BY k WINDOW FIXED(SIZE 1m)""")
    query = S.start(df, format="parquet", path=str(tmp_path / "out"), checkpoint=str(tmp_path / "cp"),
                    available_now=True, executor="owned")
    run = owned.run_of(query)
    out = spark.read.parquet(str(tmp_path / "out"))
    assert out.columns[:3] == ["key", "total", "n"]
    # W(2) = 200 s - 1 s closes [0, 60) (a 3, b 3) and [60, 120) (a 4)
    got = sorted((r["key"], r["total"], r["n"], r["window_start"].timestamp() - 1_699_999_980) for r in out.collect())
    assert got == [("a", 3, 2, 0), ("a", 4, 1, 60), ("b", 3, 1, 0)]
    assert driver_steps(query) == [int(step == "driver")] * 3
    if step == "driver":
        assert run.final_columns[0][:3] == ["__sqlflow_k0", "__sqlflow_agg0", "__sqlflow_agg1"]


def test_a_bigint_sum_past_its_range_is_sparks_overflow_error_on_both_steps(spark, stream_files, tmp_path, step):
    """SUM of BIGINTs past 2^63 - 1 in ANSI mode (Spark 4's default): Spark's ARITHMETIC_OVERFLOW
    naming the call, whichever step ran the batch (the driver-local one projects a batch whose
    panes hold no overflow by pyarrow, this one by Spark). The two rows in two batches: within
    one batch, the partial aggregate's own overflow is a refusal of its own."""
    import sqlflow

    big = 2**63 - 1
    sql_source(spark, stream_files, [[("a", 1, big), ("b", 3, 5)], [("a", 2, big)], [("c", 300, 1)], [("c", 360, 1)]],
               "overflow_src")
    df = sqlflow.sql(spark, """SELECT k, SUM(v) AS s FROM overflow_src
                               WATERMARK ts DELAY OF INTERVAL 1 SECOND GROUP BY k WINDOW FIXED(SIZE 1m)""")
    with pytest.raises(Exception) as failed:
        S.start(df, format="parquet", path=str(tmp_path / "out"), checkpoint=str(tmp_path / "cp"),
                available_now=True, executor="owned")
    text = str(failed.value)
    assert "ARITHMETIC_OVERFLOW" in text and "SUM(v) overflows BIGINT" in text


def test_the_statement_over_the_panes_by_pyarrow_only_where_it_picks_and_renames(spark):
    from pyspark.sql import types as T

    panes = T.StructType([T.StructField("__k0", T.StringType()), T.StructField("agg", T.LongType(), False),
                          T.StructField("window_start", T.TimestampType())])

    def over(sql):
        def final(frame):
            frame.createOrReplaceTempView("__panes_of_the_test")
            return frame.sparkSession.sql(sql.replace("P", "__panes_of_the_test"))
        found = owned.statement_projection(final, spark, panes)
        return None if found is None else (found[0], [(f.name, f.dataType.simpleString(), f.nullable)
                                                      for f in found[1].fields])

    assert over("SELECT __k0 AS `user`, AGG AS n, window_start FROM P") == (
        ["__k0", "agg", "window_start"], [("user", "string", True), ("n", "bigint", False),
                                          ("window_start", "timestamp", True)])
    assert over("SELECT window_start, __k0 AS a, __k0 AS b FROM P") == (
        ["window_start", "__k0", "__k0"], [("window_start", "timestamp", True), ("a", "string", True),
                                           ("b", "string", True)])
    assert over("SELECT * FROM P")[0] == ["__k0", "agg", "window_start"]
    for sql in ["SELECT __k0, agg * 10 AS n FROM P", "SELECT __k0 FROM P WHERE agg > 1", "SELECT DISTINCT __k0 FROM P",
                "SELECT __k0, CAST(agg AS INT) AS n FROM P", "SELECT __k0 FROM P ORDER BY agg", "SELECT __k0 FROM P LIMIT 3"]:
        assert over(sql) is None, sql


def finished_within(seconds: float, start):
    """`start()` (a stream started with `available_now`, which returns once the stream has ended)
    run in a thread: its query, or the test fails after `seconds` (a stream that hangs fails its
    test instead of hanging the run)."""
    import threading

    done: dict = {}

    def run() -> None:
        try:
            done["query"] = start()
        except Exception as error:  # noqa: BLE001  (re-raised in the test's thread)
            done["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the stream did not end within {seconds} s: it hangs"
    if "error" in done:
        raise done["error"]
    return done["query"]


@pytest.mark.parametrize("sink, step", [("memory", "distributed"), ("memory", "driver"), ("console", "distributed")],
                         indirect=["step"])
def test_a_statement_over_the_panes_to_a_sink_that_collects_ends_with_exact_counters(spark, stream_files, tmp_path,
                                                                                     sink, step):
    """A `sqlflow.sql` result computed over the panes (an expression, HAVING: Spark runs it over a
    view of each batch's panes) to a sink whose action collects (memory: Arrow; console: `show`).
    The distributed step counts the batch by observing the buckets' output; an action on the
    DataFrame `spark.sql` made over the view would never deliver that observation (Spark finds it
    in the action's parsed plan, where the view is a name), and the stream would wait for it
    forever. It ends, with the statement's rows and the exact counters (the parquet sink's case:
    `test_a_sqlflow_sql_result_to_a_parquet_sink`)."""
    import sqlflow

    name = f"over_panes_{sink}_{step}"
    sql_source(spark, stream_files, [[("a", 1, 1), ("a", 2, 2), ("b", 3, 3)], [("a", 70, 4), ("b", 200, 5)],
                                     [("c", 300, 6)]], f"{name}_src")
    df = sqlflow.sql(spark, f"""SELECT k, SUM(v) * 10 AS total10 FROM {name}_src
                                WATERMARK ts DELAY OF INTERVAL 1 SECOND
                                GROUP BY k HAVING SUM(v) > 1 WINDOW FIXED(SIZE 1m)""")
    query = finished_within(150, lambda: S.start(df, format=sink, query_name=name, checkpoint=str(tmp_path / "cp"),
                                                 available_now=True, executor="owned"))
    assert driver_steps(query) == [int(step == "driver")] * 3
    metrics = S.query_metrics(query)
    # W(2) = 200 s - 1 s closes [0, 60) (a 3, b 3) and [60, 120) (a 4); [180, 240) and [300, 360)
    # stay open: 3 panes, live in 2 windows (b's and c's) at the end
    assert {k: metrics[k] for k in ("input_rows", "panes", "retractions", "dropped_too_late", "state_keys",
                                    "state_windows")} == {"input_rows": 6, "panes": 3, "retractions": 0,
                                                          "dropped_too_late": 0, "state_keys": 2, "state_windows": 2}
    if sink == "memory":
        rows = spark.table(name).selectExpr("k", "total10", "unix_seconds(window_start) - 1699999980 AS start")
        assert sorted(tuple(r) for r in rows.collect()) == [("a", 30, 0), ("a", 40, 60), ("b", 30, 0)]


@pytest.mark.parametrize("step", ["distributed"], indirect=True)
@pytest.mark.parametrize("spark_delivers", [True, False])
def test_counters_an_action_does_not_deliver_are_counted_again_or_a_located_error(spark, stream_files, tmp_path,
                                                                                  monkeypatch, step, spark_delivers):
    """The distributed step never waits for its counters without a bound: where the sink's action
    does not deliver them (here the statement's DataFrame as `spark.sql` made it, the cause of the
    hang above), it waits `COUNTERS_WAIT` seconds, then counts the buckets' output again by a
    write: the same rows, the exact counters. Where that does not deliver them either, the batch
    fails with a located error naming it, not committed."""
    import sqlflow

    from sqlflow.errors import SqlflowExecutionError

    name = f"undelivered_{spark_delivers}"
    sql_source(spark, stream_files, [[("a", 1, 1), ("b", 3, 3)], [("a", 70, 4)], [("c", 300, 6)]], f"{name}_src")
    df = sqlflow.sql(spark, f"""SELECT k, SUM(v) * 10 AS total10 FROM {name}_src
                                WATERMARK ts DELAY OF INTERVAL 1 SECOND GROUP BY k WINDOW FIXED(SIZE 1m)""")
    monkeypatch.setattr(owned, "delivering", lambda frame: frame)
    monkeypatch.setattr(owned, "COUNTERS_WAIT", 0.5)
    waits = []

    def delivered(observation, spark, seconds):
        waits.append(seconds)
        return spark_delivers and owned_delivered(observation, spark, seconds)

    owned_delivered = owned.delivered
    monkeypatch.setattr(owned, "delivered", delivered)
    start = lambda: S.start(df, format="memory", query_name=name, checkpoint=str(tmp_path / "cp"),  # noqa: E731
                            available_now=True, executor="owned")
    if not spark_delivers:
        with pytest.raises(Exception) as failed:
            finished_within(150, start)
        assert isinstance(failed.value, SqlflowExecutionError) or "SqlflowExecutionError" in str(failed.value)
        assert "did not get the counters of micro-batch 0 from Spark within 0.5 s" in str(failed.value)
        assert waits == [0.5, 0.5]
        return
    query = finished_within(150, start)
    metrics = S.query_metrics(query)
    # the first wait of each batch gives nothing (the statement's own DataFrame), the write's counts
    assert len(waits) == 6
    # W(2) = 70 s - 1 s closes [0, 60) (a 1, b 3); [60, 120) and [300, 360) stay open
    assert [b["input_rows"] for b in owned.run_of(query).progress] == [2, 1, 1]
    assert [b["panes"] for b in owned.run_of(query).progress] == [0, 0, 2]
    assert {k: metrics[k] for k in ("input_rows", "panes", "retractions", "state_keys", "state_windows")} == {
        "input_rows": 4, "panes": 2, "retractions": 0, "state_keys": 2, "state_windows": 2}
    assert sorted(tuple(r) for r in spark.table(name).select("k", "total10").collect()) == [("a", 10), ("b", 30)]
