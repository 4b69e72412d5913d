"""Column output_time and the OUTPUT TIMESTAMP clause through `sqlflow.sql` (docs/semantics.md, 8).

The paper's running example (`events(k, id, v, et, at)`, heuristic watermark `heuristic`), replayed:
the ten data with their event times (et) and arrival times (at):

    e1 5 12:00:26 @12:05:19   e2 7 12:02:24 @12:05:39   e3 3 12:03:39 @12:06:13
    e4 4 12:03:54 @12:06:39   e5 3 12:04:19 @12:06:50   e6 8 12:03:06 @12:07:06
    e7 3 12:06:39 @12:07:19   e8 9 12:01:25 @12:08:19   e9 8 12:07:26 @12:08:39
    e10 1 12:07:46 @12:08:59
    watermark: 12:02 @12:06:05, 12:04 @12:07:30, 12:06 @12:07:40, 12:08:30 @12:09:30, +inf @12:10
"""
import datetime as dt
import re

import pytest

import sqlflow

US = dt.timedelta(microseconds=1)
REPLAY = "FROM events WATERMARK et TIMELINE heuristic ARRIVAL at"


def T(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"1970-01-01 {clock}")


def test_the_docs_example_prints_what_the_docs_show(spark, paper_views, repo_root):
    text = (repo_root / "docs" / "semantics.md").read_text(encoding="utf-8")
    section = text[text.index("## 8. Output timestamps"):]
    sql = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    table = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [tuple(c.strip() for c in ln.strip("|").split("|")) for ln in lines[1:]]
    df = sqlflow.sql(spark, sql)
    assert df.columns[:len(header)] == header
    assert dict(df.dtypes)["output_time"] == "timestamp"
    assert [tuple(str(v) for v in r) for r in df.select(*header).collect()] == rows


def test_figure_14_sessions_retractions_repeat_output_time(spark, paper_views):
    """Figure 14 (sessions, gap 1m, early firings every minute, then one per late datum, retracting)
    with OUTPUT TIMESTAMP EARLIEST: each pane carries the earliest event time of the timely
    elements it emits first; a retraction repeats the output_time of the pane it withdraws; the
    LATE pane has no timely element and carries its window's last instant."""
    df = sqlflow.sql(spark, f"""
        SELECT k, SUM(v) AS total {REPLAY} GROUP BY k WINDOW SESSIONS(GAP 1m)
        TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
        ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING OUTPUT TIMESTAMP EARLIEST""")
    got = [(r.total, r.window_start, r.pane_index, r.pane_timing, r.is_retraction, r.emit_time, r.output_time)
           for r in df.orderBy("emit_time", df.is_retraction.desc(), "window_start").collect()]
    assert got == [
        # 12:06: sessions {e1} and {e2} fire early; each holds one element, timely (W = -inf)
        (5, T("12:00:26"), 0, "EARLY", False, T("12:06:00"), T("12:00:26")),
        (7, T("12:02:24"), 0, "EARLY", False, T("12:06:00"), T("12:02:24")),
        # 12:07: session {e3, e4, e5} = 10; e3, e4, e5 arrived after W = 12:02 but are not behind it
        (10, T("12:03:39"), 0, "EARLY", False, T("12:07:00"), T("12:03:39")),
        # 12:07:40 (W = 12:06): e6 (12:03:06, arrived 12:07:06 with W = 12:02) merged {e2} and
        # {e3, e4, e5} into [12:02:24, 12:05:19): both retracted with their own output times, and
        # the ON_TIME 25 emits e6 for the first time: EARLIEST = 12:03:06
        (7, T("12:02:24"), 0, "EARLY", True, T("12:07:40"), T("12:02:24")),
        (10, T("12:03:39"), 0, "EARLY", True, T("12:07:40"), T("12:03:39")),
        (25, T("12:02:24"), 1, "ON_TIME", False, T("12:07:40"), T("12:03:06")),
        # 12:08: {e7}
        (3, T("12:06:39"), 0, "EARLY", False, T("12:08:00"), T("12:06:39")),
        # 12:08:19: the late e8 (12:01:25, W = 12:06) joins {e1} and the 25: LATE 39, retractions
        # of 5 and 25 repeat 12:00:26 and 12:03:06; e8 is behind the watermark, so the LATE pane
        # carries its window's END OF WINDOW, 12:05:19 - 1us
        (5, T("12:00:26"), 0, "EARLY", True, T("12:08:19"), T("12:00:26")),
        (25, T("12:02:24"), 1, "ON_TIME", True, T("12:08:19"), T("12:03:06")),
        (39, T("12:00:26"), 2, "LATE", False, T("12:08:19"), T("12:05:19") - US),
        # 12:09: e9, e10 join {e7}: 12 first emits e9 (12:07:26) and e10 (12:07:46)
        (3, T("12:06:39"), 0, "EARLY", True, T("12:09:00"), T("12:06:39")),
        (12, T("12:06:39"), 1, "EARLY", False, T("12:09:00"), T("12:07:26")),
    ]


@pytest.mark.parametrize("path", ["native", "engine"])
@pytest.mark.parametrize("policy,expected", [
    # bounded data: one pane per window holding all of it; [12:00, 12:02) = e1, e8; [12:02, 12:04) =
    # e2, e3, e4, e6; [12:04, 12:06) = e5; [12:06, 12:08) = e7, e9, e10
    ("", ["12:01:59.999999", "12:03:59.999999", "12:05:59.999999", "12:07:59.999999"]),
    ("OUTPUT TIMESTAMP END OF WINDOW", ["12:01:59.999999", "12:03:59.999999", "12:05:59.999999",
                                       "12:07:59.999999"]),
    ("OUTPUT TIMESTAMP START OF WINDOW", ["12:00:00", "12:02:00", "12:04:00", "12:06:00"]),
    ("OUTPUT TIMESTAMP EARLIEST", ["12:00:26", "12:02:24", "12:04:19", "12:06:39"]),
    ("OUTPUT TIMESTAMP LATEST", ["12:01:25", "12:03:54", "12:04:19", "12:07:46"]),
])
def test_bounded_policies_on_both_paths(spark, paper_views, path, policy, expected):
    df = sqlflow.sql(spark, f"SELECT k, SUM(v) AS total FROM events GROUP BY k WINDOW FIXED(SIZE 2m) ON et {policy}",
                     path=path)
    assert dict(df.dtypes)["output_time"] == "timestamp"
    assert [r.output_time for r in df.orderBy("window_start").collect()] == [T(c) for c in expected]


def test_global_window_output_time(spark, paper_views):
    """GLOBAL has no bounds: NULL by default, the elements' extremes with EARLIEST / LATEST."""
    rows = {p: sqlflow.sql(spark, f"SELECT k, SUM(v) AS total FROM events GROUP BY k WINDOW GLOBAL ON et {p}").first()
            for p in ("", "OUTPUT TIMESTAMP EARLIEST", "OUTPUT TIMESTAMP LATEST")}
    assert [r.output_time for r in rows.values()] == [None, T("12:00:26"), T("12:07:46")]
