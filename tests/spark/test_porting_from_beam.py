"""docs/porting-from-beam.md: every SQL example prints the table under it."""
from __future__ import annotations

import datetime as dt
import re

import pytest

import sqlflow


def _examples(repo_root) -> list[tuple[str, list[list[str]]]]:
    """(SQL, table rows with the header first) of every ```sql block followed by a ```text block."""
    text = (repo_root / "docs" / "porting-from-beam.md").read_text(encoding="utf-8")
    out = []
    for sql, table in re.findall(r"```sql\n(.*?)```\n\n```text\n(.*?)```", text, re.S):
        lines = [ln for ln in table.splitlines() if ln.startswith("|")]
        out.append((sql, [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]))
    return out


def _shown(value) -> str:
    """A value as DataFrame.show prints it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.datetime):
        fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
        return value.strftime("%Y-%m-%d %H:%M:%S") + fraction
    return str(value)


@pytest.fixture
def utc_paper_views(spark):
    from sqlflow.demo import load_paper_example

    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    load_paper_example(spark)
    yield
    spark.conf.set("spark.sql.session.timeZone", zone)


def test_every_example_prints_what_the_page_shows(spark, repo_root, utc_paper_views):
    examples = _examples(repo_root)
    assert len(examples) == 4
    for sql, (header, *rows) in examples:
        df = sqlflow.sql(spark, sql)
        assert df.columns == header, sql
        got = [[_shown(v) for v in r] for r in df.collect()]
        assert got == rows, sql


def test_never_ever_is_when_false(spark, utc_paper_views):
    """The mapping's `Never.ever()`: a trigger that never fires; each window emits its input once,
    when it expires (here at the end of the input)."""
    df = sqlflow.sql(spark, "SELECT window_start, pane_timing, is_last, SUM(v) AS total FROM events "
                            "WATERMARK et TIMELINE heuristic ARRIVAL at GROUP BY k WINDOW FIXED(SIZE 4m) ON et "
                            "TRIGGER WHEN(FALSE) ALLOWED LATENESS UNBOUNDED ORDER BY window_start")
    assert [(_shown(r["window_start"]), r["pane_timing"], r["is_last"], r["total"]) for r in df.collect()] == [
        ("1970-01-01 12:00:00", "LATE", True, 36), ("1970-01-01 12:04:00", "LATE", True, 15)]


def test_reopen_on_merge_through_spark(spark):
    """EMIT ... REOPEN ON MERGE on a replay, sessions of gap 10 s (the engine test's data, in
    seconds): [00:00, 00:10) fires and finishes at 00:05 as the watermark reaches 00:12; the late
    4 (event 00:08, arriving at 00:08) merges it into [00:00, 00:18), dropped by default, reopened
    with the option and fired LATE at 00:20 (1 + 4) as pane 1."""
    T = dt.datetime
    spark.createDataFrame([("k", 1, T(2024, 1, 1, 0, 0, 0), T(2024, 1, 1, 0, 0, 1)),
                           ("k", 2, T(2024, 1, 1, 0, 0, 25), T(2024, 1, 1, 0, 0, 2)),
                           ("k", 4, T(2024, 1, 1, 0, 0, 8), T(2024, 1, 1, 0, 0, 8))],
                          "k string, v int, et timestamp, at timestamp").createOrReplaceTempView("reopen_events")
    spark.createDataFrame([(T(2024, 1, 1, 0, 0, 5), T(2024, 1, 1, 0, 0, 12)),
                           (T(2024, 1, 1, 0, 0, 20), T(2024, 1, 1, 0, 0, 40))],
                          "proc_time timestamp, watermark timestamp").createOrReplaceTempView("reopen_wm")
    query = ("SELECT k, SUM(v) AS total FROM reopen_events WATERMARK et TIMELINE reopen_wm ARRIVAL at GROUP BY k "
             "WINDOW SESSIONS(GAP 10s) TRIGGER WATERMARK ALLOWED LATENESS 100s EMIT ACCUMULATING{}")

    def panes(option):
        df = sqlflow.sql(spark, query.format(option))
        rows = df.orderBy("emit_time", "window_start").collect()
        return ([(r.window_start.second, r.window_end.second, r.total, r.pane_index, r.pane_timing,
                  r.emit_time.second) for r in rows], sqlflow.metrics(df)["dropped_closed_window"])

    from sqlflow.spark.trigger_checks import SqlflowTriggerWarning

    with pytest.warns(SqlflowTriggerWarning):
        assert panes("") == ([(0, 10, 1, 0, "ON_TIME", 5), (25, 35, 2, 0, "ON_TIME", 20)], 1)
        assert panes(" REOPEN ON MERGE") == (
            [(0, 10, 1, 0, "ON_TIME", 5), (0, 18, 5, 1, "LATE", 20), (25, 35, 2, 0, "ON_TIME", 20)], 0)
