"""The comparison suite (benchmarks/compare.py): its data generator, how it reads final values, and
a small run end to end. Only behaviour is tested here; the numbers live in benchmarks/results/."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import events  # noqa: E402


def test_events_are_deterministic_and_shaped_as_documented():
    a, b = events.events(20_000, seed=3), events.events(20_000, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(events.events(20_000, seed=4))
    assert len(a) == 20_000
    assert list(a.columns) == ["user_id", "amount", "event_time", "arrival_time"]
    assert (a["event_time"] % events.MS == 0).all() and (a["arrival_time"] % events.MS == 0).all()
    delay = a["arrival_time"] - a["event_time"]
    assert delay.min() >= 0 and delay.max() <= 30 * events.MINUTE
    assert a["amount"].between(1, 99).all()
    assert a["user_id"].between(0, 199).all()  # rows // 100 users
    share = a["user_id"].value_counts(normalize=True)
    assert share.iloc[0] > 0.1 > share.median()  # Zipf: a hot user, many cold ones
    ordered = a.sort_values("arrival_time", kind="stable")
    watermark = np.maximum.accumulate(ordered["event_time"].to_numpy()) - events.MINUTE
    late = (ordered["event_time"].to_numpy()[1:] < watermark[:-1]).mean()
    assert 0.005 < late < 0.04


def test_live_sessions_drop_windows_merged_into_a_bigger_one():
    import finals

    panes = pd.DataFrame(
        [  # user, start, end, pane index, clicks
            (1, 0, 10, 0, 1),    # early pane of a session that later grew to [0, 25)
            (1, 0, 25, 1, 3),
            (1, 0, 25, 2, 4),    # its last pane
            (1, 12, 20, 0, 1),   # merged into [0, 25) too
            (1, 40, 50, 0, 2),   # a separate session
            (2, 0, 10, 0, 5),    # another user: not contained in user 1's windows
        ], columns=["user_id", "window_start", "window_end", "pane_index", "clicks"])
    live = finals.live_sessions(panes)
    assert live[["user_id", "window_start", "window_end", "clicks"]].values.tolist() == [
        [1, 0, 25, 4], [1, 40, 50, 2], [2, 0, 10, 5]]


@pytest.mark.slow
@pytest.mark.release  # in CI: the in-process two-stage check and the records' tests
def test_a_small_run_writes_results_with_equal_final_values(tmp_path):
    out = tmp_path / "compare.json"
    env = dict(os.environ, SQLFLOW_BENCH_DATA=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, str(BENCH / "compare.py"), "--rows", "20000", "--only", "1,2,2b",
                           "--repeat", "1", "--warmup", "0", "--out", str(out)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert sorted(report["results"]) == ["1", "2", "2b"]
    for name, result in report["results"].items():
        assert result["check"]["equal"], (name, result["check"])
        assert result["check"]["rows"] > 0
        assert result["rows"] == 20_000
        assert len(result["sqlflow"]["seconds"]) == 1
        record = result["record"]  # each scenario's own: the run, its load, its rounds
        assert record["command"].startswith("python benchmarks/compare.py --rows 20000 --only 1,2,2b")
        assert record["spread"]["sqlflow"] == {"rounds": 1, "min_s": result["sqlflow"]["median_s"],
                                               "median_s": result["sqlflow"]["median_s"],
                                               "max_s": result["sqlflow"]["median_s"]}
        assert len(record["load_average"]) == 2 and record["versions"]["pyspark"]
    assert set(report) == {"results"}  # no header shared by the scenarios
    floor = report["results"]["2"]["floor"]
    assert set(floor) == {"floor_watermark_pass", "floor_bucket_transfer", "total_s", "share_of_reference"}
    assert floor["total_s"] == round(floor["floor_watermark_pass"] + floor["floor_bucket_transfer"], 3)
    assert "floor" not in report["results"]["1"]
    free = report["results"]["2"]["engine_free"]
    assert free["engine_s"] == round(report["results"]["2"]["sqlflow"]["median_s"] - free["median_s"], 3)
    assert "Scenario 2 with a zero-cost engine" in out.with_suffix(".md").read_text()
    table = out.with_suffix(".md").read_text()
    assert "| 2b. sessions, default trigger, bounded" in table
    assert f"= {floor['total_s']} s" in table
    assert (tmp_path / "data").is_dir()


#: two runs' facts as benchmarks/provenance.run_facts gives them (fixed, for exact tables)
RUN_A = {"commit": "0123456789abcdef0123456789abcdef01234567 dirty", "command": "python benchmarks/compare.py --only f",
         "started": "2026-01-01 00:00:00 UTC", "machine": {"cpus": 2, "cpu": "AMD EPYC", "memory_gib": 24,
                                                            "platform": "Linux"},
         "versions": {"python": "3.11.7", "pyspark": "4.3.0", "sqlflow": "0.1.0"}}
RUN_B = dict(RUN_A, commit="fedcba9876543210fedcba9876543210fedcba98", command="python benchmarks/compare.py --only 3",
             started="2026-01-02 00:00:00 UTC")


def a_record(run: dict, load_average: list, result: dict | None = None, **versions) -> dict:
    """provenance.record's result, with a fixed end time and load."""
    import provenance

    rec = dict(run, versions={**run["versions"], **versions}, finished="2026-01-01 00:10:00 UTC",
               load_average=load_average)
    if result is not None:
        rec["spread"] = provenance.spreads(result)
    return rec


def flink_result(name: str, ratio_kind_seconds: tuple[float, float]) -> dict:
    ours, theirs = ratio_kind_seconds
    side = lambda s: {"median_s": s, "rows_per_s": round(1000 / s), "seconds": [s], "peak_rss_mb": 100,  # noqa: E731
                      "peak_python_workers_mb": 10}
    result = {"sqlflow": side(ours), "reference": dict(side(theirs), flink_peak_rss_mb=700, job_run_s=0.5),
              "check": {"equal": True, "rows": 7, "reference_rows": 7, "only_sqlflow": 0, "only_reference": 0},
              "rows": 1000, "stream_files": 4, "flink_mode": "streaming", "delay_ms": 1_800_000,
              "flink_version": "2.3.0", "flink_startup_s": 9.5, "spark_startup_s": 3.25, "parallelism": 2}
    if name in ("f3", "f4"):
        result["sqlflow"].update(micro_batches=2, batch_ms=[1500, 700], add_batch_ms=[1200, 400])
    return result


def test_the_table_renders_the_flink_rows_with_their_notes():
    import compare
    import report

    results = {name: compare.summarise(name, flink_result(name, times))
               for name, times in {"f1": (1.0, 2.0), "f4": (4.0, 1.0)}.items()}
    assert (results["f1"]["ratio"], results["f1"]["met"]) == (2.0, True)
    assert (results["f4"]["ratio"], results["f4"]["met"]) == (0.25, False)
    results["f1"]["record"] = a_record(RUN_A, [3.5, 4.25], results["f1"], flink="2.3.0")
    out = {"results": results}
    table = report.markdown(out)
    assert ("| f1. fixed windows, default trigger, bounded: vs Flink SQL TUMBLE, batch mode | 1,000 | "
            "1,000 rows/s (1.0 s; 1 round) | 500 rows/s (2.0 s; 1 round) | 2.0 (throughput sqlflow / reference) | "
            ">= 1.0 | yes | yes | 100 / 700 MB | a; load 3.5 to 4.25; Flink 2.3.0 |") in table
    assert "| f4. streaming sessions, default trigger, finished: vs Flink SQL SESSION, streaming mode | 1,000 |" in table
    assert "| 0.25 (throughput sqlflow / reference) | >= 1.0 | **no** | yes |" in table
    assert "| f2." not in table and "| f3." not in table
    assert "Flink's JVM and mini-cluster took 9.5 s, Spark's session 3.25 s" in table
    assert "30 minutes behind the largest event time" in table and "rows in 4 files" in table
    assert "- f1, last round: Flink's job ran 0.5 s on the cluster of its 2.0 s (the rest: planning and submission)." \
        in table
    assert ("- f4, last round: Flink's job ran 0.5 s on the cluster of its 1.0 s (the rest: planning and submission); "
            "sqlflow's stream ran 2 micro-batches of 1.5, 0.7 s (of which the query's own work, addBatch: 1.2, 0.4 s)."
            ) in table


def test_the_readme_holds_the_results_table():
    import compare

    readme = compare.README.read_text()
    table = compare.DEFAULT_OUT.with_suffix(".md").read_text()
    assert compare.readme_with(readme, table) == readme
    assert compare.readme_with(readme, "new table\n") != readme
    with pytest.raises(ValueError, match="no <!-- benchmarks/results/compare.md: begin -->"):
        compare.readme_with("no markers", table)


def test_flink_sql_intervals_and_statements():
    import flink_side

    assert flink_side.interval(1_800_000) == "INTERVAL '0 00:30:00.000' DAY TO SECOND(3)"
    assert flink_side.interval(90_061_001) == "INTERVAL '1 01:01:01.001' DAY TO SECOND(3)"
    source, sink, insert = flink_side.statements(
        {"window": "session", "mode": "streaming", "path": "/d/e.csv", "delay_ms": 1_800_000, "out": None}, 3)
    assert "WATERMARK FOR event_time AS event_time - INTERVAL '0 00:30:00.000' DAY TO SECOND(3)" in source
    assert "'path' = '/d/e.csv'" in source and "'connector' = 'blackhole'" in sink
    assert "SESSION(TABLE events_3 PARTITION BY user_id, DESCRIPTOR(event_time), INTERVAL '5' MINUTE)" in insert
    source, sink, insert = flink_side.statements(
        {"window": "tumble", "mode": "batch", "path": "/d/e.csv", "out": "/o"}, 4)
    assert "WATERMARK" not in source and "'path' = '/o', 'format' = 'csv'" in sink
    assert "TUMBLE(TABLE events_4, DESCRIPTOR(event_time), INTERVAL '1' MINUTE)" in insert
    source, sink, insert = flink_side.statements(
        {"window": "order", "mode": "streaming", "path": "/d/e.csv", "delay_ms": 1_800_000, "out": None}, 5)
    assert "WATERMARK FOR event_time AS event_time - INTERVAL '0 00:30:00.000' DAY TO SECOND(3)" in source
    assert "out_5 (user_id BIGINT, amount BIGINT, event_ms BIGINT)" in sink
    assert insert == "INSERT INTO out_5\nSELECT user_id, amount, event_ms FROM events_5\nORDER BY event_time, user_id"


def test_the_stream_step_benchmark_runs_the_loop_and_the_step_to_the_same_panes(tmp_path):
    """benchmarks/stream_step.py on a few rows: the vectorised step and the per-key loop emit as
    many panes on the same micro-batches, and the state of 1,000 keys empties once the watermark
    passes them."""
    out = tmp_path / "stream_step.json"
    env = dict(os.environ, SQLFLOW_BENCH_DATA=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, str(BENCH / "stream_step.py"), "--rows", "20000", "--reference-rows",
                           "5000", "--memory-keys", "1000", "--out", str(out)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    for case in ("card", "fixed"):
        r = report["results"][case]
        assert r["vectorised"]["rows"] == 20_000
        assert r["reference"]["output_rows"] == r["vectorised_same_rows_as_reference"]["output_rows"] > 0
    memory = report["state_memory"]
    assert (memory["keys"], memory["live_windows"], memory["early_panes"]) == (1000, 1000, 1000)
    assert memory["windows_after_the_watermark_passes"] == 0


def test_state_growth_summarises_growth_before_retention_and_the_range_after():
    import state_growth

    rows = [{"m": v} for v in [0, 10, 20, 30, 35, 32, 34, 33]] + [{"m": None}]
    assert state_growth.growth(rows, "m", 3) == {
        "first": 0, "at_retain": 20, "per_batch_before_retain": 10,
        "after_2x_retain_min": 33, "after_2x_retain_max": 34, "last": 33}
    assert state_growth.growth([{"m": None}], "m", 3) == {}


@pytest.mark.slow
def test_the_two_stage_pipeline_and_its_hand_written_reference_agree(spark):
    """Scenario 2p's two sides (benchmarks/pipeline.py) give the same final counts per window on
    4,000 rows (early session panes and their retractions flow into the windows, late ones too);
    in-process, one run of each side, so that it costs CI seconds, not a benchmark run."""
    import compare
    import pipeline
    from finals import same_rows
    from pyspark.sql import functions as F

    rows = events.events(4_000)
    spark.createDataFrame(rows).select("user_id", "amount", F.timestamp_micros("event_time").alias("event_time"),
                                       F.timestamp_micros("arrival_time").alias("arrival_time")) \
        .createOrReplaceTempView("bench_events")  # not `events`: other tests' view of the paper's example
    import sqlflow

    first = compare.Q_SESSIONS_REPLAY.replace("FROM events", "FROM bench_events")
    # 4,000 rows span 6 minutes of event time: 1-minute windows instead of the scenario's hours
    ours = sqlflow.sql(spark, pipeline.query(first, minutes=1))
    reference = pipeline.hand(compare.hand_sessions(spark, "bench_events"), minutes=1)
    check = same_rows(pipeline.finals(ours), reference, cols=pipeline.COLUMNS)
    assert check["equal"], check
    reference = reference.agg(F.sum("sessions"), F.sum("clicks")).first()
    assert check["rows"] >= 5 and reference[1] == 4_000  # every click, in some session of some hour


def test_the_table_renders_the_pipeline_row_and_its_first_stage():
    import compare
    import report

    side = lambda s: {"median_s": s, "rows_per_s": round(1000 / s), "seconds": [s], "peak_rss_mb": 100,  # noqa: E731
                      "peak_python_workers_mb": 10}
    result = {"sqlflow": side(4.0), "reference": side(2.0), "single_stage": dict(side(1.6), stage_two_overhead=2.5),
              "check": {"equal": True, "rows": 7, "reference_rows": 7, "only_sqlflow": 0, "only_reference": 0},
              "rows": 1000}
    out = {"results": {"2p": compare.summarise("2p", result)}}
    table = report.markdown(out)
    assert ("| 2p. scenario 2, then a replayed hourly window over the sessions' output time (two stages): vs native "
            "`session_window`, then `window()` over each session's end | 1,000 | 250 rows/s (4.0 s; 1 round) | "
            "500 rows/s (2.0 s; 1 round) | 0.5 (throughput sqlflow / reference) | >= 1.0 | **no** | yes | "
            "100 / 100 MB | recorded before per-scenario records |") in table
    assert ("Scenario 2p's first stage alone (scenario 2's query, same rounds): 1.6 s; the two-stage pipeline takes "
            "2.5x its time") in table


def test_the_hot_key_table_says_whether_the_target_is_met():
    import hot_key

    record = {"results": {f"{case}-{rows}": {"case": case, "rows": rows, "peak_worker_mib": mib, "bytes_per_row": 1,
                                             "seconds": 1.0}
                          for case, rows, mib in [("sessions", 10_000_000, 1024), ("fixed", 10_000_000, 1025),
                                                  ("fixed", 2_000_000, 2000)]}}
    record["results"]["fixed-2000000"]["record"] = a_record(RUN_A, [1.0, 2.5])
    rows = [line for line in hot_key.markdown(record).splitlines() if line.startswith("| fixed") or
            line.startswith("| sessions")]
    before = "recorded before per-scenario records"
    assert rows == ["| fixed | 2,000,000 | 2,000 MiB | 1 | 1.0 s | n/a | commit 0123456789ab (dirty), "
                    "2026-01-01 00:10:00 UTC, PySpark 4.3.0, load 1.0 to 2.5 |",
                    f"| fixed | 10,000,000 | 1,025 MiB | 1 | 1.0 s | <= 1,024 MiB: **missed** | {before} |",
                    f"| sessions | 10,000,000 | 1,024 MiB | 1 | 1.0 s | <= 1,024 MiB: met | {before} |"]


@pytest.mark.slow
@pytest.mark.release  # in CI: the hot-key table's test above
def test_a_small_hot_key_run_measures_one_worker(tmp_path):
    out = tmp_path / "hot_key.json"
    env = dict(os.environ, SQLFLOW_BENCH_DATA=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, str(BENCH / "hot_key.py"), "--rows", "20000", "--cases", "sessions",
                           "--out", str(out)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())["results"]["sessions-20000"]
    assert result["panes"] > 0 and result["peak_worker_mib"] >= result["idle_worker_mib"] > 0
    assert "| sessions | 20,000 |" in out.with_suffix(".md").read_text()


def side_of(*seconds: float) -> dict:
    median = sorted(seconds)[len(seconds) // 2]
    return {"median_s": median, "rows_per_s": round(1000 / median), "seconds": list(seconds), "peak_rss_mb": 100,
            "peak_python_workers_mb": 10}


def test_a_merged_results_file_says_which_run_measured_each_row():
    """Rows of two `--only` runs and one measured before per-scenario records: each row names its
    run and the load over its scenario, the footnote describes each run once (commit, command,
    versions, machine), and the old header is kept but attributed to no row."""
    import compare
    import report

    one = {"sqlflow": side_of(1.2, 1.0, 1.6), "reference": side_of(1.1, 1.0, 1.3), "rows": 1000}
    three = {"sqlflow": side_of(50.7, 44.6), "reference": side_of(33.0), "rows": 1000, "files": 10}
    old = {"sqlflow": side_of(2.0, 7.3, 16.7), "reference": side_of(3.0, 4.0, 5.0), "rows": 1000,
           "check": {"equal": True, "rows": 5, "reference_rows": 5, "only_sqlflow": 0, "only_reference": 0}}
    results = {"1": compare.summarise("1", one), "3": compare.summarise("3", three), "2b": compare.summarise("2b", old)}
    results["1"]["record"] = a_record(RUN_A, [6.21, 14.6], one)
    results["3"]["record"] = a_record(RUN_B, [1.5, 2.0], three)
    out = {"command": "python benchmarks/compare.py --only 3 --repeat 2", "finished": "2026-11-25 00:08:24",
           "load_average": [6.21, 14.6], "versions": {"beam": None}, "results": results}
    table = report.markdown(out)
    row = {line.split(".")[0]: line for line in table.splitlines() if line.startswith("| ")}
    assert row["| 1"].endswith("| 833 rows/s (1.2 s; 3 rounds 1.0-1.6 s) | 909 rows/s (1.1 s; 3 rounds 1.0-1.3 s) "
                               "| 1.091 (time sqlflow / hand-written) | <= 1.10 | yes | n/a | 100 / 100 MB | "
                               "a; load 6.21 to 14.6 |")
    assert row["| 2b"].endswith("| 137 rows/s (7.3 s; 3 rounds 2.0-16.7 s) | 250 rows/s (4.0 s; 3 rounds 3.0-5.0 s) "
                                "| 0.548 (throughput sqlflow / reference) | >= 1.5 | **no** | yes | 100 / 100 MB | "
                                "recorded before per-scenario records |")
    assert row["| 3"].endswith("| 0.651 (throughput sqlflow / reference) | >= 0.9 | **no** | n/a | 100 / 100 MB | "
                               "b; load 1.5 to 2.0 |")
    assert ("- a: `python benchmarks/compare.py --only f` at commit 0123456789ab (dirty: uncommitted changes), "
            "started 2026-01-01 00:00:00 UTC; Python 3.11.7, PySpark 4.3.0, sqlflow 0.1.0; 2 cores (AMD EPYC), 24 GiB, "
            "Linux.") in table
    assert ("- b: `python benchmarks/compare.py --only 3` at commit fedcba987654, started 2026-01-02 00:00:00 UTC;"
            ) in table
    assert ("- recorded before per-scenario records: measured before each scenario kept its own record; its commit, "
            "command, versions and load were not recorded for the row (the rounds' spread is). The file's one header "
            "then described only the last run merged into it: `python benchmarks/compare.py --only 3 --repeat 2`, "
            "finished 2026-11-25 00:08:24, load 6.21 at its start and 14.6 at its end.") in table
    # the old header moves aside, and goes once every row has its own record
    import provenance

    moved = provenance.with_records(out)
    assert set(moved) == {"results", provenance.OLD_HEADER}
    assert moved[provenance.OLD_HEADER]["command"] == "python benchmarks/compare.py --only 3 --repeat 2"
    assert provenance.kept_header(out, results) == {provenance.OLD_HEADER: moved[provenance.OLD_HEADER]}
    assert provenance.kept_header(out, {"1": results["1"], "3": results["3"]}) == {}
    assert "recorded before" not in report.markdown({"results": {"1": results["1"], "3": results["3"]}})


def test_a_record_holds_the_run_the_load_and_the_spread_of_the_rounds():
    import provenance

    run = provenance.run_facts("compare.py", ["--only", "1", "--out", "/tmp/a b.json"])
    assert run["command"] == "python benchmarks/compare.py --only 1 --out '/tmp/a b.json'"
    assert set(run["versions"]) == {"python", "pyspark", "sqlflow"}
    import sqlflow

    assert run["versions"]["sqlflow"] == sqlflow.__version__
    rec = provenance.record(run, 1.25, {"sqlflow": side_of(7.3, 16.7, 11.6), "reference": side_of(4.0),
                                        "check": {"equal": True}}, beam="2.77.0", flink=None)
    assert rec["spread"] == {"sqlflow": {"rounds": 3, "min_s": 7.3, "median_s": 11.6, "max_s": 16.7},
                             "reference": {"rounds": 1, "min_s": 4.0, "median_s": 4.0, "max_s": 4.0}}
    assert rec["versions"]["beam"] == "2.77.0" and "flink" not in rec["versions"]
    assert rec["load_average"][0] == 1.25 and len(rec["load_average"]) == 2
    assert rec["command"] == run["command"] and rec["started"] <= rec["finished"]


def test_the_commit_says_dirty_when_tracked_files_changed_outside_the_results(tmp_path):
    import provenance

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("a = 1\n")
    (tmp_path / "benchmarks" / "results" / "r.json").write_text("{}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert provenance.commit(tmp_path) == head
    (tmp_path / "benchmarks" / "results" / "r.json").write_text('{"new": 1}\n')  # a run rewrote its results
    (tmp_path / "untracked.py").write_text("")
    assert provenance.commit(tmp_path) == head
    (tmp_path / "code.py").write_text("a = 2\n")
    assert provenance.commit(tmp_path) == head + " dirty"
    assert provenance.commit(tmp_path / "benchmarks" / "results" / "nowhere") is None
