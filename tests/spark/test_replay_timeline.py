"""The replay watermark from Spark: collected whole (small input) or reduced per partition (large).

sqlflow/spark/timeline.py `_records` collects every (event time, arrival) pair of an input Spark
estimates at up to COLLECT_BYTES, and has each input partition reduce its own rows otherwise.
Both must give the timeline of every row; these force each way on the same data.
"""
from __future__ import annotations

import numpy as np
import pytest

import sqlflow
from sqlflow.engine import watermarks
from sqlflow.spark import timeline
from sqlflow.time import POS_INF

SECOND = 1_000_000


@pytest.fixture(scope="module")
def pairs(spark):
    """400 rows in 4 partitions: arrivals 0-5 s behind their event times, many ties in both."""
    rng = np.random.default_rng(11)
    et = rng.integers(0, 120, 400) * SECOND
    at = et + rng.integers(0, 6, 400) * SECOND
    frame = spark.createDataFrame([(int(e), int(a), f"u{i % 7}") for i, (e, a) in enumerate(zip(et, at))],
                                  "et long, at long, user string").repartition(4)
    return et, at, frame


@pytest.fixture(params=["collected", "per_partition"])
def way(request, monkeypatch):
    monkeypatch.setattr(timeline, "COLLECT_BYTES", 1 << 40 if request.param == "collected" else -1)
    return request.param


@pytest.mark.parametrize("kind", ["delay", "perfect"])
def test_records_give_the_timeline_of_every_row(pairs, way, kind):
    et, at, frame = pairs
    records, rows, first_at, last_at = timeline._records(frame.select("et", "at"), kind)
    r_at, r_et = records["at"].to_numpy(np.int64), records["et"].to_numpy(np.int64)
    assert (rows, first_at, last_at) == (400, int(at.min()), int(at.max()))
    assert len(records) < 400  # reduced either way
    if kind == "delay":
        assert watermarks.bounded_delay(r_at, r_et, 2 * SECOND).steps() == \
            watermarks.bounded_delay(at, et, 2 * SECOND).steps()
    else:  # as timeline.replay: the first arrival is an instant of its own
        got = watermarks.perfect(np.r_[r_at, first_at], np.r_[r_et, POS_INF])
        assert got.steps() == watermarks.perfect(at, et).steps()


def test_empty_input_has_no_rows_either_way(pairs, way):
    _, _, frame = pairs
    records, rows, first_at, last_at = timeline._records(frame.select("et", "at").where("et < 0"), "delay")
    assert (len(records), rows, first_at, last_at) == (0, 0, POS_INF, watermarks.NEG_INF)


def test_replayed_query_gives_the_same_panes_either_way(spark, pairs, monkeypatch):
    _, _, frame = pairs
    frame.selectExpr("user", "timestamp_micros(et) AS et", "timestamp_micros(at) AS at").createOrReplaceTempView(
        "replay_ways")
    query = """SELECT user, COUNT(*) AS n FROM replay_ways WATERMARK et DELAY OF INTERVAL 2 SECONDS ARRIVAL at
               GROUP BY user WINDOW SESSIONS(GAP 3s) TRIGGER WATERMARK EARLY PERIOD 10s LATE WATERMARK
               EMIT ACCUMULATING AND RETRACTING"""
    results = {}
    for name, limit in (("collected", 1 << 40), ("per_partition", -1)):
        monkeypatch.setattr(timeline, "COLLECT_BYTES", limit)
        df = sqlflow.sql(spark, query)
        results[name] = sorted(tuple(r) for r in df.collect())
    assert results["collected"] == results["per_partition"]
    got = results["collected"]  # user, n, window_start, window_end, pane_index, pane_timing, is_last, emit_time, is_retraction
    assert (len(got), sum(r[-1] for r in got)) == (220, 40)
    latest, retracted = {}, set()
    for r in got:
        if r[-1]:
            retracted.add((r[0], r[2], r[3], r[4]))
        elif r[4] >= latest.get((r[0], r[2], r[3]), (-1,))[0]:
            latest[(r[0], r[2], r[3])] = (r[4], r[1])
    finals = [n for (user, start, end), (index, n) in latest.items() if (user, start, end, index) not in retracted]
    assert sum(finals) == 400  # every row in exactly one final session value
