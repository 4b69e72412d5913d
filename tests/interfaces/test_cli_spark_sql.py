"""The `sqlflow` command behaves as spark-sql does: where Spark keeps its
catalog, Spark's own defaults and settings, spark-submit's flags, quit; and exit;, how stdin is
read, how errors look. The slow tests run the command (each run starts a JVM) and expect
spark-sql's own output; the release tier's run the real spark-sql of the pyspark wheel beside
them. The others run in process, without Spark or on the shared session."""
from __future__ import annotations

import io
import sys

import pytest

from sqlflow.interfaces import cli as cli_module
from sqlflow.interfaces.cli import build_parser, main
from sqlflow.interfaces.launch import submit_args


def rows(out: str) -> list[str]:
    """The lines of stdout that are rows (spark-sql echoes its prompts there when stdin is piped)."""
    return [line for line in out.splitlines() if line and not line.lstrip().startswith(("spark-sql", ">"))]


# ---------------------------------------------------------------- side by side with spark-sql


CREATE = ("CREATE DATABASE d;\nCREATE TABLE d.t (k STRING, n INT) USING parquet;\n"
          "INSERT INTO d.t VALUES ('a', 1), ('b', 2);\nUSE d;\n")
#: statements from stdin; a comment-only line; quit; ends the input (what follows is not run);
#: Spark's own error in Spark's words
STDIN = ("SELECT * FROM t ORDER BY k;\n-- only a comment\nSELECT 2\n  AS b;\nSELECT * FROM\n  nope;\nSELECT 3;\n"
         "quit;\nSELECT 4;\n")
#: the rows both print for STDIN (the release tier's test below runs spark-sql on it)
STDIN_ROWS = ["a\t1", "b\t2", "2", "3"]


def _create_the_catalog(sqlflow_cli, tmp_path):
    """The command run on CREATE and STDIN, as spark-sql would be, in tmp_path."""
    warehouse = tmp_path / "wh"
    ours = sqlflow_cli("--conf", f"spark.sql.warehouse.dir={warehouse}", "--conf", "spark.ui.enabled=false",
                       input=CREATE + STDIN, cwd=tmp_path, env={"SPARK_CONF_DIR": str(tmp_path / "no-conf")})
    assert (tmp_path / "metastore_db").is_dir() and (warehouse / "d.db" / "t").is_dir(), ours.stderr
    assert not (tmp_path / "spark-warehouse").exists()  # spark.sql.warehouse.dir was honoured
    return ours, warehouse


@pytest.mark.slow
def test_the_catalog_is_where_spark_sql_keeps_it_and_stdin_is_read_as_spark_sql_reads_it(sqlflow_cli, tmp_path):
    """Where Spark keeps its catalog: a database and table the command creates are in Spark's
    catalog in ./metastore_db, the table's files under spark.sql.warehouse.dir (spark-sql's next
    run in the same directory reads them: the release tier's test below). How stdin is read, as
    spark-sql reads it (STDIN_ROWS are spark-sql's rows): statements from stdin; a comment-only
    line; quit; ends the input (what follows is not run); Spark's own error in Spark's words, not
    as sqlflow's, located in stdin."""
    import pyarrow.parquet as pq

    ours, warehouse = _create_the_catalog(sqlflow_cli, tmp_path)
    assert rows(ours.stdout) == STDIN_ROWS, ours.stderr
    assert sorted(pq.read_table(warehouse / "d.db" / "t").to_pylist(), key=lambda r: r["k"]) \
        == [{"k": "a", "n": 1}, {"k": "b", "n": 2}]
    assert "Error in statement 7 of <stdin>:\n[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope` cannot be found." \
        in ours.stderr
    assert "(line 10, column 3)\n    nope;\n    ^" in ours.stderr   # counted from the start of stdin
    assert "sqlflow: [" not in ours.stderr and "Traceback" not in ours.stderr
    assert ours.stderr.count("Time taken:") == 7 and ours.returncode == 1


@pytest.mark.slow
@pytest.mark.release
def test_spark_sql_reads_the_catalog_the_command_wrote_and_stdin_the_same_way(sqlflow_cli, spark_sql, tmp_path):
    """spark-sql's next run in the same directory (--database) finds the command's database and
    table, and prints STDIN_ROWS for the same stdin, with Spark's error for the missing table."""
    _create_the_catalog(sqlflow_cli, tmp_path)
    theirs = spark_sql("--database", "d", "--conf", "spark.ui.enabled=false", input=STDIN, cwd=tmp_path,
                       env={"SPARK_CONF_DIR": str(tmp_path / "no-conf")})
    assert rows(theirs.stdout) == STDIN_ROWS, theirs.stderr
    assert "[TABLE_OR_VIEW_NOT_FOUND]" in theirs.stderr


DST_VIEW = ("CREATE TEMPORARY VIEW ev AS SELECT k, v, timestamp_seconds(s) AS ts FROM VALUES "
            # 2024-11-03 in New York: 01:00-02:00 happens twice (EDT, then EST)
            "('a', 1, 1730610600), ('a', 2, 1730613000), ('a', 4, 1730614200), ('a', 8, 1730616600) AS t(k, v, s)")
SETTINGS = ("SELECT CAST(TIMESTAMP'2024-01-01 00:00:00' AS BIGINT); SET spark.sql.shuffle.partitions; "
            "SET spark.sql.session.timeZone; SET spark.master; SET spark.driver.memory; SET spark.sqlflow.test.key")
SUMS = ("SELECT k, total, window_start, window_end, CAST(window_start AS BIGINT) FROM ({}) ORDER BY window_start")
FIXED_SQLFLOW = "SELECT k, SUM(v) AS total FROM ev GROUP BY k WINDOW FIXED(SIZE 1h) ON ts"
FIXED_SPARK = "SELECT k, SUM(v) AS total, window.start AS window_start, window.end AS window_end FROM ev " \
              "GROUP BY k, window(ts, '1 hour')"
SESSIONS_SQLFLOW = "SELECT k, SUM(v) AS total FROM ev GROUP BY k WINDOW SESSIONS(GAP 30m) ON ts"
SESSIONS_SPARK = "SELECT k, SUM(v) AS total, session_window.start AS window_start, " \
                 "session_window.end AS window_end FROM ev GROUP BY k, session_window(ts, '30 minutes')"


DEFAULTS_FLAGS = ["--driver-memory", "1g", "--conf", "spark.sqlflow.test.key=from-command-line"]
DEFAULTS_SETTINGS = ["1704085200",                      # TIMESTAMP'2024-01-01 00:00:00' in New York
                     "spark.sql.shuffle.partitions\t7",  # spark-defaults.conf
                     "spark.sql.session.timeZone\tAmerica/New_York",
                     "spark.master\tlocal[*]",            # Spark's default
                     "spark.driver.memory\t1g",           # spark-submit's flag
                     "spark.sqlflow.test.key\tfrom-command-line"]  # --conf over spark-defaults.conf
DST_FIXED = ["a\t3\t2024-11-03 01:00:00\t2024-11-03 01:00:00\t1730610000",   # 01:00 EDT to 01:00 EST
             "a\t12\t2024-11-03 01:00:00\t2024-11-03 02:00:00\t1730613600"]  # 01:00 EST to 02:00 EST
DST_SESSIONS = ["a\t1\t2024-11-03 01:10:00\t2024-11-03 01:40:00\t1730610600",
                "a\t6\t2024-11-03 01:50:00\t2024-11-03 01:40:00\t1730613000",
                "a\t8\t2024-11-03 01:50:00\t2024-11-03 02:20:00\t1730616600"]


def _defaults_env(spark_conf_dir, tmp_path) -> dict:
    conf = spark_conf_dir(tmp_path / "spark", **{"spark.sqlflow.test.key": "from-defaults", "spark.sql.shuffle.partitions": "7"})
    return {"TZ": "America/New_York", "SPARK_CONF_DIR": str(conf)}


#: a stream that fails at its first micro-batch (SUM(1/0)), over the bundled clicks
FAILING_STREAM = ["CREATE OR REPLACE TEMPORARY VIEW clicks (user_id STRING, page STRING, ts TIMESTAMP, arrived_at "
                  "TIMESTAMP) USING csv OPTIONS (path '{data}/clickstream*.csv', header 'true', streaming true)",
                  "SELECT user_id, SUM(1/0) AS bad FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES "
                  "GROUP BY user_id WINDOW SESSIONS(GAP 10m)"]


@pytest.mark.slow
def test_spark_defaults_settings_and_time_zone_as_spark_sql_has_them(sqlflow_cli, spark_conf_dir, stderr_lines,
                                                                    repo_root, tmp_path):
    """Spark's own defaults: no forced UTC, local[2] or 2 partitions: Spark's defaults, spark-defaults.conf in
    SPARK_CONF_DIR, --conf over it, spark-submit's --driver-memory; windows over instants across a
    DST change are Spark's own (window(), session_window()) in a non-UTC zone, on both paths. The
    expected lines are spark-sql's (the release tier runs it beside this). The same run (one JVM)
    ends with a stream that fails: its located error alone on stderr, no line of Spark's logs (the
    executor's, the task set manager's and the stream's stack traces of the failing job)."""
    ours = sqlflow_cli(*DEFAULTS_FLAGS, "-e", "; ".join([
        SETTINGS, DST_VIEW, "SET spark.sqlflow.path=native", SUMS.format(FIXED_SQLFLOW), SUMS.format(SESSIONS_SQLFLOW),
        "SET spark.sqlflow.path=engine", SUMS.format(FIXED_SQLFLOW), SUMS.format(SESSIONS_SQLFLOW),
        *(s.format(data=repo_root / "examples" / "data") for s in FAILING_STREAM)]),
        cwd=tmp_path, env=_defaults_env(spark_conf_dir, tmp_path))
    assert ours.stdout.splitlines() == (DEFAULTS_SETTINGS + ["spark.sqlflow.path\tnative"] + DST_FIXED + DST_SESSIONS
                                        + ["spark.sqlflow.path\tengine"] + DST_FIXED + DST_SESSIONS), ours.stderr
    assert ours.returncode == 1
    lines = [line for line in stderr_lines(ours.stderr) if not line.startswith(("Spark master: ", "Time taken: "))]
    assert lines[0] == "Error in statement 15:", lines
    assert lines[1].startswith("[STREAM_FAILED] Query [id = ") and "[DIVIDE_BY_ZERO] Division by zero." in lines[1]
    assert len(lines) == 4 and lines[3].strip() == "^", lines   # the message, the statement's line, a caret


@pytest.mark.slow
@pytest.mark.release
def test_spark_sql_prints_the_same_settings_and_windows(spark_sql, spark_conf_dir, tmp_path):
    """spark-sql itself, with the same flags, defaults and zone, prints the lines the test above expects."""
    theirs = spark_sql("-S", *DEFAULTS_FLAGS, "-e", "; ".join([
        SETTINGS, DST_VIEW, SUMS.format(FIXED_SPARK), SUMS.format(SESSIONS_SPARK)]),
        cwd=tmp_path, env=_defaults_env(spark_conf_dir, tmp_path))
    assert theirs.returncode == 0, theirs.stderr
    assert theirs.stdout.splitlines() == DEFAULTS_SETTINGS + DST_FIXED + DST_SESSIONS


# ---------------------------------------------------------------- in process, no Spark


def test_spark_submit_flags_are_passed_to_spark_submit():
    args = build_parser().parse_args(["-e", "SELECT 1", "--master", "local[1]", "--conf", "a=b", "-c", "c=d",
                                      "--jars", "x.jar,y.jar", "--packages", "g:a:1", "--driver-memory", "2g",
                                      "--driver-java-options", "-Dk=v -Dl=w", "--properties-file", "p.conf",
                                      "--executor-memory", "1g", "--files", "f.txt", "--py-files", "m.zip"])
    assert submit_args(args) == [
        "--master", "local[1]", "--name", "sqlflow", "--conf", "a=b", "--conf", "c=d",
        "--jars", "x.jar,y.jar", "--packages", "g:a:1", "--driver-memory", "2g", "--driver-java-options",
        "-Dk=v -Dl=w", "--properties-file", "p.conf", "--executor-memory", "1g", "--files", "f.txt",
        "--py-files", "m.zip"]


def test_cluster_deploy_mode_is_refused_as_spark_sql_refuses_it(capsys):
    assert main(["--deploy-mode", "cluster", "-e", "SELECT 1"]) == 1
    assert capsys.readouterr().err == "Cluster deploy mode is not applicable to Spark SQL shell.\n"


def test_capital_h_prints_the_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["-H"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sqlflow") and "--driver-memory VALUE" in out and "-e SQL" in out


def test_quit_and_exit_end_the_statements(capsys, monkeypatch):
    assert main(["--transpile", "-e", "SELECT 1; quit; SELECT 2"]) == 0
    assert capsys.readouterr().out == "SELECT 1;\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("SELECT 1;\n  EXIT ;\nSELECT 2;\n"))
    assert main(["--transpile"]) == 0
    assert capsys.readouterr().out == "SELECT 1;\n"


def test_stdin_statements_are_numbered_and_their_lines_counted_from_the_start(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        "SELECT 1;\n-- a note\nSELECT 2; SELECT 3;\n\nSELECT k FROM t GROUP BY k\nWINDOW FIXD(SIZE 1m) ON ts;\nSELECT 5;\n"))
    assert main(["--transpile"]) == 1   # stdin goes on after an error; the status says there was one
    out, err = capsys.readouterr()
    assert out.splitlines() == ["SELECT 1;", "SELECT 2;", "SELECT 3;", "SELECT 5;"]
    assert "Error in statement 4 of <stdin>:\nsqlflow: WINDOW: unknown window function FIXD (line 6, column 8)" in err
    assert "  WINDOW FIXD(SIZE 1m) ON ts;\n         ^" in err


def test_a_comment_only_line_at_the_prompt_gives_a_new_prompt(sqlflow_exe, tmp_path, terminal):
    term = terminal([sqlflow_exe, "--transpile"], {"SQLFLOW_HISTORY": str(tmp_path / "history")})
    term.expect("sqlflow> ")
    term.send("-- only a comment\n")
    assert term.expect("> ").endswith("sqlflow> ")     # not the continuation prompt "       > "
    term.send("/* an open\n")
    assert term.expect("> ").endswith("       > ")     # an unterminated comment continues
    term.send("comment */ SELECT 1;\n")
    assert "SELECT 1;" in term.expect("sqlflow> ")
    term.send("quit;\n")
    assert term.wait() == 0


# ---------------------------------------------------------------- in process, on the shared session


def test_spark_errors_are_in_sparks_words_and_verbose_adds_no_traceback(spark, capsys):
    assert main(["-v", "-e", "SELECT 1 AS one;\nSELECT * FROM nope_cli_verbose"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["SELECT 1 AS one", "1", "SELECT * FROM nope_cli_verbose"]
    assert "Error in statement 2:\n[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope_cli_verbose` cannot be found." \
        in err
    assert "(line 2, column 15)" in err
    assert "Traceback" not in err and "sqlflow:" not in err


def test_time_taken_starts_after_spark_has_started(spark, capsys, monkeypatch):
    """The clock only moves while Spark starts (100 s here): no statement's time includes it."""
    clock = [1000.0]

    def start(args, *, err, silent):
        clock[0] += 100.0
        return spark, False

    monkeypatch.setattr(cli_module, "start_session", start)
    monkeypatch.setattr(cli_module.time, "monotonic", lambda: clock[0])
    assert main(["-e", "SELECT 1; SELECT 2"]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("Time taken")] == [
        "Time taken: 0.000 seconds, Fetched 1 row(s)", "Time taken: 0.000 seconds, Fetched 1 row(s)"]


@pytest.mark.parametrize("path", ["native", "engine"])
def test_windows_over_instants_do_not_depend_on_the_session_time_zone(spark, capsys, path):
    """Spark's own defaults: in New York across the 2024-11-03 DST change, the command's windows are Spark's
    own (window(), session_window()), and the same instants as in UTC."""
    answers = {}
    for zone in ("America/New_York", "UTC"):
        spark.conf.set("spark.sql.session.timeZone", zone)
        try:
            assert main(["-S", "-e", "; ".join([
                DST_VIEW.replace("TEMPORARY VIEW ev", "OR REPLACE TEMPORARY VIEW ev"), f"SET spark.sqlflow.path={path}",
                SUMS.format(FIXED_SQLFLOW), SUMS.format(FIXED_SPARK),
                SUMS.format(SESSIONS_SQLFLOW), SUMS.format(SESSIONS_SPARK)])]) == 0
        finally:
            spark.conf.set("spark.sql.session.timeZone", "UTC")
            spark.conf.unset("spark.sqlflow.path")
        lines = capsys.readouterr().out.splitlines()[1:]   # after SET's key/value line
        assert lines[0:2] == lines[2:4] and lines[4:7] == lines[7:10]   # sqlflow's == Spark's
        answers[zone] = [line.split("\t")[:2] + line.split("\t")[-1:] for line in lines]
    assert answers["America/New_York"] == answers["UTC"]   # same groups, same instants
    assert [row[2] for row in answers["UTC"][:2]] == ["1730610000", "1730613600"]


def test_fetched_counts_rows_not_printed_lines_as_spark_sql_does(spark, capsys):
    """spark-sql's "Fetched N row(s)" counts the rows Spark returned: a value holding a newline is
    one row printed on two lines; an empty string is a row printed as an empty line; EXPLAIN's plan
    is one row of several lines."""
    assert main(["-e", "SELECT 'a\nb' AS s; SELECT 'x' AS s UNION ALL SELECT 'y\nz'; SELECT '' AS e; "
                       "EXPLAIN SELECT 1"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[:7] == ["a", "b", "x", "y", "z", "", "== Physical Plan =="]
    assert [line.split(", ")[1] for line in err.splitlines() if line.startswith("Time taken")] == [
        "Fetched 1 row(s)", "Fetched 2 row(s)", "Fetched 1 row(s)", "Fetched 1 row(s)"]
