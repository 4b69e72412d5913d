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
    import compare

    panes = pd.DataFrame(
        [  # user, start, end, pane index, clicks
            (1, 0, 10, 0, 1),    # early pane of a session that later grew to [0, 25)
            (1, 0, 25, 1, 3),
            (1, 0, 25, 2, 4),    # its last pane
            (1, 12, 20, 0, 1),   # merged into [0, 25) too
            (1, 40, 50, 0, 2),   # a separate session
            (2, 0, 10, 0, 5),    # another user: not contained in user 1's windows
        ], columns=["user_id", "window_start", "window_end", "pane_index", "clicks"])
    live = compare.live_sessions(panes)
    assert live[["user_id", "window_start", "window_end", "clicks"]].values.tolist() == [
        [1, 0, 25, 4], [1, 40, 50, 2], [2, 0, 10, 5]]


@pytest.mark.slow
def test_a_small_run_writes_results_with_equal_final_values(tmp_path):
    out = tmp_path / "compare.json"
    env = dict(os.environ, SQLFLOW_BENCH_DATA=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, str(BENCH / "compare.py"), "--rows", "20000", "--only", "1,2,2b",
                           "--repeat", "1", "--out", str(out)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert sorted(report["results"]) == ["1", "2", "2b"]
    for name, result in report["results"].items():
        assert result["check"]["equal"], (name, result["check"])
        assert result["check"]["rows"] > 0
        assert result["rows"] == 20_000
        assert len(result["sqlflow"]["seconds"]) == 1
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
