"""%sqlflow and %%sqlflow, driven through a real IPython shell (run_cell), one option at a time."""
from __future__ import annotations

import threading
import time

import pytest

from sqlflow.errors import SqlflowAnalysisError, SqlflowSyntaxError
from sqlflow.interfaces.magic import ResultTable

#: The tests marked `defaults` run again on a session with Spark's defaults (tests/conftest.py):
#: those that reach the session (its settings and variables, Spark's errors, windowed queries,
#: streams); the others (parsing, parameters, display, options) do not depend on it.


def run(ipython, cell):
    result = ipython.run_cell(cell)
    return result


@pytest.mark.defaults
def test_line_magic_shows_an_html_table(ipython):
    r = run(ipython, "%sqlflow SELECT 1 AS a, 'x<y' AS b, CAST(NULL AS INT) AS c")
    assert r.success
    assert isinstance(r.result, ResultTable)
    html = r.result._repr_html_()
    assert "<th>a</th>" in html and "x&lt;y" in html and "NULL" in html and "1 row" in html
    assert "x<y" in repr(r.result)


def test_cell_magic_runs_several_statements_and_shows_the_last(ipython):
    r = run(ipython, "%%sqlflow\nCREATE OR REPLACE TEMPORARY VIEW magic_nums AS SELECT id FROM range(10);\n"
                     "-- a comment\nSELECT COUNT(*) AS n\nFROM magic_nums")
    assert r.success
    assert r.result.dataframe.collect()[0]["n"] == 10


def test_ddl_alone_shows_nothing(ipython):
    r = run(ipython, "%sqlflow CREATE OR REPLACE TEMPORARY VIEW magic_empty AS SELECT 1 AS x")
    assert r.success and r.result is None


def test_out_stores_the_dataframe(ipython):
    r = run(ipython, "%%sqlflow -o magic_df\nSELECT id FROM range(3)")
    assert r.success
    df = ipython.user_ns["magic_df"]
    assert type(df).__name__ == "DataFrame" and [row.id for row in df.collect()] == [0, 1, 2]


def test_limit_fetches_only_what_is_shown(ipython):
    # a hundred billion rows: only a full collect would take long
    r = run(ipython, "%sqlflow --limit 3 SELECT id FROM range(100000000000)")
    assert r.success
    html = r.result._repr_html_()
    assert html.count("<tr>") == 3  # the body rows (the header row has a style attribute)
    assert "showing the first 3 rows; more rows not shown" in html


def test_config_sets_defaults(ipython, magic_config):
    run(ipython, "%config SqlflowMagic.displaylimit = 2")
    assert magic_config.displaylimit == 2
    r = run(ipython, "%sqlflow SELECT id FROM range(5)")
    assert "showing the first 2 rows" in repr(r.result)
    r = run(ipython, "%sqlflow -l 4 SELECT id FROM range(5)")  # the option beats the default
    assert "showing the first 4 rows" in repr(r.result)


@pytest.mark.defaults
def test_session_variable(ipython, spark, magic_config):
    ipython.user_ns["other_name"] = spark
    r = run(ipython, "%sqlflow -s other_name SELECT 7 AS x")
    assert r.success and r.result.dataframe.collect()[0].x == 7
    r = run(ipython, "%sqlflow --session no_such_variable SELECT 1")
    assert not r.success and "no variable 'no_such_variable'" in str(r.error_in_exec)
    ipython.user_ns["not_a_session"] = 42
    run(ipython, "%config SqlflowMagic.session = 'not_a_session'")
    r = run(ipython, "%sqlflow SELECT 1")
    assert not r.success and "not a SparkSession" in str(r.error_in_exec)


def test_python_variables_become_spark_parameters(ipython):
    ipython.user_ns["threshold"] = 3
    ipython.user_ns["word"] = "it's'; DROP VIEW x; --"
    r = run(ipython, "%%sqlflow\nSELECT id, {word} AS w, ':threshold' AS s FROM range(10) WHERE id < :threshold")
    assert r.success
    rows = r.result.dataframe.collect()
    assert [row.id for row in rows] == [0, 1, 2]
    assert {row.w for row in rows} == {"it's'; DROP VIEW x; --"}   # a value, not SQL text
    assert {row.s for row in rows} == {":threshold"}                  # strings are left alone


def test_line_magic_braces_and_dollars_are_parameters_not_text(ipython):
    ipython.user_ns["word"] = "it's'; DROP VIEW x; --"
    ipython.user_ns["n"] = 2
    r = run(ipython, "%sqlflow SELECT id, {word} AS w, '$n' AS d FROM range(5) WHERE id < {n}")
    assert r.success
    rows = r.result.dataframe.collect()
    assert [(row.id, row.w, row.d) for row in rows] == [(0, "it's'; DROP VIEW x; --", "$n"),
                                                        (1, "it's'; DROP VIEW x; --", "$n")]


def test_parameters_inside_a_function_see_its_locals(ipython):
    r = run(ipython, "def f(limit_here):\n    shown = %sqlflow SELECT id FROM range(10) WHERE id < :limit_here\n    return shown\n"
                     "res = f(2)")
    assert r.success
    assert [row.id for row in ipython.user_ns["res"].dataframe.collect()] == [0, 1]


def test_transpile_needs_no_spark_and_shows_text(ipython):
    r = run(ipython, "%sqlflow --transpile SELECT 1 AS one")
    assert r.success and repr(r.result) == "SELECT 1 AS one"
    assert r.result._repr_html_() == "<pre>SELECT 1 AS one</pre>"


def test_explain_plain_sql(ipython):
    r = run(ipython, "%%sqlflow --explain\nSELECT id FROM range(3)")
    assert r.success and "Physical Plan" in repr(r.result)


@pytest.mark.defaults
def test_spark_error_shows_message_and_caret_not_a_stack_trace(ipython, capsys):
    r = run(ipython, "%%sqlflow\nSELECT 1;\nSELECT *\n  FROM no_such_table_here")
    assert not r.success
    assert isinstance(r.error_in_exec, SqlflowAnalysisError)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "TABLE_OR_VIEW_NOT_FOUND" in shown and "(line 4, column 8)" in shown
    assert "  FROM no_such_table_here\n         ^" in shown
    assert "Traceback" not in shown and "py4j" not in shown and "JVM" not in shown


def test_sqlflow_syntax_error_is_located_in_the_cell(ipython, capsys):
    r = run(ipython, "%%sqlflow\nSELECT k, COUNT(*) FROM t GROUP BY k\nWINDOW SESSION(GAP 1m) ON ts")
    assert not r.success and isinstance(r.error_in_exec, SqlflowSyntaxError)
    shown = capsys.readouterr().out
    assert "(line 3, column 8)" in shown and "did you mean SESSIONS(GAP 1m)?" in shown  # line 1: %%sqlflow
    assert "Traceback" not in shown


def test_no_sql_is_a_usage_error(ipython):
    r = run(ipython, "%sqlflow -l 3")
    assert not r.success and "no SQL" in str(r.error_in_exec)


PANES_SQL = """SELECT 'k' AS k, 5 AS total,
  TIMESTAMP'2015-09-01 12:00:00' AS window_start, TIMESTAMP'2015-09-01 12:02:00' AS window_end,
  0 AS pane_index, 'ON_TIME' AS pane_timing, true AS is_last, TIMESTAMP'2015-09-01 12:06:00' AS emit_time"""


def test_plot_draws_the_pane_diagram(ipython, paper, capsys, monkeypatch):
    import sqlflow.diagram as plot_module

    drawn = []
    real = plot_module.plot
    monkeypatch.setattr(plot_module, "plot", lambda *a, **k: drawn.append(k) or real(*a, **k))
    ipython.user_ns["paper_inputs"] = paper.inputs
    ipython.user_ns["paper_watermark"] = paper.watermark
    r = run(ipython, "%%sqlflow --plot --inputs paper_inputs --watermark paper_watermark\n" + PANES_SQL)
    assert r.success and isinstance(r.result, ResultTable)
    assert drawn and drawn[0]["inputs"] is paper.inputs and drawn[0]["watermark"] is paper.watermark
    assert "<Figure size" in capsys.readouterr().out  # displayed in the cell


def test_autoplot_skips_plain_results_and_no_plot_wins(ipython, magic_config, capsys):
    run(ipython, "%config SqlflowMagic.autoplot = True")
    r = run(ipython, "%sqlflow SELECT 1 AS x")  # plain SQL: no diagram
    assert r.success and "<Figure" not in capsys.readouterr().out
    r = run(ipython, "%%sqlflow --no-plot\n" + PANES_SQL)
    assert r.success and "<Figure" not in capsys.readouterr().out


def test_plot_of_rows_that_are_not_panes_is_an_error(ipython):
    r = run(ipython, "%sqlflow --plot SELECT 1 AS x")
    assert not r.success and "not panes" in str(r.error_in_exec)


# ---------------------------------------------------------------- streams


@pytest.mark.defaults
def test_stream_panes_are_shown_while_they_arrive(ipython, spark, stream_files, capsys):
    import pandas as pd

    for i in range(3):
        stream_files.write(pd.DataFrame({"k": ["a", "b"], "v": [i, 10 * i]}), fmt="json")
    spark.readStream.schema("k STRING, v BIGINT").option("maxFilesPerTrigger", 1) \
        .json(str(stream_files.path)).createOrReplaceTempView("magic_stream")
    r = run(ipython, "%%sqlflow -o streamed\nSELECT k, v * 2 AS doubled FROM magic_stream")
    assert r.success
    assert sorted((row.k, row.doubled) for row in ipython.user_ns["streamed"].collect()) == \
        [("a", 0), ("a", 2), ("a", 4), ("b", 0), ("b", 20), ("b", 40)]
    shown = capsys.readouterr().out
    assert "finished: 6 pane rows" in shown
    assert not spark.streams.active


@pytest.mark.defaults
def test_stream_timeout_and_interrupt_stop_the_query(ipython, spark, capsys):
    spark.readStream.format("rate").option("rowsPerSecond", 5).load().createOrReplaceTempView("magic_rate")
    r = run(ipython, "%%sqlflow --trigger '1 second' --timeout 4 -o rated\nSELECT value FROM magic_rate")
    assert r.success and "stopped after 4 s (--timeout)" in capsys.readouterr().out
    assert not spark.streams.active

    import _thread

    timer = threading.Timer(4.0, _thread.interrupt_main)
    timer.start()
    began = time.monotonic()
    r = run(ipython, "%%sqlflow --trigger '1 second'\nSELECT value FROM magic_rate")
    timer.join()
    assert r.success and time.monotonic() - began < 120  # a hang is forever; a busy machine slows stop()
    assert "stopped (interrupted)" in capsys.readouterr().out
    assert not spark.streams.active


# ---------------------------------------------------------------- windowed statements (sqlflow.sql)


@pytest.fixture
def paper_views(ipython, spark, paper):
    spark.createDataFrame(paper.inputs).createOrReplaceTempView("magic_paper")
    spark.createDataFrame(paper.watermark).createOrReplaceTempView("magic_heuristic")
    ipython.user_ns["paper_inputs"] = paper.inputs
    ipython.user_ns["paper_watermark"] = paper.watermark


@pytest.mark.defaults
def test_windowed_query_goes_to_sqlflow(ipython, paper_views):
    r = run(ipython, "%%sqlflow -o fig10\nSELECT k, SUM(v) AS total FROM magic_paper\n"
                     "GROUP BY k WINDOW FIXED(SIZE 2m) ON ts ORDER BY window_start")
    assert r.success, r.error_in_exec
    df = ipython.user_ns["fig10"]
    assert [row.total for row in df.collect()] == [14, 22, 3, 12]
    assert {"window_start", "pane_timing", "emit_time"} <= set(df.columns)


def test_replay_with_parameters_plot_and_explain(ipython, paper_views, capsys):
    ipython.user_ns["min_value"] = 4
    cell = ("%%sqlflow --plot --inputs paper_inputs --watermark paper_watermark --title 'Figure 14' -o fig14\n"
            "SELECT k, SUM(v) AS total\n"
            "FROM magic_paper WATERMARK ts TIMELINE magic_heuristic ARRIVAL arrived_at\n"
            "WHERE v >= :min_value OR v < {min_value}\n"   # every row: checks both markers bind
            "GROUP BY k WINDOW SESSIONS(GAP 1m)\n"
            "TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))\n"
            "ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING\n"
            "ORDER BY emit_time, is_retraction DESC, window_start")
    r = run(ipython, cell)
    assert r.success, r.error_in_exec
    rows = ipython.user_ns["fig14"].collect()
    assert [(-1 if row.is_retraction else 1) * row.total for row in rows] == \
        [5, 7, 10, -7, -10, 25, 3, -5, -25, 39, -3, 12]
    assert "<Figure size" in capsys.readouterr().out

    r = run(ipython, cell.replace("--plot --inputs paper_inputs --watermark paper_watermark --title 'Figure 14' -o fig14",
                                  "--explain"))
    assert r.success and "path: engine" in repr(r.result) and "replay" in repr(r.result)


@pytest.mark.defaults
def test_sqlflow_error_from_spark_analysis_is_located(ipython, paper_views, capsys):
    r = run(ipython, "%%sqlflow\nSELECT k, SUM(nope) AS total FROM magic_paper\nGROUP BY k WINDOW FIXED(SIZE 2m) ON ts")
    assert not r.success
    shown = capsys.readouterr().out
    assert "nope" in shown and "(line 2," in shown and "^" in shown and "Traceback" not in shown


@pytest.mark.defaults
def test_spark_variables_are_substituted(ipython, spark):
    spark.conf.set("magic.test.size", "7")
    r = run(ipython, "%sqlflow SELECT ${magic.test.size} + 1 AS eight")
    assert r.success and r.result.dataframe.first().eight == 8


# ---------------------------------------------------------------- windowed streams


def write_paper_files(paper, stream_files, n=3):
    rows = paper.inputs.sort_values("arrived_at")
    for i in range(n):
        stream_files.write(rows.iloc[i * len(rows) // n:(i + 1) * len(rows) // n], fmt="csv")


@pytest.mark.defaults
def test_windowed_stream_shows_panes_live(ipython, spark, paper, stream_files, capsys, monkeypatch):
    write_paper_files(paper, stream_files)
    spark.readStream.schema("k STRING, id STRING, v BIGINT, ts TIMESTAMP, arrived_at TIMESTAMP") \
        .option("header", "true").option("maxFilesPerTrigger", 1).csv(str(stream_files.path)) \
        .createOrReplaceTempView("magic_paper_stream")
    r = run(ipython, "%%sqlflow -o streamed_panes\nSELECT k, SUM(v) AS total\n"
                     "FROM magic_paper_stream WATERMARK ts DELAY OF INTERVAL 1 MINUTE\n"
                     "GROUP BY k WINDOW FIXED(SIZE 2m) TRIGGER WATERMARK LATE COUNT 1")
    assert r.success, r.error_in_exec
    assert r.result is None   # the live view is the output
    shown = capsys.readouterr().out
    assert "finished:" in shown and "pane rows" in shown
    panes = ipython.user_ns["streamed_panes"].collect()
    assert panes and {"window_start", "pane_timing", "emit_time"} <= set(panes[0].asDict())
    assert not spark.streams.active


@pytest.mark.defaults
def test_streaming_insert_into_a_checkpointed_sink(ipython, spark, paper, stream_files, tmp_path, capsys):
    write_paper_files(paper, stream_files)
    spark.conf.set("magic.test.dir", str(tmp_path))
    spark.conf.set("magic.test.in", str(stream_files.path))
    cell = ("%%sqlflow -o sink\n"
            "SET spark.sqlflow.checkpointLocation = ${magic.test.dir}/checkpoints;\n"
            "SET spark.sqlflow.trigger = availableNow;\n"
            "CREATE OR REPLACE TEMPORARY VIEW magic_src (k STRING, id STRING, v BIGINT, ts TIMESTAMP, arrived_at TIMESTAMP)\n"
            "USING csv OPTIONS (path '${magic.test.in}', header 'true', streaming true, maxFilesPerTrigger 1, mode 'FAILFAST');\n"
            "INSERT INTO parquet.`${magic.test.dir}/out`\n"
            "SELECT k, SUM(v) AS total FROM magic_src WATERMARK ts DELAY OF INTERVAL 1 MINUTE\n"
            "GROUP BY k WINDOW FIXED(SIZE 2m)")
    try:
        r = run(ipython, cell)
        assert r.success, r.error_in_exec
        assert "finished:" in capsys.readouterr().out
        written = spark.read.parquet(str(tmp_path / "out")).count()
        assert written > 0 and ipython.user_ns["sink"].count() == written
        assert (tmp_path / "checkpoints").is_dir()
    finally:
        for key in ("spark.sqlflow.checkpointLocation", "spark.sqlflow.trigger"):
            spark.conf.unset(key)


# ---------------------------------------------------------------- failures


@pytest.mark.defaults
def test_a_failed_stream_shows_its_error_never_a_finished_state(ipython, spark, stream_files, capsys):
    import pandas as pd

    from sqlflow.errors import SqlflowExecutionError

    stream_files.write(pd.DataFrame({"k": ["a"], "v": [1], "ts": pd.to_datetime(["2015-09-01 12:00:00"])}), fmt="json")
    spark.readStream.schema("k STRING, v BIGINT, ts TIMESTAMP").json(str(stream_files.path)) \
        .createOrReplaceTempView("magic_failing")
    r = run(ipython, "%%sqlflow\nSELECT k, raise_error(concat('boom for ', k)) AS x FROM magic_failing")
    assert not r.success and isinstance(r.error_in_exec, SqlflowExecutionError)
    shown = capsys.readouterr().out
    assert "boom for a" in str(r.error_in_exec) and "boom for a" in shown
    assert "\nfailed" in shown or shown.startswith("failed")
    assert "finished" not in shown

    spark.conf.set("spark.sqlflow.trigger", "availableNow")
    try:   # a streaming INSERT (trigger availableNow: the statement itself waits for the stream)
        r = run(ipython, "%%sqlflow\nINSERT INTO memory.magic_failed\n"
                         "SELECT k, SUM(v + CAST(raise_error('boom in a window') AS BIGINT)) AS total\n"
                         "FROM magic_failing WATERMARK ts DELAY OF INTERVAL 1 MINUTE\n"
                         "GROUP BY k WINDOW FIXED(SIZE 1m)")
    finally:
        spark.conf.unset("spark.sqlflow.trigger")
    assert not r.success
    shown = capsys.readouterr().out
    assert "boom in a window" in str(r.error_in_exec)
    assert "finished" not in shown


def test_a_stream_failed_by_sqlflow_in_a_worker_shows_sqlflows_error_and_hint():
    """A stream that sqlflow stopped from inside a Python worker (a checkpoint of another bucket
    count) fails with Spark's error around sqlflow's: the cell shows sqlflow's message and hint,
    not Spark's first line (which says only that a Python worker raised)."""
    from sqlflow.interfaces.statements import stream_error

    class Failed:
        desc = ("[STREAM_FAILED] Query [id = 7] terminated with exception: [PYTHON_EXCEPTION] An exception was "
                "thrown from the Python worker: Traceback (most recent call last):\n  File \"udfs/streaming.py\", "
                "line 1\nsqlflow.errors.SqlflowExecutionError: sqlflow: STREAM: the checkpoint's state of bucket 0 "
                "was written by a stream of 8 hash buckets of keys, and this query has 2: each key's state would "
                "be looked for in another bucket and lost\nset spark.sqlflow.streaming.buckets = 8 to go on from "
                "this checkpoint, or start from a new one\n SQLSTATE: 38000 SQLSTATE: XXKST\n"
                "=== Streaming Query ===\nIdentifier: [id = 7]")

    class Query:
        name, id = "sessions", "7"

        def exception(self):
            return Failed()

    assert str(stream_error(Query())) == (
        "sqlflow: STREAM: the streaming query sessions failed: the checkpoint's state of bucket 0 was written by a "
        "stream of 8 hash buckets of keys, and this query has 2: each key's state would be looked for in another "
        "bucket and lost\nset spark.sqlflow.streaming.buckets = 8 to go on from this checkpoint, or start from a "
        "new one")


def test_a_sqlflow_sql_error_in_a_notebook_is_the_located_error_alone(ipython, paper_views, capsys):
    r = run(ipython, "import sqlflow\n"
                     "sqlflow.sql(spark, 'SELECT k, SUM(nope) AS total FROM magic_paper GROUP BY k WINDOW FIXED(SIZE 2m) ON ts')")
    assert not r.success and isinstance(r.error_in_exec, SqlflowAnalysisError)
    assert r.error_in_exec.__cause__ is None and r.error_in_exec.__suppress_context__   # raised `from None`
    captured = capsys.readouterr()
    shown = (captured.out + captured.err).strip().splitlines()
    assert len(shown) == 3, shown
    assert shown[0].startswith("sqlflow: SELECT: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or "
                               "function parameter with name `nope` cannot be resolved.")
    assert shown[0].endswith("(line 1, column 15)")
    assert shown[1:] == ["  SELECT k, SUM(nope) AS total FROM magic_paper GROUP BY k WINDOW FIXED(SIZE 2m) ON ts",
                         "                ^"]


def test_the_readmes_line_magic_cells_each_show_their_result(ipython, magic_config, repo_root):
    """The README's line-form example: each query is a cell of its own, since a cell shows only its
    last line's result (two line magics in one cell never showed the --transpile output)."""
    import re

    from sqlflow.demo import load_clickstream

    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("The line form takes the options"):readme.index("Options: `-o NAME`")]
    cells = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(cells) == 2 and all(sum(line.startswith("%sqlflow ") for line in c.splitlines()) == 1 for c in cells)
    load_clickstream(ipython.user_ns["spark"])
    transpiled, clicks = (run(ipython, cell) for cell in cells)
    assert transpiled.success and clicks.success
    assert repr(transpiled.result).startswith("SELECT") and "WINDOW FIXED" not in repr(transpiled.result)
    assert isinstance(clicks.result, ResultTable)
    assert "2 rows" in clicks.result._repr_html_() and "u008" in repr(clicks.result)


def test_two_cells_with_the_same_mistake_both_warn(ipython):
    """Under Python's default action (a warning once per location), two cells with the same
    mistake both warn: sqlflow's warnings show every time (tests/spark/test_trigger_warnings.py
    checks the mechanism without IPython, where it failed before)."""
    import warnings

    from sqlflow.spark.trigger_checks import SqlflowTriggerWarning

    cell = ("%%sqlflow\nSELECT k, COUNT(*) AS n FROM VALUES ('a', TIMESTAMP'2024-01-01 00:00:10') AS t(k, ts)\n"
            "GROUP BY k WINDOW FIXED(SIZE 1m) ON ts TRIGGER REPEAT(PERIOD 10s)")
    assert run(ipython, cell).success  # a first run imports what it needs (an import may reset registries)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        assert run(ipython, cell).success and run(ipython, cell).success
    messages = [str(w.message) for w in caught if w.category is SqlflowTriggerWarning]
    assert len(messages) == 2 and messages[0] == messages[1]
    assert messages[0].endswith("PERIOD 10s never fires on bounded data: there is no processing time without "
                                "ARRIVAL; each window emits one pane, at the end of the input")


def test_ordering_a_replay_by_event_time(ipython):
    """docs/semantics.md, 11, through the cell magic: the replay's rows in event-time order."""
    view = ("CREATE OR REPLACE TEMPORARY VIEW magic_readings AS SELECT id, CAST(ts AS TIMESTAMP) AS ts, "
            "CAST(at AS TIMESTAMP) AS at FROM VALUES ('r1', '2024-01-01 00:01:40', '2024-01-01 00:01:41'), "
            "('r2', '2024-01-01 00:01:35', '2024-01-01 00:01:42'), ('r5', '2024-01-01 00:01:39', "
            "'2024-01-01 00:01:55'), ('r3', '2024-01-01 00:01:52', '2024-01-01 00:01:53') AS t(id, ts, at)")
    r = run(ipython, f"%%sqlflow\n{view};\n"
                     "SELECT id FROM magic_readings WATERMARK ts DELAY OF 10s ARRIVAL at ORDER BY ts")
    assert r.success
    # W: 00:01:30 at :41, 00:01:42 at :53; r5 (00:01:39, at :55) is late; r3 is emitted at the end (:55)
    rows = r.result.dataframe.collect()
    assert [(row.id, str(row.emit_time)) for row in rows] == [
        ("r2", "2024-01-01 00:01:53"), ("r1", "2024-01-01 00:01:53"), ("r3", "2024-01-01 00:01:55")]
