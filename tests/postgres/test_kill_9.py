"""Exactly once into PostgreSQL across kill -9 of the driver: killed mid-batch (the batch's panes
computed, nothing written), during the transaction (its statements run, not committed), and after
the commit but before Spark's commit log; each restart from the checkpoint leaves the table equal
to an uninterrupted run's. The job's query discards (each pane adds to its row), so a batch
applied twice would show; the tests of test_spark_sink.py cover retractions.

The default run fails the job at the same three points in this process (an exception where the
kill would be: the transaction rolled back rather than cut off); the release tier (`--release`)
kills the driver with its JVM."""
from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import StreamFiles
from tests.crash_input import crash_batches

JOB = Path(__file__).with_name("crash_job.py")
#: (batch, step) where each run dies, in the order the runs meet them
KILLS = [(2, "begin"), (4, "applied"), (6, "committed")]


def batches(n: int = 8) -> list[pd.DataFrame]:
    return crash_batches(7, n)


def table_rows(pg, table: str) -> list[tuple]:
    """The table without emit_time (the wall-clock time of a batch)."""
    return sorted(pg.execute(f"SELECT k, total, n, window_start, window_end, pane_index, pane_timing, is_last, "
                             f"output_time FROM {table}").fetchall())


def recorded(pg, table: str) -> list[int]:
    return [r[0] for r in pg.execute("SELECT batch_id FROM sqlflow_batches WHERE table_name = %s ORDER BY batch_id",
                                     (table,)).fetchall()]


@pytest.fixture(scope="module")
def uninterrupted(spark, postgres, tmp_path_factory):
    """The table of the job run without interruption (in this process), and its batches."""
    import psycopg

    base = tmp_path_factory.mktemp("pg-crash-ref")
    files = StreamFiles(base / "input")
    for b in batches():
        files.write(b)
    job = runpy.run_path(str(JOB))
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    job["run"](spark, str(files.path), postgres.url, "crash_reference", str(base / "cp"))
    with psycopg.connect(postgres.url, autocommit=True) as pg:
        rows = table_rows(pg, "crash_reference")
        assert len(rows) >= 8 and recorded(pg, "crash_reference")[-1] >= 8
        return rows


class Failure(Exception):
    """The failure the in-process job meets at its chosen point."""


def fail_at(where: str):
    """A hook `(batch_id, point)` raising `Failure` when batch BATCH reaches POINT."""
    batch, point = where.split(":")

    def hook(batch_id: int, at: str) -> None:
        if batch_id == int(batch) and at == point:
            raise Failure(where)

    return hook


def test_failed_at_three_points_and_restarted_in_process(uninterrupted, spark, pg, postgres, tmp_path):
    from pyspark.errors import StreamingQueryException

    run_dir = tmp_path / "run"
    files = StreamFiles(run_dir / "input")
    for b in batches():
        files.write(b)
    cp = run_dir / "cp"
    job = runpy.run_path(str(JOB))
    for batch, step in KILLS:
        with pytest.raises(StreamingQueryException, match=f"Failure: {batch}:{step}"):
            job["run"](spark, str(files.path), postgres.url, "failed", str(cp),
                       options={"on_step": fail_at(f"{batch}:{step}")})
        assert not (cp / "commits" / str(batch)).exists(), "Spark had not committed the batch"
        assert (batch in recorded(pg, "failed")) == (step == "committed")
    job["run"](spark, str(files.path), postgres.url, "failed", str(cp))
    assert table_rows(pg, "failed") == uninterrupted
    ids = recorded(pg, "failed")
    assert ids == list(range(len(ids)))


@pytest.mark.slow
@pytest.mark.release
def test_kill_9_at_three_points_and_restart(uninterrupted, pg, postgres, tmp_path):
    run_dir = tmp_path / "run"
    files = StreamFiles(run_dir / "input")
    for b in batches():
        files.write(b)
    cp = run_dir / "cp"
    args = [sys.executable, str(JOB), str(files.path), postgres.url, "crashed", str(cp)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for batch, step in KILLS:
        proc = subprocess.run([*args, f"{batch}:{step}"], start_new_session=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, timeout=600)
        assert proc.returncode == -9 and f"KILLED {batch}:{step}".encode() in proc.stdout
        assert not (cp / "commits" / str(batch)).exists(), "Spark had not committed the batch"
        # the sink's transaction committed only when the kill came after it
        assert (batch in recorded(pg, "crashed")) == (step == "committed")
        assert recorded(pg, "crashed") == sorted(recorded(pg, "crashed"))
    done = subprocess.run(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                          timeout=600)
    assert b"DONE" in done.stdout
    assert table_rows(pg, "crashed") == uninterrupted
    # every batch applied once: the one killed after its commit was skipped when Spark re-ran it
    ids = recorded(pg, "crashed")
    assert ids == list(range(len(ids)))
    added = pg.execute("SELECT rows_upserted FROM sqlflow_batches WHERE table_name = 'crashed' AND batch_id = %s",
                       (KILLS[-1][0],)).fetchone()[0]
    assert added > 0  # so applying it twice would have added its panes twice
