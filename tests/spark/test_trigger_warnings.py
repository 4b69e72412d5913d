"""Triggers that cannot fire on their input: `explain` says so and `sqlflow.sql` warns
(SqlflowTriggerWarning), saying what the windows emit instead."""
import warnings

import pytest

import sqlflow
from sqlflow.spark import trigger_checks
from sqlflow.spark.trigger_checks import SqlflowTriggerWarning

BOUNDED = "SELECT k, SUM(v) AS total FROM events GROUP BY k WINDOW FIXED(SIZE 2m) ON et TRIGGER {trigger}"
REPLAY = ("SELECT k, SUM(v) AS total FROM events WATERMARK et TIMELINE heuristic ARRIVAL at GROUP BY k "
          "WINDOW FIXED(SIZE 2m) TRIGGER {trigger}")


def warned(spark, query) -> tuple[list[str], list]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = sqlflow.sql(spark, query)
    ours = [w for w in caught if w.category is SqlflowTriggerWarning]
    assert all(w.filename == __file__ for w in ours)  # the user's line, not sqlflow's
    return [str(w.message) for w in ours], sorted(r.total for r in df.collect())


CLOSED = ("the window is then closed, and its later elements are dropped (counted as 'closed window', listed by "
          "sqlflow.dropped); REPEAT(...) or WATERMARK ... LATE keeps it firing")


def test_a_trigger_that_finishes_while_the_window_accepts_data(spark, paper_views):
    """COUNT 2 with ALLOWED LATENESS 1h on the paper's replay, panes derived by hand: [12:00, 12:02)
    fires at its 2nd element, the late 9 (5 + 9 = 14); [12:02, 12:04) at 7 and 3 (10), then 4 and 8
    are dropped; [12:04, 12:06) holds only 3, emitted at the end of the input; [12:06, 12:08) fires
    at 3 and 8 (11), then 1 is dropped. Three rows dropped as closed window, said beforehand."""
    query = REPLAY.format(trigger="COUNT 2 ALLOWED LATENESS 1h")
    messages, totals = warned(spark, query)
    note = f"TRIGGER COUNT 2 can finish before the watermark passes the window's end: {CLOSED}"
    assert messages == [f"sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: {note}"]
    assert totals == [3, 10, 11, 14]
    with pytest.warns(SqlflowTriggerWarning):
        df = sqlflow.sql(spark, query)
    assert sqlflow.metrics(df)["dropped_closed_window"] == 3
    assert sorted(r.v for r in sqlflow.dropped(df).collect()) == [1, 4, 8]
    assert f"  warning: {note}" in sqlflow.explain(query).splitlines()  # without Spark, too
    assert f"  warning: {note}" in sqlflow.explain(query, spark).splitlines()


def test_a_watermark_trigger_with_allowed_lateness(spark, paper_views):
    """WATERMARK alone finishes as the watermark passes the end; with ALLOWED LATENESS the window
    still accepts late rows, which are then dropped as closed: the 9 (event 12:01:25, arriving at
    12:08:19, after [12:00, 12:02) fired with 5 at 12:06:05). The same panes as without the lateness,
    where the 9 is too late."""
    messages, totals = warned(spark, REPLAY.format(trigger="WATERMARK ALLOWED LATENESS 1h"))
    note = (f"TRIGGER WATERMARK finishes when the watermark passes the window's end, while ALLOWED LATENESS 1h "
            f"still accepts late elements: {CLOSED}")
    assert messages == [f"sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: {note}"]
    assert totals == [3, 5, 12, 22]
    with pytest.warns(SqlflowTriggerWarning):
        df = sqlflow.sql(spark, REPLAY.format(trigger="WATERMARK ALLOWED LATENESS 1h"))
    assert sqlflow.metrics(df)["dropped_closed_window"] == 1
    assert sqlflow.metrics(df)["dropped_too_late"] == 0


def test_count_on_bounded_data_finishes_too(spark, paper_views):
    """Bounded rows come in event-time order: COUNT 2 closes [12:02, 12:04) at 7 and 8 (15), so 3
    and 4 are dropped, and [12:06, 12:08) at 3 and 8 (11), so 1 is dropped."""
    messages, totals = warned(spark, BOUNDED.format(trigger="COUNT 2"))
    note = f"TRIGGER COUNT 2 can finish before the watermark passes the window's end: {CLOSED}"
    assert messages == [f"sqlflow: the SELECT with WINDOW FIXED at line 1, column 50: {note}"]
    assert totals == [3, 11, 14, 15]


def test_period_on_bounded_data_never_fires(spark, paper_views):
    query = BOUNDED.format(trigger="REPEAT(PERIOD 1m)")
    messages, totals = warned(spark, query)
    note = ("PERIOD 1m never fires on bounded data: there is no processing time without ARRIVAL; each window "
            "emits one pane, at the end of the input")
    assert messages == [f"sqlflow: the SELECT with WINDOW FIXED at line 1, column 50: {note}"]
    assert totals == [3, 12, 14, 22]  # figure 10's panes, at the end of the input
    assert f"  warning: {note}" in sqlflow.explain(query, spark).splitlines()


def test_delay_in_a_composite_on_bounded_data(spark, paper_views):
    messages, totals = warned(spark, BOUNDED.format(trigger="FIRST_OF(COUNT 2, DELAY 30s)"))
    # COUNT 2 still fires, so no "at the end of the input": each window's first two rows (in
    # event-time order) fire it once; [12:04, 12:06) has one row, emitted at the end. FIRST_OF
    # finishes as it fires: the rows after a window's second are dropped (the finishing note)
    assert messages == [f"sqlflow: the SELECT with WINDOW FIXED at line 1, column 50: {note}" for note in (
        f"TRIGGER FIRST_OF(COUNT 2, DELAY 30s) can finish before the watermark passes the window's end: {CLOSED}",
        "DELAY 30s never fires on bounded data: there is no processing time without ARRIVAL; COUNT 2 still fires")]
    assert totals == [3, 11, 14, 15]


def test_count_above_the_rows_of_a_replay_never_fires(spark, paper_views):
    messages, totals = warned(spark, REPLAY.format(trigger="REPEAT(COUNT 100000)"))
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: COUNT 100000 never fires: "
                        "the input has 10 rows; each window emits one pane, when it expires: when the watermark "
                        "passes its end, or at the end of the input"]
    assert totals == [3, 5, 12, 22]  # one pane per window as the watermark passes its end; the late 9 is dropped


def test_what_a_replay_emits_instead_names_the_allowed_lateness(spark, paper_views):
    messages, totals = warned(spark, REPLAY.format(trigger="REPEAT(COUNT 100000) ALLOWED LATENESS 1m"))
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: COUNT 100000 never fires: "
                        "the input has 10 rows; each window emits one pane, when it expires: when the watermark "
                        "passes its end + 1m, or at the end of the input"]
    assert totals == [3, 5, 12, 22]  # the 9 arrives after [12:00, 12:02) expired even with a minute's lateness
    messages, totals = warned(spark, REPLAY.format(trigger="REPEAT(COUNT 100000) ALLOWED LATENESS UNBOUNDED"))
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: COUNT 100000 never fires: "
                        "the input has 10 rows; each window emits one pane, at the end of the input"]
    assert totals == [3, 12, 14, 22]  # no window expires before the end: the late 9 is counted too


def test_a_part_that_never_fires_names_the_parts_that_do(spark, paper_views):
    messages, _ = warned(spark, REPLAY.format(trigger="WATERMARK EARLY COUNT 100000"))
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: COUNT 100000 never fires: "
                        "the input has 10 rows; WATERMARK still fires"]
    # ALL_OF needs every child: one that never fires silences it
    messages, _ = warned(spark, REPLAY.format(trigger="REPEAT(ALL_OF(WATERMARK, COUNT 100000))"))
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: COUNT 100000 never fires: "
                        "the input has 10 rows; each window emits one pane, when it expires: when the watermark "
                        "passes its end, or at the end of the input"]


def test_the_same_warning_shows_every_time(spark):
    """Python shows a warning once per code location by default: two notebook cells with the same
    mistake (same text, same line) would warn once. sqlflow's warnings show each time. (Bounded
    data: a replay's pandas calls happen to reset Python's registries, which hid this.)"""
    spark.sql("""CREATE OR REPLACE TEMP VIEW few_events AS SELECT * FROM VALUES
      ('k', 1, TIMESTAMP'2024-01-01 00:00:10'), ('k', 2, TIMESTAMP'2024-01-01 00:00:20') AS t(k, v, et)""")
    query = "SELECT k, SUM(v) AS total FROM few_events GROUP BY k WINDOW GLOBAL ON et TRIGGER REPEAT(COUNT 3)"
    warned(spark, query)  # a first run imports what it needs (an import may reset the registries)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default action: once per location
        for _ in range(2):
            sqlflow.sql(spark, query)
    assert [w.category for w in caught] == [SqlflowTriggerWarning, SqlflowTriggerWarning]
    assert [w.lineno for w in caught] == [caught[0].lineno] * 2 and caught[0].filename == __file__


def test_warn_shows_each_time_and_keeps_the_users_filters():
    """No Spark: trigger_checks.warn twice from one line warns twice under Python's default
    action; `ignore` and `error` filters still apply."""
    def twice():
        for _ in range(2):
            trigger_checks.warn("the SELECT", ["COUNT 5 never fires: the input has 2 rows"])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        twice()
    assert [str(w.message) for w in caught] == ["sqlflow: the SELECT: COUNT 5 never fires: the input has 2 rows"] * 2
    assert {w.filename for w in caught} == {__file__}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", SqlflowTriggerWarning)
        twice()
    assert caught == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", SqlflowTriggerWarning)
        with pytest.raises(SqlflowTriggerWarning, match="COUNT 5 never fires"):
            twice()


def test_when_never_true_on_a_replay(spark, paper_views):
    messages, _ = warned(spark, REPLAY.format(trigger="REPEAT(FIRST_OF(WHEN(v > 100), WATERMARK))"))
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: WHEN(v > 100) never fires: "
                        "it is true for none of the 10 input rows; WATERMARK still fires"]


def test_count_above_a_row_count_spark_knows(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW few_events AS SELECT * FROM VALUES
      ('k', 1, TIMESTAMP'2024-01-01 00:00:10'), ('k', 2, TIMESTAMP'2024-01-01 00:00:20') AS t(k, v, et)""")
    messages, totals = warned(spark, "SELECT k, SUM(v) AS total FROM few_events GROUP BY k "
                                     "WINDOW GLOBAL ON et TRIGGER REPEAT(COUNT 3)")
    assert messages == ["sqlflow: the SELECT with WINDOW GLOBAL at line 1, column 54: COUNT 3 never fires: "
                        "the input has 2 rows; each window emits one pane, at the end of the input"]
    assert totals == [3]


@pytest.mark.parametrize("query", [
    BOUNDED.format(trigger="REPEAT(WATERMARK)"),
    BOUNDED.format(trigger="REPEAT(COUNT 2)"),
    REPLAY.format(trigger="WATERMARK EARLY PERIOD 1m LATE COUNT 1"),
    REPLAY.format(trigger="REPEAT(COUNT 10)"),
    REPLAY.format(trigger="REPEAT(FIRST_OF(WHEN(v > 8), WATERMARK))"),
    REPLAY.format(trigger="WATERMARK"),  # finishes as the window expires (no ALLOWED LATENESS)
    REPLAY.format(trigger="REPEAT_UNTIL(PERIOD 1m, WATERMARK)"),
    BOUNDED.format(trigger="WATERMARK ALLOWED LATENESS 1h"),  # bounded input ends as the watermark passes
    REPLAY.format(trigger="WATERMARK EARLY COUNT 1 ALLOWED LATENESS UNBOUNDED"),
])
def test_triggers_that_can_fire_are_not_warned_about(spark, paper_views, query):
    assert warned(spark, query)[0] == []


def test_the_docs_example(spark, repo_root, capsys):
    """docs/bounded-execution.md, "Triggers that cannot fire": the snippet prints what it shows."""
    import re

    from sqlflow.demo import load_clickstream

    text = (repo_root / "docs" / "bounded-execution.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text[text.index("**Triggers that cannot fire.**"):], re.S).group(1)
    load_clickstream(spark)
    exec(code, {"sqlflow": sqlflow, "spark": spark})
    shown = " ".join(line[2:] for line in code.splitlines() if line.startswith("# "))
    assert capsys.readouterr().out.strip() == shown == (
        "sqlflow: the SELECT with WINDOW FIXED at line 1, column 60: PERIOD 1m never fires on bounded data: "
        "there is no processing time without ARRIVAL; each window emits one pane, at the end of the input")


def test_on_time_always_with_a_trigger_that_never_fires_on_the_watermark(spark, paper_views):
    """EMIT ... ON TIME ALWAYS adds nothing when no firing happens as the
    watermark passes a window's end: said, and the panes are the ones without the option."""
    query = REPLAY.format(trigger="REPEAT(PERIOD 1m) EMIT ACCUMULATING ON TIME ALWAYS")
    messages, totals = warned(spark, query)
    assert messages == ["sqlflow: the SELECT with WINDOW FIXED at line 1, column 93: ON TIME ALWAYS adds no "
                        "pane: the trigger never fires when the watermark passes a window's end (it has no WATERMARK)"]
    assert totals == warned(spark, REPLAY.format(trigger="REPEAT(PERIOD 1m)"))[1]
    messages, _ = warned(spark, REPLAY.format(trigger="WATERMARK EARLY PERIOD 1m EMIT ACCUMULATING ON TIME ALWAYS"))
    assert messages == []
