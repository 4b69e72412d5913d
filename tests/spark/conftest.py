"""Fixtures of the Spark bounded-path tests (tests/spark): the paper's example as Spark tables.

- `paper_views`: temp views `events(k, id, v, et, at)` (the ten data of the paper, section 2.4,
  event and processing times on 1970-01-01 UTC), `heuristic(proc_time, watermark)` (the heuristic
  watermark of figures 12-14, NULL = +inf) and `rounds(proc_time, watermark)` (figure 11's
  one-minute micro-batch rounds);
- `paper_expected(n)`: figure n's expected panes as (window start, end, signed value, emit time)
  in microseconds, and `paper_kinds(n)`: their timings (None for retractions);
- `panes_of(df, value)`: a result DataFrame as the same tuples, in emission order.
"""
from __future__ import annotations

import json
from importlib import resources

import pytest

SECOND = 1_000_000


def _clock(text: str):
    if text == "+inf":
        return None
    h, m, s = map(int, text.split(":"))
    return (h * 3600 + m * 60 + s) * SECOND


@pytest.fixture(scope="session")
def paper_example() -> dict:
    return json.loads(resources.files("sqlflow").joinpath("data/paper_example.json").read_text())


@pytest.fixture(scope="session")
def _paper_frames(spark, paper_example) -> dict:
    """The paper views' DataFrames, built once per run (`paper_views` registers them per test)."""
    from pyspark.sql import functions as F

    events = [(e["key"], e["id"], e["value"], _clock(e["event_time"]), _clock(e["proc_time"]))
              for e in paper_example["inputs"]["events"]]
    df = spark.createDataFrame(events, "k string, id string, v bigint, et_us bigint, at_us bigint")
    frames = {"events": df.select("k", "id", "v", F.timestamp_micros("et_us").alias("et"),
                                  F.timestamp_micros("at_us").alias("at"))}
    steps = [(_clock(s["proc_time"]), _clock(s["watermark"])) for s in paper_example["inputs"]["watermarks"]]
    frames["heuristic"] = spark.createDataFrame(steps, "p bigint, w bigint").select(
        F.timestamp_micros("p").alias("proc_time"), F.timestamp_micros("w").alias("watermark"))
    frames["events"].createOrReplaceTempView("events")
    frames["rounds"] = spark.sql("""
        SELECT DISTINCT timestamp_seconds(CEIL(unix_seconds(at) / 60) * 60) AS proc_time,
                        timestamp_seconds(CEIL(unix_seconds(at) / 60) * 60) AS watermark
        FROM events""")
    return frames


@pytest.fixture
def paper_views(_paper_frames) -> list[str]:
    """Registered for each test: a test elsewhere on the shared session may have replaced a view of
    the same name (the CLI's examples define their own `heuristic`, on 2015-09-01)."""
    for name, frame in _paper_frames.items():
        frame.createOrReplaceTempView(name)
    return list(_paper_frames)


@pytest.fixture(scope="session")
def paper_expected(paper_example):
    def expected(n: int) -> list[tuple]:
        fig = next(f for f in paper_example["figures"] if f["figure"] == n)
        out = []
        for p in fig["expected_panes"]:
            w = p["window"]
            fire = None if p["fire_time"] == "after_all_input" else _clock(p["fire_time"])
            out.append((_clock(w["start"]) if "start" in w else None, _clock(w["end"]) if "end" in w else None,
                        p["value"], fire))
        return out

    return expected


@pytest.fixture(scope="session")
def paper_kinds(paper_example):
    def kinds(n: int) -> list:
        fig = next(f for f in paper_example["figures"] if f["figure"] == n)
        return [p["pane_kind"].upper() if p["pane_kind"] else None for p in fig["expected_panes"]]

    return kinds


def _micros(t):
    if t is None:
        return None
    import datetime as dt

    return (t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


@pytest.fixture(scope="session")
def panes_of():
    """Rows of a result as (start, end, signed value, emit time) and their timings, sorted by
    emit time, retractions first, window start."""
    def rows(df, value: str = "total"):
        cols = df.columns
        retracting = "is_retraction" in cols
        got = df.collect()

        def order(r):
            emit = _micros(r["emit_time"])
            start = _micros(r["window_start"])
            return (emit is not None, emit or 0, not (retracting and r["is_retraction"]),
                    start is not None, start or 0)

        got.sort(key=order)
        panes = [(_micros(r["window_start"]), _micros(r["window_end"]),
                  -r[value] if retracting and r["is_retraction"] else r[value], _micros(r["emit_time"]))
                 for r in got]
        kinds = [None if retracting and r["is_retraction"] else r["pane_timing"] for r in got]
        return panes, kinds

    return rows
