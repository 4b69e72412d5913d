"""A windowed SELECT over a replayed windowed stage (docs/semantics.md, 1.3; docs/pipelines.md).

The paper's running example (`events(k, id, v, et, at)`, heuristic watermark `heuristic`):

    e1 5 12:00:26 @12:05:19   e2 7 12:02:24 @12:05:39   e3 3 12:03:39 @12:06:13
    e4 4 12:03:54 @12:06:39   e5 3 12:04:19 @12:06:50   e6 8 12:03:06 @12:07:06
    e7 3 12:06:39 @12:07:19   e8 9 12:01:25 @12:08:19   e9 8 12:07:26 @12:08:39
    e10 1 12:07:46 @12:08:59
    W: 12:02 @12:06:05, 12:04 @12:07:30, 12:06 @12:07:40, 12:08:30 @12:09:30, +inf @12:10

Stage 1 (figure 14): sessions of gap 1m, early firings every minute until the watermark, then one
per late instant, ACCUMULATING AND RETRACTING, OUTPUT TIMESTAMP END OF WINDOW (the default:
window_end - 1us). Its rows, with their holds (docs/semantics.md, 1.3: a pane's from the arrival of
its first timely new element, a retraction's from the arrival of the element that joined the
retracted session to the pending one, each to its emission, at its own output_time; shown per
instant at the smallest of them):

    @12:06:00  P1 +5  [12:00:26, 12:01:26) EARLY   o 12:01:25.999999  held [12:05:19, 12:06:00)
    @12:06:00  P2 +7  [12:02:24, 12:03:24) EARLY   o 12:03:23.999999  held [12:05:39, 12:06:00)
    @12:07:00  P3 +10 [12:03:39, 12:05:19) EARLY   o 12:05:18.999999  held [12:06:13, 12:07:00)
    @12:07:40  -P2, -P3, P4 +25 [12:02:24, 12:05:19) ON_TIME (e6 merges them; e6 arrived at
               12:07:06 with W = 12:02, timely: P4 and both retractions are held from then)
                                                   o 12:05:18.999999  held [12:07:06, 12:07:40)
               at min(12:05:18.999999, 12:03:23.999999 of -P2) = 12:03:23.999999
    @12:08:00  P5 +3  [12:06:39, 12:07:39) EARLY   o 12:07:38.999999  held [12:07:19, 12:08:00)
    @12:08:19  -P1, -P4, P6 +39 [12:00:26, 12:05:19) LATE (e8 is behind W = 12:06, and its
               arrival, which makes the retractions, is their emission): not held
    @12:09:00  -P5, P7 +12 [12:06:39, 12:08:46) EARLY o 12:08:45.999999 (e9 at 12:08:39 joins
               P5's session) held [12:08:39, 12:09:00) at min(12:08:45.999999, 12:07:38.999999 of -P5)

Its output watermark OW = running max of min(W, holds):
    -inf until 12:06:05; 12:02 from 12:06:05 (no hold then: P1, P2 released at 12:06:00, P3's
    starts at 12:06:13 above 12:02); 12:03:23.999999 from 12:07:30 (W = 12:04, P4's hold);
    12:06 from 12:07:40 (P4 released; P5 holds 12:07:38.999999 above it); 12:08:30 from 12:09:30;
    +inf at 12:10 (the end).
"""
import datetime as dt
import re

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
from tests.two_stage_expected import stage2_panes

US = dt.timedelta(microseconds=1)
STAGE1 = """SELECT k, SUM(v) AS total FROM events WATERMARK et TIMELINE heuristic ARRIVAL at
    GROUP BY k WINDOW SESSIONS(GAP 1m) TRIGGER WATERMARK EARLY PERIOD 1m
    ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING"""


def T(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"1970-01-01 {clock}")


def rows(df, *names):
    ordered = df.orderBy("emit_time", df.is_retraction.desc(), "window_start")
    return [tuple(getattr(r, n) for n in names) for r in ordered.collect()]


def test_sessions_then_fixed_windows_over_output_time(spark, paper_views):
    """Stage 2: COUNT(*) and SUM(total) of the sessions per 2-minute window of their output_time,
    early firings every minute, ALLOWED LATENESS 1h, retracting. Each stage-1 row arrives at its
    emit_time; retractions subtract. Per window, by hand:

    [12:00, 12:02): +P1 @12:06:00 -> PERIOD boundary 12:06:00 fires EARLY (1, 5). OW reaches 12:02
        at 12:06:05 with nothing new: no ON_TIME pane. -P1 @12:08:19 is late (OW 12:06): LATE (0, 0).
    [12:02, 12:04): +P2 @12:06:00 -> EARLY (1, 7). -P2 @12:07:40 arrives while OW (before that
        instant) is 12:03:23.999999, held by P4: on time; OW then passes 12:04: ON_TIME (0, 0).
        (Without P4's hold OW would have passed 12:04 at 12:07:30 and -P2 would be LATE.)
    [12:04, 12:06): +P3 @12:07:00 -> EARLY (1, 10); -P3 +P4 @12:07:40, OW -> 12:06: ON_TIME
        (1, 25); -P4 +P6 @12:08:19: LATE (1, 39).
    [12:06, 12:08): +P5 @12:08:00 -> EARLY (1, 3); -P5 @12:09:00 -> EARLY (0, 0); OW passes 12:08
        at 12:09:30 with nothing new: no pane.
    [12:08, 12:10): +P7 @12:09:00 -> EARLY (1, 12); at the end (OW +inf) nothing new: no pane.
    Every retraction of a stage-2 pane repeats it (section 5), just before its replacement."""
    df = sqlflow.sql(spark, f"""WITH s AS ({STAGE1})
        SELECT COUNT(*) AS sessions, SUM(total) AS total FROM s
        WINDOW FIXED(SIZE 2m) ON output_time TRIGGER WATERMARK EARLY PERIOD 1m
        ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING""")
    got = rows(df, "sessions", "total", "window_start", "pane_index", "pane_timing", "is_retraction", "emit_time")
    assert got == stage2_panes(T)
    # the last pane of each window holds the sessions whose final output_time falls in it: P6 (39)
    # at 12:05:18.999999 and P7 (12) at 12:08:45.999999, the 51 of the input
    assert sum(r[1] * (-1 if r[5] else 1) for r in got) == 51


def test_without_lateness_the_late_rows_are_dropped_and_counted(spark, paper_views):
    """The same stage 2 without ALLOWED LATENESS: its windows [12:00, 12:02) and [12:04, 12:06)
    expire when OW passes their ends (12:06:05, 12:07:40), so the three rows of 12:08:19 (-P1, -P4
    and the LATE P6, all behind OW = 12:06) are dropped as too late, and listed."""
    df = sqlflow.sql(spark, f"""WITH s AS ({STAGE1})
        SELECT COUNT(*) AS sessions, SUM(total) AS total FROM s
        WINDOW FIXED(SIZE 2m) ON output_time TRIGGER WATERMARK EARLY PERIOD 1m EMIT ACCUMULATING AND RETRACTING""")
    assert [r for r in rows(df, "emit_time") if r[0] == T("12:08:19")] == []
    dropped = sqlflow.dropped(df).where("reason = 'too late'").orderBy("event_time").collect()
    assert [(r.event_time, r.arrival_time, r.window_start) for r in dropped] == [
        (T("12:01:26") - US, T("12:08:19"), T("12:00:00")),
        (T("12:05:19") - US, T("12:08:19"), T("12:04:00")),
        (T("12:05:19") - US, T("12:08:19"), T("12:04:00")),
    ]


def test_explain_names_each_stage_watermark_source(spark, paper_views):
    text = sqlflow.explain(f"WITH s AS ({STAGE1})\nSELECT COUNT(*) AS n FROM s WINDOW FIXED(SIZE 2m) ON output_time",
                           spark)
    inputs = [line.strip() for line in text.splitlines() if line.strip().startswith("input:")]
    assert inputs[0].startswith("input: replay of ARRIVAL at, watermark TIMELINE heuristic")
    assert inputs[1].startswith(
        "input: the panes of the SELECT with WINDOW SESSIONS at line 2, column 16 as it emits them: each row "
        "arrives at its emit_time with its output_time as event time; watermark: that stage's output watermark")


def test_a_window_on_another_column_is_refused(spark, paper_views):
    """The output watermark bounds output_time, not window_end (a session ending on an hour
    boundary would fall in the next hour while its output_time is in this one)."""
    with pytest.raises(SqlflowUnsupportedError) as info:
        sqlflow.sql(spark, f"WITH s AS ({STAGE1})\nSELECT COUNT(*) AS n FROM s WINDOW FIXED(SIZE 1h) ON window_end")
    assert str(info.value).splitlines()[:2] == [
        "sqlflow: WINDOW: this window reads the panes of the SELECT with WINDOW SESSIONS at line 2, column 16 "
        "as they are emitted: its event time is their output_time (the time the stage's output watermark "
        "bounds), not window_end (line 4, column 54)",
        "  SELECT COUNT(*) AS n FROM s WINDOW FIXED(SIZE 1h) ON window_end"]


def test_aggregates_that_need_final_panes_are_refused(spark, paper_views):
    """MAX over a retracting stage read as it emits has no final panes to read."""
    with pytest.raises(SqlflowUnsupportedError) as info:
        sqlflow.sql(spark, f"WITH s AS ({STAGE1})\nSELECT MAX(total) AS m FROM s WINDOW FIXED(SIZE 2m) ON output_time")
    assert str(info.value).splitlines()[0] == (
        "sqlflow: SELECT: the SELECT at line 4, column 8 aggregates (MAX) over the SELECT with WINDOW SESSIONS at "
        "line 2, column 16, a replay whose panes this window reads as they are emitted: only COUNT, SUM and AVG can "
        "apply its retractions as they come (the other aggregates need its final panes, which a changelog read as "
        "it comes never has) (line 4, column 8)")


def test_the_docs_example_runs_and_prints_what_the_docs_show(spark, repo_root):
    """docs/pipelines.md, "A window over a replayed stage": the clickstream's sessions per hour."""
    from sqlflow.demo import load_clickstream

    load_clickstream(spark)
    text = (repo_root / "docs" / "pipelines.md").read_text(encoding="utf-8")
    section = text[text.index("## A window over a replayed stage"):]
    sql = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    table = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    header, *expected = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    df = sqlflow.sql(spark, sql)
    assert df.columns == header
    got = [[str(v) for v in r] for r in df.collect()]
    assert [g[:4] for g in got] == [e[:4] for e in expected]
    assert [dt.datetime.fromisoformat(g[4]) for g in got] == [dt.datetime.fromisoformat(e[4]) for e in expected]
    assert sum(int(e[1]) for e in expected) == 140 and sum(int(e[2]) for e in expected) == 2000


def test_the_semantics_example_prints_what_the_docs_show(spark, paper_views, repo_root):
    """docs/semantics.md 1.3's example: this module's pipeline, its stage-2 panes as a table."""
    text = (repo_root / "docs" / "semantics.md").read_text(encoding="utf-8")
    section = text[text.index("### 1.3 Time across stages"):text.index("## 2. Windows")]
    sql = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    table = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    expected = [tuple(c.strip() for c in ln.strip("|").split("|")) for ln in lines[1:]]
    df = sqlflow.sql(spark, sql)
    assert df.columns[:len(header)] == header
    assert [tuple(str(v) for v in r) for r in df.select(*header).collect()] == expected
    assert len(expected) == 15
