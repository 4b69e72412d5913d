"""Reliability of the streaming path: exactly-once across a restart, bounded state, late rows
counted, availableNow with and without finish.

Exactly once is tested twice: in this process, on the checkpoint a stop leaves and on the ones a
kill leaves after the operator's state is committed but before the sink's commit, and between
the sink's commit and Spark's commit log (made by deleting those log entries), in the default
run; and across a real kill -9 of the job's driver with its JVM, in the release tier
(`--release`)."""
import os
import re
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.spark import streaming as S
from sqlflow.time import MINUTE, SECOND

from .harness import collect_panes, source, write_batches

D = ast.Duration
JOB = Path(__file__).with_name("crash_job.py")
T0 = 1_700_000_000 * SECOND - (1_700_000_000 * SECOND) % (60 * MINUTE)  # an hour boundary


def at(minutes: float) -> int:
    return T0 + int(minutes * MINUTE)


def crash_batches(n: int = 8) -> list[pd.DataFrame]:
    rng = np.random.default_rng(7)
    out = []
    for b in range(n):
        et = at(b) + rng.integers(-3 * MINUTE, MINUTE, 10)
        out.append(pd.DataFrame({"k": rng.choice(list("pqrs"), 10), EVENT_TIME: et, "v": rng.integers(1, 9, 10)}))
    return out


def sink_rows(spark, path) -> list[tuple]:
    """The file sink's rows (through _spark_metadata), emit_time left out: it is wall-clock time."""
    df = spark.read.parquet(str(path)).drop("emit_time")
    return sorted(tuple(r) for r in df.collect())


def reference_run(spark, base: Path, batches: list[pd.DataFrame]) -> list[tuple]:
    """The sink of the crash job run without interruption, in this process, one file per batch."""
    from tests.conftest import StreamFiles

    files = StreamFiles(base / "input")
    write_batches(files, batches)
    job = runpy.run_path(str(JOB))
    job["run"](spark, str(files.path), str(base / "out"), str(base / "cp"))
    return sink_rows(spark, base / "out")


def micro_batches(cp: Path) -> list[list[str]]:
    """The input files each data batch of a run read, from its checkpoint: the offset log's end
    offset of the file source per batch, and the source's own log of the files at each offset."""
    import json

    groups, last = [], -1
    for n in sorted(int(f.name) for f in (cp / "offsets").iterdir() if f.name.isdigit()):
        end = json.loads((cp / "offsets" / str(n)).read_text().splitlines()[2])["logOffset"]
        if end > last:
            entries = [(cp / "sources" / "0" / str(e)).read_text().splitlines()[1:] for e in range(last + 1, end + 1)]
            groups.append([json.loads(line)["path"].rsplit("/", 1)[1] for lines in entries for line in lines])
            last = end
    return groups


def one_file_each(n: int) -> list[list[str]]:
    return [[f"part-{i + 1:05d}.parquet"] for i in range(n)]


@pytest.fixture(scope="module")
def crash_reference(spark, tmp_path_factory) -> list[tuple]:
    """The sink of the crash job run once without interruption: one input file per micro-batch."""
    base = tmp_path_factory.mktemp("crash-ref")
    expected = reference_run(spark, base, crash_batches())
    assert micro_batches(base / "cp") == one_file_each(8)
    assert len(expected) >= 20
    return expected


def expected_after_restart(spark, crash_reference, cp: Path, base: Path) -> list[tuple]:
    """What an uninterrupted run over the restarted run's micro-batches writes. A kill after Spark's
    file source logged its next file but before the offset log did makes the restarted batch read
    that file and the next one together (docs/streaming.md 7): the panes are then those of an
    uninterrupted run over those batches, which this computes."""
    groups = micro_batches(cp)
    batches = crash_batches()
    if groups == one_file_each(len(batches)):
        return crash_reference
    by_file = {g[0]: b for g, b in zip(one_file_each(len(batches)), batches)}
    assert sorted(f for g in groups for f in g) == sorted(by_file), "every input file read exactly once"
    return reference_run(spark, base, [pd.concat([by_file[f] for f in g], ignore_index=True) for g in groups])


def start_job(run_dir: Path) -> tuple[subprocess.Popen, list[str], dict]:
    args = [sys.executable, str(JOB), str(run_dir / "input"), str(run_dir / "out"), str(run_dir / "cp")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    return proc, args, env


def kill_when(proc: subprocess.Popen, path: Path, poll: float) -> None:
    """SIGKILL the job's whole process group (driver JVM, Python workers) once `path` exists."""
    deadline = time.time() + 600
    while not path.exists():
        assert proc.poll() is None and time.time() < deadline, "the job ended before it could be killed"
        time.sleep(poll)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def batch_watermark_ms(cp: Path, batch: int) -> int:
    """The watermark Spark logged for a batch (its offset log entry)."""
    import json

    return json.loads((cp / "offsets" / str(batch)).read_text().splitlines()[1])["batchWatermarkMs"]


def logged(cp: Path, log: str) -> list[int]:
    """The batch ids in a checkpoint's offset or commit log."""
    return sorted(int(f.name) for f in (cp / log).iterdir() if f.name.isdigit())


def run_in_process(spark, run_dir: Path, finish: bool, buckets: int = 3) -> None:
    """The crash job over the files now in run_dir/input, in this process (availableNow: it stops
    when they are read), finishing the input if `finish`. Without `finish`, no batch without data
    follows the last one: a run that is stopped or killed while its input goes on has none, and
    its watermarks are those of an uninterrupted run."""
    if not finish:
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        try:
            _run_job(spark, run_dir, False, buckets)
        finally:
            spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    else:
        _run_job(spark, run_dir, True, buckets)


def _run_job(spark, run_dir: Path, finish: bool, buckets: int) -> None:
    job = runpy.run_path(str(JOB))
    src = (spark.readStream.schema("k string, et long, v long").option("maxFilesPerTrigger", 1)
           .parquet(str(run_dir / "input")).withColumnRenamed("et", EVENT_TIME))
    cp = str(run_dir / "cp")
    stream = S.build_stream(src, job["plan"](), delay=10 * SECOND, buckets=buckets, finish_dir=cp + "-finish")
    S.start(stream, format="parquet", path=str(run_dir / "out"), checkpoint=cp, available_now=True, finish=finish)


def test_exactly_once_across_a_stop_and_restart(spark, crash_reference, stream_files, tmp_path):
    """Stopped after batch 3 (state, timers and output of batches 0-3 on disk), restarted from the
    checkpoint once the rest of the input is there: the sink holds exactly the uninterrupted run's
    panes. A restart with another bucket count first is refused in its first batch, naming both
    counts (each moved key's state would be looked for in another bucket), and writes nothing:
    `start` raises the operator's error itself, not Spark's stack around it."""
    from sqlflow.errors import SqlflowExecutionError

    run_dir = tmp_path / "restart"
    files = type(stream_files)(run_dir / "input")
    write_batches(files, crash_batches()[:4])
    run_in_process(spark, run_dir, finish=False)
    assert logged(run_dir / "cp", "commits") == logged(run_dir / "cp", "offsets") == [0, 1, 2, 3]
    write_batches(files, crash_batches()[4:])
    with pytest.raises(SqlflowExecutionError) as refused:
        run_in_process(spark, run_dir, finish=True, buckets=2)
    assert re.fullmatch(
        "sqlflow: STREAM: the checkpoint's state of bucket [012] was written by a stream of 3 hash buckets of keys, "
        "and this query has 2: each key's state would be looked for in another bucket and lost\n"
        "set spark.sqlflow.streaming.buckets = 3 to go on from this checkpoint, or start from a new one",
        str(refused.value))
    assert logged(run_dir / "cp", "commits") == [0, 1, 2, 3]
    run_in_process(spark, run_dir, finish=True)
    assert micro_batches(run_dir / "cp") == one_file_each(8)
    assert sink_rows(spark, run_dir / "out") == crash_reference


def test_exactly_once_after_the_sinks_commit_without_sparks(spark, crash_reference, stream_files, tmp_path):
    """The checkpoint a kill between the file sink's commit of batch 3 and Spark's commit log
    leaves (the sink's metadata and the state of batch 3 written, commits/3 not), made by deleting
    commits/3 after a stop: the restart re-runs batch 3, the sink skips it without executing it,
    so Spark's watermark for batch 4 is batch 3's (SPARK-18513), and the panes are still the
    uninterrupted run's (the operator's watermark comes from the heartbeats in its state)."""
    run_dir = tmp_path / "uncommitted"
    files = type(stream_files)(run_dir / "input")
    write_batches(files, crash_batches()[:4])
    run_in_process(spark, run_dir, finish=False)
    cp = run_dir / "cp"
    assert logged(cp, "commits") == logged(cp, "offsets") == [0, 1, 2, 3]
    assert (run_dir / "out" / "_spark_metadata" / "3").exists()
    for name in ("3", ".3.crc"):  # the entry and its checksum, as the kill would have left neither
        (cp / "commits" / name).unlink()
    write_batches(files, crash_batches()[4:])
    run_in_process(spark, run_dir, finish=True)
    assert batch_watermark_ms(cp, 4) == batch_watermark_ms(cp, 3)
    assert sink_rows(spark, run_dir / "out") == crash_reference


def test_exactly_once_after_the_state_before_the_sink(spark, crash_reference, stream_files, tmp_path):
    """The checkpoint a kill after the operator's state of batch 3 is committed (its tasks commit
    the state store as they end) but before the file sink commits batch 3 (its metadata log entry,
    written by the driver after the tasks) leaves: made by deleting the sink's entry and the
    commit log's after a stop. The restart re-runs batch 3 from the state of batch 2 (Spark loads
    the version before the batch, and rewrites the batch's), the sink writes it again, and the
    panes are the uninterrupted run's: none lost, none twice."""
    run_dir = tmp_path / "unsunk"
    files = type(stream_files)(run_dir / "input")
    write_batches(files, crash_batches()[:4])
    run_in_process(spark, run_dir, finish=False)
    cp, out = run_dir / "cp", run_dir / "out"
    assert logged(cp, "commits") == logged(cp, "offsets") == [0, 1, 2, 3]
    state_versions = {f.name.split(".")[0] for f in (cp / "state").rglob("*") if f.suffix in (".zip", ".changelog")}
    assert "4" in state_versions  # batch 3's state (version 4: Spark's versions count from 1)
    for log, name in ((out / "_spark_metadata", "3"), (cp / "commits", "3")):
        for f in (name, f".{name}.crc"):
            (log / f).unlink(missing_ok=f.endswith(".crc"))
    write_batches(files, crash_batches()[4:])
    run_in_process(spark, run_dir, finish=True)
    assert logged(cp, "commits")[:5] == [0, 1, 2, 3, 4]
    assert sink_rows(spark, out) == crash_reference


@pytest.mark.slow
@pytest.mark.release
def test_exactly_once_across_kill_9(spark, crash_reference, stream_files, tmp_path):
    """Killed while batch 4 runs (state, timers and output of batches 0-3 exist), restarted from
    the checkpoint: Spark re-runs batch 4, and the sink holds exactly the uninterrupted run's panes."""
    run_dir = tmp_path / "crash"
    write_batches(type(stream_files)(run_dir / "input"), crash_batches())
    proc, args, env = start_job(run_dir)
    kill_when(proc, run_dir / "cp" / "commits" / "3", poll=0.05)
    assert not (run_dir / "cp" / "commits" / "7").exists(), "killed mid-stream"
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, timeout=600)
    assert b"DONE" in done.stdout
    expected = expected_after_restart(spark, crash_reference, run_dir / "cp", tmp_path / "reference")
    assert sink_rows(spark, run_dir / "out") == expected


@pytest.mark.slow
@pytest.mark.release
def test_exactly_once_when_killed_between_sink_and_commit(spark, crash_reference, stream_files, tmp_path):
    """Killed after the file sink committed batch k but before the commit log did: the restart
    re-runs batch k, the sink skips it without executing it, so Spark never sees its event times
    and its watermark for batch k + 1 is still batch k's (SPARK-18513, "known issue"). The
    operator takes the watermark from the heartbeats' max event times in its state, so the panes
    are still the uninterrupted run's (without that, a late row merged into a session before its
    ON_TIME pane: 18 rows instead of 20)."""
    run_dir = tmp_path / "crash"
    write_batches(type(stream_files)(run_dir / "input"), crash_batches())
    cp = run_dir / "cp"
    hit = None
    for k in (2, 3, 4):  # the window is a few ms wide; a kill that lands after it tries the next batch
        proc, args, env = start_job(run_dir)
        kill_when(proc, run_dir / "out" / "_spark_metadata" / str(k), poll=0.001)
        if not (cp / "commits" / str(k)).exists():
            hit = k
            break
    assert hit is not None, "no kill landed between the sink's commit and the commit log"
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, timeout=600)
    assert b"DONE" in done.stdout
    # the scenario happened: Spark's watermark did not advance past the skipped batch
    assert batch_watermark_ms(cp, hit + 1) == batch_watermark_ms(cp, hit)
    assert sink_rows(spark, run_dir / "out") == expected_after_restart(spark, crash_reference, cp, tmp_path / "reference")


def windows_plan(lateness: int) -> EnginePlan:
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(D(MINUTE))), None, ast.AllowedLateness(D(lateness)),
                              ast.Emit(ast.AccumulationMode.ACCUMULATING))
    return EnginePlan(windowing, (Aggregate("count_star", None, "n"),), keys=("k",))


def state_windows(spark, checkpoint) -> tuple[int, int]:
    """(keys, live windows) in the operator's state, read with Spark's state data source."""
    summary = S.state_summary(spark, str(checkpoint))
    return summary["keys"], summary["windows"]


def test_state_stays_bounded(spark, stream_files, tmp_path):
    """300 keys, 12 batches each a minute of event time later: windows expire once the watermark
    passes end + allowed lateness, so the state holds only the last few minutes' windows."""
    keys = [f"user{i:03d}" for i in range(300)]
    batches = [pd.DataFrame({"k": keys, EVENT_TIME: [at(b) + (i % 60) * SECOND for i in range(300)], "v": 1})
               for b in range(12)]
    write_batches(stream_files, batches)
    plan = windows_plan(lateness=MINUTE)
    cp = tmp_path / "cp"
    stream = S.build_stream(source(spark, stream_files), plan, delay=0, native=False, buckets=4)
    query = S.start(stream, format="memory", query_name="bounded", checkpoint=str(cp), available_now=True)
    panes = collect_panes(spark, "bounded")
    # the watermark ends at the last batch's max event time, 11:59 past T0: windows ending after
    # 10:59 (= 11:59 - lateness) are still live, i.e. [10, 11) and [11, 12) for every key
    n_keys, n_windows = state_windows(spark, cp)
    assert (n_keys, n_windows) == (300, 600)
    assert len(panes) == 300 * 11  # [0, 1) ... [10, 11) emitted ON_TIME; [11, 12) is still open
    metrics = S.query_metrics(query)
    assert metrics["input_rows"] == 300 * 12
    # the live state as of the last batch is in the query's own metrics too
    # (Spark's numRowsTotal counts sqlflow's one value per bucket, 4, whatever it holds)
    summary = S.state_summary(spark, str(cp))
    assert (metrics["state_keys"], metrics["state_windows"]) == (300, 600)
    assert metrics["state_bytes"] == summary["bytes"] > 0
    # Spark reads the source once (the heartbeats come from the same pass): its own input count
    # and rates are the rows' (a second scan counted 2 x 3,600)
    assert sum(p["numInputRows"] for p in query.recentProgress) == 300 * 12


@pytest.mark.parametrize("spark_drops_late", [False, True])
def test_late_rows_are_counted_and_can_be_fetched(spark, stream_files, tmp_path, spark_drops_late):
    """Rows behind the watermark are counted: by the engine (and returned as dropped rows with
    the window they missed), or, with spark_drops_late, those more than window size + allowed
    lateness behind by Spark before the operator."""
    rows = [
        [("a", at(0.5))],
        [("a", at(10))],
        [("a", at(9.99))],                      # on time: its window [9, 10) ends after W = 0:30
        [("w", at(8.9)), ("x", at(9.1)), ("y", at(2)), ("z", at(9.5))],  # judged against W = 10:00
    ]
    batches = [pd.DataFrame({"k": [k for k, _ in b], EVENT_TIME: [t for _, t in b], "v": 1}) for b in rows]
    write_batches(stream_files, batches)
    stream = S.build_stream(source(spark, stream_files), windows_plan(lateness=0), delay=0, native=False,
                            keep_dropped=True, buckets=2, spark_drops_late=spark_drops_late)
    got = []
    query = (stream.raw.writeStream.foreachBatch(lambda df, _: got.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    query.awaitTermination()
    metrics = S.query_metrics(query)
    assert S.late_rows(metrics) == 4
    if spark_drops_late:
        # w and y are at least the shift (window size + lateness = 1 minute) behind W = 10:00:
        # Spark drops them before the operator; x and z are nearer and too late for the engine
        assert (metrics["spark_dropped_late"], metrics["dropped_too_late"]) == (2, 2)
        far = []
    else:
        assert (metrics["spark_dropped_late"], metrics["dropped_too_late"]) == (0, 4)
        far = [("w", at(8.9), "too late", at(8), at(9)), ("y", at(2), "too late", at(2), at(3))]
    from sqlflow.columns import DROPPED, KIND, REASON, WINDOW_END, WINDOW_START
    dropped = sorted((r["k"], r[EVENT_TIME], r[REASON], r[WINDOW_START], r[WINDOW_END]) for r in got if r[KIND] == DROPPED)
    assert dropped == sorted(far + [("x", at(9.1), "too late", at(9), at(10)), ("z", at(9.5), "too late", at(9), at(10))])


def test_available_now_with_and_without_finish(spark, stream_files, tmp_path):
    batch = pd.DataFrame({"k": ["a", "a", "a"], EVENT_TIME: [at(0.1), at(0.8), at(1.2)], "v": [1, 2, 4]})
    write_batches(stream_files, [batch])
    plan = EnginePlan(windows_plan(0).windowing, (Aggregate("sum", "v", "total"),), keys=("k",))

    open_end = S.build_stream(source(spark, stream_files), plan, delay=0, native=False)
    q = S.start(open_end, format="memory", query_name="open_end", available_now=True)
    assert not q.isActive
    got = collect_panes(spark, "open_end")
    assert [(r.window_start, r.total, r.pane_timing) for r in got.itertuples()] == [(at(0), 3, "ON_TIME")]

    finished = S.build_stream(source(spark, stream_files), plan, delay=0, native=False,
                              finish_dir=str(tmp_path / "finish"))
    q = S.start(finished, format="memory", query_name="finished", available_now=True, finish=True)
    assert not q.isActive
    got = collect_panes(spark, "finished")
    assert [(r.window_start, r.total, r.pane_timing, r.is_last) for r in got.itertuples()] == [
        (at(0), 3, "ON_TIME", True), (at(1), 4, "ON_TIME", True)]


class Crash(Exception):
    pass


@pytest.mark.parametrize("executor", ["operator", "owned"])
def test_dropped_rows_side_output(spark, stream_files, tmp_path, monkeypatch, executor):
    """start(<a sqlflow.sql result>, ..., dropped_path=...) writes the statement's rows (its own
    columns) and the dropped rows, batch by batch, with the same columns on both executors (b at
    0:01 arrives in batch 3, after W passed 0:10; c's rows close [0:10, 0:11) on both). The
    statement runs on Spark's native operator, so the operator path runs its twin that lists the
    dropped rows. Batch 3 fails after both outputs and runs again from the checkpoint: nothing
    twice."""
    import sqlflow
    from sqlflow.spark.streaming import owned, sink

    rows = [[("a", at(0.5))], [("a", at(10))], [("a", at(10.2))], [("b", at(1)), ("a", at(10.5))],
            [("c", at(11.5))], [("c", at(11.6))]]
    batches = [pd.DataFrame({"k": [k for k, _ in b], EVENT_TIME: [t for _, t in b], "v": 1}) for b in rows]
    write_batches(stream_files, batches)
    source(spark, stream_files).selectExpr("k", f"timestamp_micros({EVENT_TIME}) AS ts").createOrReplaceTempView(
        "dropping_src")
    df = sqlflow.sql(spark, """SELECT k AS key, COUNT(*) * 10 AS n10, window_start, pane_timing FROM dropping_src
                               WATERMARK ts DELAY OF INTERVAL 0 SECONDS GROUP BY k WINDOW FIXED(SIZE 1m)""")
    assert S.pane_streams(df)[0].operator == "native"

    def fail(point, batch_id):
        if point == "after-sink" and batch_id == 3:
            raise Crash(f"injected at {point} of batch {batch_id}")

    split = sink._split_batch

    def failing_split(*args):
        write = split(*args)

        def once(batch_df, batch_id):
            write(batch_df, batch_id)
            fail("after-sink", batch_id)
        return once

    options = dict(format="parquet", path=str(tmp_path / "out"), dropped_path=str(tmp_path / "dropped"),
                   checkpoint=str(tmp_path / "cp"), available_now=True, executor=executor)
    with monkeypatch.context() as patch:
        patch.setattr(owned, "fault", fail)
        patch.setattr(sink, "_split_batch", failing_split)
        with pytest.raises(Exception, match="injected at after-sink of batch 3"):
            S.start(df, **options)
    assert (tmp_path / "dropped" / "batch_id=3").exists() and not (tmp_path / "cp" / "commits" / "3").exists()
    query = S.start(df, **options)
    assert not query.isActive
    assert (owned.run_of(query) is not None) == (executor == "owned")
    out = spark.read.parquet(str(tmp_path / "out"))
    assert out.columns == df.columns + ["batch_id"]  # the statement's columns, then the panes' (sqlflow.sql's rule)
    assert df.columns[:5] == ["key", "n10", "window_start", "pane_timing", "window_end"]
    assert sorted((r.key, r.n10, r.window_start.minute, r.pane_timing) for r in out.collect()) == [
        ("a", 10, 0, "ON_TIME"), ("a", 30, 10, "ON_TIME")]
    dropped = spark.read.parquet(str(tmp_path / "dropped"))
    # the key named as the query's GROUP BY names it
    assert dropped.columns == ["k", "event_time", "reason", "window_start", "window_end", "emit_time", "batch_id"]
    assert [(r.k, r.event_time.minute, r.reason, r.window_start.minute, r.window_end.minute, r.batch_id)
            for r in dropped.collect()] == [("b", 1, "too late", 1, 2, 3)]
    assert S.query_metrics(query)["dropped_too_late"] == 1  # the second run's: batch 3 again
