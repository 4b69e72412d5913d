"""Aggregating over the output of a windowed stage (docs/pipelines.md).

The stage is figure 14's (sessions, early firings, accumulating and retracting) or figure 13's
(fixed windows, early firings, accumulating), replayed from the paper's example. Its final
sessions are [12:00:26, 12:05:19) with 39 and [12:06:39, 12:08:46) with 12; on the way it emits
and retracts sessions 5, 7, 10, 25 and 3.
"""
import pytest

import sqlflow
from sqlflow.plan.pipelines import SqlflowPipelineWarning

SESSIONS = """
    SELECT k, SUM(v) AS total FROM events WATERMARK et TIMELINE heuristic ARRIVAL at
    GROUP BY k WINDOW SESSIONS(GAP 1m) TRIGGER WATERMARK EARLY PERIOD 1m
    ALLOWED LATENESS 1h EMIT {mode}"""
FIXED = """
    SELECT k, SUM(v) AS total FROM events WATERMARK et TIMELINE heuristic ARRIVAL at
    GROUP BY k WINDOW FIXED(SIZE 2m) TRIGGER {trigger} ALLOWED LATENESS 1h EMIT {mode}"""
LENGTH = "CASE WHEN window_end - window_start < INTERVAL 3 MINUTES THEN 'short' ELSE 'long' END"
RETRACTING = SESSIONS.format(mode="ACCUMULATING AND RETRACTING")


def test_the_stage_emits_retractions(spark, paper_views):
    df = sqlflow.sql(spark, f"WITH s AS ({RETRACTING}) SELECT total FROM s WHERE is_retraction")
    assert sorted(r["total"] for r in df.collect()) == [3, 5, 7, 10, 25]


def test_count_sum_avg_apply_retractions_by_subtraction(spark, paper_views):
    query = f"""WITH sessions AS ({RETRACTING})
        SELECT {LENGTH} AS length, COUNT(*) AS n, SUM(total) AS total, AVG(total) AS mean, COUNT(total) AS c
        FROM sessions GROUP BY 1"""
    df = sqlflow.sql(spark, query)
    assert df.dtypes == [("length", "string"), ("n", "bigint"), ("total", "bigint"), ("mean", "double"),
                         ("c", "bigint")]
    assert sorted(map(tuple, df.collect())) == [("long", 1, 39, 39.0, 1), ("short", 1, 12, 12.0, 1)]
    plan = sqlflow.explain(query, spark)
    assert "COALESCE(SUM(IF(sessions.is_retraction, -1, 1)), 0) AS n" in plan
    assert "SUM(IF(sessions.is_retraction, -(total), total)) AS total" in plan
    assert "HAVING SUM(IF(sessions.is_retraction, -1, 1)) <> 0" in plan


def test_a_group_whose_rows_all_cancel_disappears(spark, paper_views):
    query = f"""WITH sessions AS ({RETRACTING})
        SELECT total, COUNT(*) AS n FROM sessions GROUP BY total"""
    assert sorted(map(tuple, sqlflow.sql(spark, query).collect())) == [(12, 1), (39, 1)]


def test_min_max_count_distinct_read_the_final_panes(spark, paper_views):
    query = f"""WITH sessions AS ({RETRACTING})
        SELECT {LENGTH} AS length, MIN(total) AS low, MAX(total) AS top, COUNT(DISTINCT total) AS d, COUNT(*) AS n
        FROM sessions GROUP BY 1"""
    assert sorted(map(tuple, sqlflow.sql(spark, query).collect())) == [("long", 39, 39, 1, 1), ("short", 12, 12, 1, 1)]


def test_a_windowed_select_downstream_applies_retractions(spark, paper_views):
    query = f"""WITH sessions AS ({RETRACTING})
        SELECT k, COUNT(*) AS sessions, SUM(total) AS total FROM sessions
        GROUP BY k WINDOW GLOBAL ON window_start"""
    for path in ("auto", "engine"):  # auto: the upstream replay on the engine, the GLOBAL count native
        df = sqlflow.sql(spark, query, path=path)
        assert [(r["k"], r["sessions"], r["total"]) for r in df.collect()] == [("k", 2, 51)]


def test_min_through_another_select_is_refused(spark, paper_views):
    query = f"""WITH sessions AS ({RETRACTING}), long AS (SELECT * FROM sessions WHERE total > 10)
        SELECT MAX(total) AS top FROM long"""
    with pytest.raises(sqlflow.SqlflowUnsupportedError) as info:
        sqlflow.sql(spark, query)
    assert info.value.message == (
        "this SELECT aggregates (MAX) over the SELECT with WINDOW SESSIONS at line 3, "
        "column 16 through another SELECT: it needs the stage's final panes")


def test_sum_through_another_select_subtracts(spark, paper_views):
    query = f"""WITH sessions AS ({RETRACTING}), big AS (SELECT * FROM sessions WHERE total > 4)
        SELECT SUM(total) AS total, COUNT(*) AS n FROM big"""
    assert tuple(sqlflow.sql(spark, query).first()) == (51, 2)


def test_accumulating_upstream_is_read_as_the_last_pane_of_each_window(spark, paper_views):
    stage = FIXED.format(trigger="WATERMARK EARLY PERIOD 1m", mode="ACCUMULATING")
    panes = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT total FROM s").collect()
    assert len(panes) > 4 and sum(r["total"] for r in panes) > 51  # refinements overlap
    df = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT SUM(total) AS total, COUNT(*) AS windows FROM s")
    assert tuple(df.first()) == (51, 4)


def test_discarding_upstream_is_read_as_deltas(spark, paper_views):
    stage = FIXED.format(trigger="WATERMARK EARLY PERIOD 1m", mode="DISCARDING")
    panes = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT total FROM s").collect()
    df = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT SUM(total) AS total, COUNT(*) AS panes FROM s")
    assert tuple(df.first()) == (51, len(panes))


def test_accumulating_sessions_downstream_warns(spark, paper_views):
    stage = SESSIONS.format(mode="ACCUMULATING")
    with pytest.warns(SqlflowPipelineWarning, match="use EMIT ACCUMULATING AND RETRACTING upstream"):
        df = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT SUM(total) AS total FROM s")
    # the merged-away sessions 5, 7 and 10 are never replaced: 39 + 12 + 5 + 7 + 10 + 25 + 3
    assert df.first()["total"] == 101


def test_a_native_stage_needs_nothing(spark, paper_views):
    stage = "SELECT k, SUM(v) AS total FROM events GROUP BY k WINDOW SESSIONS(GAP 1m) ON et " \
            "EMIT ACCUMULATING AND RETRACTING"
    query = f"WITH s AS ({stage}) SELECT COUNT(*) AS n, SUM(total) AS total FROM s"
    assert tuple(sqlflow.sql(spark, query, path="native").first()) == (2, 51)
    assert tuple(sqlflow.sql(spark, query, path="engine").first()) == (2, 51)


def _docs_example(repo_root, heading: str) -> tuple[str, list[tuple]]:
    """The SQL of a docs/pipelines.md example and the rows of the output printed under it."""
    import re

    text = (repo_root / "docs" / "pipelines.md").read_text(encoding="utf-8")
    section = text[text.index(heading):]
    sql = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    table = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [tuple(c.strip() for c in ln.strip("|").split("|")) for ln in lines[1:]]
    return sql, [header] + rows


def test_the_docs_sessions_by_length_example_prints_what_the_docs_show(spark, repo_root):
    """docs/pipelines.md: a session lasts at least its gap, so the example must pick a threshold
    above it for 'short' to occur."""
    from sqlflow.demo import load_clickstream

    load_clickstream(spark)
    sql, (header, *rows) = _docs_example(repo_root, "## Example: sessions by length")
    df = sqlflow.sql(spark, sql)
    assert df.columns == header == ["length", "sessions", "clicks", "busiest"]
    assert [tuple(str(v) for v in r) for r in df.collect()] == rows == [
        ("long", "66", "1590", "82"), ("short", "74", "410", "20")]
    assert sum(int(r[2]) for r in rows) == 2000  # every click in exactly one final session


@pytest.mark.parametrize("path", ["auto", "engine"])
def test_a_bounded_default_trigger_sessions_stage_read_by_count_and_max_does_not_warn(spark, paper_views, path):
    """Each window of a bounded stage with the default trigger emits one final pane: no merged-away
    session is ever in its output, so there is nothing to warn about."""
    import warnings

    stage = "SELECT k, SUM(v) AS total FROM events GROUP BY k WINDOW SESSIONS(GAP 1m) ON et"
    with warnings.catch_warnings():
        warnings.simplefilter("error", SqlflowPipelineWarning)
        df = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT COUNT(*) AS n, MAX(total) AS top FROM s", path=path)
    assert tuple(df.first()) == (2, 39)
