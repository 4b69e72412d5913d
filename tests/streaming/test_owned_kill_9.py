"""Exactly once through the owned-sink executor across kill -9 of the driver (with its JVM and
Python workers): killed mid-batch (the batch planned, nothing written), after the batch's step
wrote its state version and its panes to the version's outbox but before the bookkeeping that
marks the version complete, after the bookkeeping but before Spark's commit log, and after
Spark's commit before the panes' delivery to the sink; each restart from the checkpoint goes on,
and the output equals an uninterrupted run's: no row lost, none twice. Sessions with
retractions, so a batch applied twice or a state version read twice would show.

A release-tier test (`--release`); the default run fails the executor at every point in process
(tests/streaming/test_owned.py, test_a_failure_at_any_point_loses_and_duplicates_nothing)."""
from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sqlflow.spark.streaming import owned
from tests.conftest import StreamFiles
from tests.crash_input import crash_batches

JOB = Path(__file__).with_name("owned_crash_job.py")
#: (batch, point) where each run dies, in the order the runs meet them
KILLS = [(2, "mid-batch"), (4, "after-outputs"), (5, "before-delivery"), (6, "after-sink")]


def batches(n: int = 8) -> list[pd.DataFrame]:
    return crash_batches(11, n, int_keys=True)


def output(spark, out: Path) -> pd.DataFrame:
    """The sink's rows without emit_time (a batch's wall-clock time), sorted."""
    rows = spark.read.parquet(str(out)).drop("emit_time").toPandas()
    return rows.sort_values(list(rows.columns)).reset_index(drop=True)


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("owned-crash-ref")
    files = StreamFiles(base / "input")
    for b in batches():
        files.write(b)
    job = runpy.run_path(str(JOB))
    query = job["run"](spark, str(files.path), str(base / "out"), str(base / "cp"))
    rows = output(spark, base / "out")
    assert rows["is_retraction"].any() and set(rows["batch_id"]) >= set(range(8))
    # the driver-local step read every batch's file itself (docs/streaming.md 3.0)
    assert [b["direct_reads"] for b in owned.run_of(query).progress] == [1] * 8 + [0]
    return rows


@pytest.mark.slow
@pytest.mark.release
def test_kill_9_at_four_points_and_restart(spark, uninterrupted, tmp_path):
    files = StreamFiles(tmp_path / "input")
    for b in batches():
        files.write(b)
    out, cp = tmp_path / "out", tmp_path / "cp"
    args = [sys.executable, str(JOB), str(files.path), str(out), str(cp)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for batch, point in KILLS:
        proc = subprocess.run([*args, f"{batch}:{point}"], start_new_session=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, timeout=600)
        assert proc.returncode == -9 and f"KILLED {batch}:{point}".encode() in proc.stdout
        assert (cp / "commits" / str(batch)).exists() == (point == "before-delivery")
        state = cp / "sqlflow-state" / f"v={batch}"
        # the state version, its outbox and its bookkeeping exist only when the kill came after
        # them; the sink's directory not before the delivery (the driver-local step's, here)
        assert (state / "_sqlflow.json").exists() == (point in ("after-sink", "before-delivery"))
        assert any(state.glob("*.parquet")) == (point != "mid-batch")
        assert (state / "_panes.arrow").exists() == (point != "mid-batch")
        assert not (out / f"batch_id={batch}").exists()
    done = subprocess.run(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                          timeout=600)
    assert b"DONE" in done.stdout
    pd.testing.assert_frame_equal(output(spark, out), uninterrupted, check_dtype=False)
