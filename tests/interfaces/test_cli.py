"""The `sqlflow` command. Its behaviour is checked in this process, through `main(argv)` on the
shared session (stdout and stderr captured, stdin replaced); a few runs of the installed console
script in a subprocess (each starts its own JVM: ~8 s idle, a minute on a busy machine) check
what only a process shows: spark-defaults.conf, Spark's start and its stderr, the prompt on a
terminal. tests/interfaces/test_cli_spark_sql.py runs the command side by side with spark-sql."""
from __future__ import annotations

import io
import os
import signal
import sys
import time

import pytest

from sqlflow.interfaces.cli import build_parser, main
from sqlflow.interfaces.prompt import complete


# ---------------------------------------------------------------- subprocess runs


def test_transpile_runs_nothing(sqlflow_cli):
    r = sqlflow_cli("--transpile", "-d", "size=2m", "-e",
                    "CREATE TEMP VIEW v AS SELECT 1; "
                    "SELECT k, SUM(v) AS total FROM paper GROUP BY k WINDOW FIXED(SIZE ${size}) ON ts")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "CREATE TEMP VIEW v AS SELECT 1;"
    assert "WINDOW(ts, '2 minutes')" in lines[1] and "GROUP BY k" in lines[1]
    assert "Using Spark's default log4j profile" not in r.stderr  # no JVM was started


@pytest.mark.slow
def test_interactive_prompt(tmp_path, sqlflow_exe, spark_conf_dir, terminal):
    history = tmp_path / "history"
    # one core: the statement that runs until Ctrl-C cancels it keeps only one busy
    term = terminal([sqlflow_exe, "--master", "local[1]"], {"SQLFLOW_HISTORY": str(history), "SPARK_LOCAL_IP": "127.0.0.1",
                                    "SPARK_CONF_DIR": str(spark_conf_dir(tmp_path))}, cwd=tmp_path)
    term.expect("sqlflow> ", timeout=300)  # the JVM starts first: slow on a loaded 2-core machine
    term.send("SELECT 1 AS a,\n")                      # a statement spanning lines
    term.expect("       > ")
    term.send("  'two' AS b;\n")
    assert "1\ttwo" in term.expect("sqlflow> ")
    term.send("SELECT 'forgotten'\n")                   # Ctrl-C while typing drops the statement
    term.expect("       > ")
    # A person presses Ctrl-C some time after the prompt appears. Sent at once, the SIGINT can land
    # between readline printing the prompt and waiting for input, where CPython's readline does
    # not look at signals until the next key (a race no typist can hit).
    time.sleep(1)
    term.send("\x03")
    term.expect("sqlflow> ")
    term.send("SELECT count(*) FROM range(100000000000);\n")  # Ctrl-C cancels a running statement
    time.sleep(5)
    os.kill(term.pid, signal.SIGINT)
    assert "Query cancelled." in term.expect("sqlflow> ")
    term.send("SELECT 'still' AS here; SELECT * FROM nope;\n")  # errors do not end the session
    seen = term.expect("sqlflow> ")
    assert "still" in seen and "TABLE_OR_VIEW_NOT_FOUND" in seen and "forgotten" not in seen
    term.send("\x04")                                   # Ctrl-D exits
    assert term.wait() == 0
    assert "SELECT 1 AS a," in history.read_text()      # readline history was saved


# ---------------------------------------------------------------- in process (no Spark)


def test_statement_completion():
    assert complete("SELECT 1;\n")
    assert not complete("SELECT 1\n")
    assert not complete("SELECT ';\n")                 # inside a string
    assert not complete("SELECT 1 -- done;\n")         # inside a comment
    assert complete("SELECT 1; -- done\n")            # a comment after the ';'
    assert complete("SELECT 1; /* done */\n")
    assert not complete("BEGIN\n  SELECT 1;\n")        # inside a BEGIN ... END block
    assert complete("BEGIN\n  SELECT 1;\nEND;\n")


def test_flags_parse_like_spark_sql():
    args = build_parser().parse_args(["-e", "SELECT 1", "--conf", "a=b", "--conf", "c=d=e", "-d", "x=1",
                                      "--define", "y=2", "--hivevar", "z=3", "--hiveconf",
                                      "hive.cli.print.header=true", "-S", "-v", "--master", "local[1]",
                                      "--name", "n", "--database", "db"])
    assert args.conf == [("a", "b"), ("c", "d=e")]
    assert args.define == [("x", "1"), ("y", "2"), ("z", "3")]
    assert (args.silent, args.verbose, args.master, args.name, args.database) == (True, True, "local[1]", "n", "db")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["-e", "SELECT 1", "-f", "x.sql"])


def test_transpile_in_process_substitutes_and_locates_errors(capsys, tmp_path):
    script = tmp_path / "s.sql"
    script.write_text("-- header\nSELECT ${what};\n\nSELECT k FROM t GROUP BY k\nWINDOW FIXD(SIZE 1m) ON ts;\n")
    assert main(["--transpile", "-f", str(script), "-d", "what=42"]) == 1
    out, err = capsys.readouterr()
    assert "SELECT 42;" in out
    assert f"Error in statement 2 of {script}:" in err
    assert "(line 5, column 8)" in err and "  WINDOW FIXD(SIZE 1m) ON ts;\n         ^" in err


def test_missing_file_is_an_error(capsys):
    assert main(["--transpile", "-f", "/no/such/file.sql"]) == 1
    assert "No such file" in capsys.readouterr().err


# ---------------------------------------------------------------- in process, on the shared session


@pytest.fixture(autouse=True)
def _shared_session_restored(request):
    """An in-process run of the command writes to the shared session (--conf, SET, the views its
    scripts define): what a test changed is put back (`spark_undone`), so the next test file sees
    the session the run began with."""
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark_undone")


@pytest.mark.slow
def test_e_i_conf_set_define_database_header_silent_verbose(spark, capsys, tmp_path):
    init = tmp_path / "init.sql"
    init.write_text("CREATE OR REPLACE TEMPORARY VIEW init_view AS SELECT 41 AS x;\n"
                    "SELECT 'init output is not shown';\n")
    status = main([
        "-S", "-v", "--header", "--name", "cli-test", "--conf", "spark.sql.shuffle.partitions=3",
        "--database", "default", "-i", str(init), "-d", "who=world", "--hivevar", "n=2",
        "-e", "SET spark.sql.shuffle.partitions;\n"
              "SET my.setting=42;\n"
              "SELECT '${who}' AS greeting, ${n} + 1 AS three, '${my.setting}' AS from_set, NULL AS nothing,\n"
              "       true AS yes, TIMESTAMP'2015-09-01 12:00:00' AS ts, array(1, 2) AS arr, x FROM init_view"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.splitlines() == [
        "SET spark.sql.shuffle.partitions",            # -v echoes each statement
        "key\tvalue",
        "spark.sql.shuffle.partitions\t3",             # --conf
        "SET my.setting=42",
        "key\tvalue",
        "my.setting\t42",
        "SELECT 'world' AS greeting, 2 + 1 AS three, '42' AS from_set, NULL AS nothing,",
        "       true AS yes, TIMESTAMP'2015-09-01 12:00:00' AS ts, array(1, 2) AS arr, x FROM init_view",
        "greeting\tthree\tfrom_set\tnothing\tyes\tts\tarr\tx",
        "world\t3\t42\tNULL\ttrue\t2015-09-01 12:00:00\t[1,2]\t41",
    ]
    assert "Time taken" not in err and "WARN" not in err  # -S


def test_f_script_with_comments_and_multiline_statements(spark, capsys, monkeypatch, repo_root):
    """The README's example script: plain Spark SQL, a SET, a ${variable} from -d, a statement
    spanning lines with a comment; results on stdout, timings on stderr."""
    monkeypatch.chdir(repo_root)
    status = main(["-f", "examples/hello.sql", "-d", "greeting=hello"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.splitlines() == [
        "spark.sql.shuffle.partitions\t2",
        "1\tfalse\thello", "2\ttrue\thello", "3\tfalse\thello",
        "false\t3\t9", "true\t2\t6",
    ]
    assert err.count("Time taken:") == 4 and "Fetched 3 row(s)" in err


def test_failing_script_stops_with_status_1_and_a_located_message(spark, capsys, monkeypatch, repo_root):
    monkeypatch.chdir(repo_root)
    status = main(["-S", "-f", "examples/failing.sql"])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == ["1"]          # statements before the failure ran
    assert "never reached" not in out
    assert err.splitlines()[-5:] == [
        "Error in statement 3 of examples/failing.sql:",
        "sqlflow: WINDOW: unknown window function SESSION (line 11, column 8)",
        "  WINDOW SESSION(GAP 30m) ON ts;",
        "         ^",
        "did you mean SESSIONS(GAP 30m)?",
    ]


@pytest.mark.slow
def test_windowed_script_replays_the_paper(spark, capsys, monkeypatch, repo_root):
    monkeypatch.chdir(repo_root)
    status = main(["-S", "--header", "-f", "examples/paper.sql"])
    out, err = capsys.readouterr()
    assert status == 0, err
    blocks, block = [], []
    for line in out.splitlines():
        if line.startswith("k\twindow_start") and block:
            blocks.append(block)
            block = []
        block.append(line.split("\t"))
    blocks.append(block)
    fig10, fig12, fig14 = blocks
    assert [row[fig10[0].index("total")] for row in fig10[1:]] == ["14", "22", "3", "12"]
    assert [row[fig12[0].index("total")] for row in fig12[1:]] == ["5", "22", "3", "14", "12"]
    head = fig14[0]
    signed = [int(row[head.index("total")]) * (-1 if row[head.index("is_retraction")] == "true" else 1)
              for row in fig14[1:]]
    assert signed == [5, 7, 10, -7, -10, 25, 3, -5, -25, 39, -3, 12]
    assert sum(signed) == 51


def test_stdin_pipe_runs_each_statement_and_goes_on_after_errors(spark, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(
        "SELECT 1 AS a,\n  2 AS b;\nSELECT *\n  FROM nope;\n-- a comment\nSELECT 3; SELECT\n4;\n"))
    status = main(["-S"])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == ["1\t2", "3", "4"]
    assert "Error in statement 2 of <stdin>:\n[TABLE_OR_VIEW_NOT_FOUND]" in err   # Spark's words
    assert "(line 4, column 8)\n    FROM nope;\n         ^" in err   # located in stdin, with a caret
    assert "Traceback" not in err and "py4j" not in err and "at org.apache" not in err


@pytest.mark.slow
def test_in_process_windowed_statements_and_explain(spark, capsys, monkeypatch, repo_root):
    """main() in this process reuses the running session (and leaves it running)."""
    monkeypatch.chdir(repo_root)
    status = main(["-S", "--header", "-i", "examples/paper_views.sql", "-e",
                   "SELECT k, SUM(v) AS total FROM paper GROUP BY k WINDOW FIXED(SIZE 2m) ON ts ORDER BY window_start"])
    out, err = capsys.readouterr()
    assert status == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert lines[0][:2] == ["k", "total"] and "window_start" in lines[0]
    assert [row[1] for row in lines[1:]] == ["14", "22", "3", "12"]

    status = main(["-S", "--explain", "-i", "examples/paper_views.sql", "-e",
                   "CREATE OR REPLACE TEMPORARY VIEW still_created AS SELECT 1 AS one;\n"
                   "SELECT k, SUM(v) AS total FROM paper WATERMARK ts TIMELINE heuristic ARRIVAL arrived_at "
                   "GROUP BY k WINDOW SESSIONS(GAP 1m);\n"
                   "SELECT * FROM still_created"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "path: engine" in out and "replay" in out     # sqlflow.explain of the windowed statement
    assert "Physical Plan" in out                         # EXPLAIN of the plain query
    assert spark.catalog.tableExists("still_created")    # DDL still ran
    assert spark.sparkContext._jsc is not None           # the session was left running


@pytest.mark.slow
def test_sessions_example_report_equals_the_batch_answer(spark, capsys, monkeypatch, repo_root):
    monkeypatch.chdir(repo_root)
    assert main(["-S", "--header", "-f", "examples/sessions.sql"]) == 0
    out = capsys.readouterr().out.splitlines()
    report = out[out.index("length\tsessions\tclicks"):]
    assert report[1:] == ["1-4\t5\t17", "10+\t2\t35", "5-9\t14\t89"]
    bob = [line.split("\t") for line in out[:out.index("length\tsessions\tclicks")]]
    assert "true" in [row[bob[0].index("is_retraction")] for row in bob[1:]]


def test_in_process_streaming_statement_runs_until_its_source_is_exhausted(spark, capsys, tmp_path, stream_files):
    """A query over STREAM(table) prints each micro-batch's rows, progress on stderr, and ends
    (availableNow) when the files are read."""
    import pandas as pd

    for i in range(3):
        stream_files.write(pd.DataFrame({"k": ["a"], "v": [i]}), fmt="json")
    table = f"cli_stream_{os.getpid()}"
    status = main(["--header", "-e",
                   f"CREATE TABLE {table} (k STRING, v BIGINT) USING json LOCATION '{stream_files.path}' "
                   "OPTIONS (maxFilesPerTrigger 1);\n"
                   f"SELECT k, v * 10 AS v10 FROM STREAM({table});\n"
                   f"DROP TABLE {table}"])
    out, err = capsys.readouterr()
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "k\tv10" and sorted(lines[1:]) == ["a\t0", "a\t10", "a\t20"]
    assert [line.split(":")[0].split()[-2:] for line in err.splitlines() if " batch " in line] == \
        [["batch", "0"], ["batch", "1"], ["batch", "2"]]   # one progress line per micro-batch
    assert not spark.streams.active


@pytest.mark.slow
def test_in_process_streaming_insert_with_checkpoint_then_restart(spark, capsys, monkeypatch, repo_root, tmp_path):
    """examples/streaming.sql: a streaming source, INSERT INTO a parquet sink (availableNow,
    finished), progress on stderr; run again, it resumes from the checkpoint and adds nothing."""
    monkeypatch.chdir(repo_root)
    expected = ["alice\t3\t14", "bob\t1\t19", "carol\t3\t17", "dave\t3\t15",
                "erin\t3\t19", "frank\t3\t19", "grace\t2\t19", "heidi\t3\t19"]
    try:
        assert main(["-f", "examples/streaming.sql", "-d", f"out={tmp_path}"]) == 0
        out, err = capsys.readouterr()
        assert out.splitlines()[-8:] == expected
        assert "batch 0: 141 input rows" in err and " panes" in err   # progress of the streaming INSERT
        sink = spark.read.parquet(str(tmp_path / "sessions"))
        first = sorted(map(tuple, sink.collect()))
        assert sink.count() >= 21   # a pane (at least) per session

        assert main(["-S", "-f", "examples/streaming.sql", "-d", f"out={tmp_path}"]) == 0  # restart
        out, err = capsys.readouterr()
        assert out.splitlines()[-8:] == expected
        assert sorted(map(tuple, spark.read.parquet(str(tmp_path / "sessions")).collect())) == first
    finally:
        for key in ("spark.sqlflow.checkpointLocation", "spark.sqlflow.trigger", "spark.sqlflow.finish"):
            spark.conf.unset(key)


def test_a_failing_expression_in_a_stream_is_located_at_the_expression(spark, capsys, tmp_path, stream_files):
    """SUM(1/0) fails in the stream's micro-batch, inside sqlflow's rewrite of the statement: the
    error points at the expression in the user's statement (line 3, column 7 of the script), not
    at the statement's start."""
    import pandas as pd

    stream_files.write(pd.DataFrame({"k": ["a"], "ts": ["2024-01-01 00:00:10"]}), fmt="json")
    table = f"cli_failing_{os.getpid()}"
    status = main(["-e",
                   f"CREATE TABLE {table} (k STRING, ts TIMESTAMP) USING json LOCATION '{stream_files.path}';\n"
                   f"SELECT k,\n  SUM(1/0) AS n FROM STREAM({table}) WATERMARK ts DELAY OF INTERVAL 1 MINUTE "
                   "GROUP BY k WINDOW FIXED(SIZE 1h);\n"
                   f"DROP TABLE {table}"])
    err = capsys.readouterr().err
    assert status == 1
    assert "Error in statement 2:\n" in err and "[DIVIDE_BY_ZERO] Division by zero" in err
    assert err.endswith("SQLSTATE: 22012 (line 3, column 7)\n    SUM(1/0) AS n FROM STREAM(" + table + ") WATERMARK ts "
                        "DELAY OF INTERVAL 1 MINUTE GROUP BY k WINDOW FIXED(SIZE 1h);\n        ^\n"), err[-600:]
    assert not spark.streams.active


#: six readings out of order (docs/semantics.md, 11), as a view the CLI and the magic create
ORDERING_VIEW = (
    "CREATE OR REPLACE TEMPORARY VIEW readings AS SELECT id, CAST(ts AS TIMESTAMP) AS ts, "
    "CAST(at AS TIMESTAMP) AS at FROM VALUES "
    "('r1', '2024-01-01 00:01:40', '2024-01-01 00:01:41'), ('r2', '2024-01-01 00:01:35', '2024-01-01 00:01:42'), "
    "('r3', '2024-01-01 00:01:52', '2024-01-01 00:01:53'), ('r4', '2024-01-01 00:01:44', '2024-01-01 00:01:54'), "
    "('r5', '2024-01-01 00:01:39', '2024-01-01 00:01:55'), ('r6', '2024-01-01 00:02:05', '2024-01-01 00:02:06') "
    "AS t(id, ts, at)")


def test_ordering_a_replay_by_event_time(spark, capsys):
    status = main(["-S", "--header", "-e", ORDERING_VIEW + ";\n"
                   "SELECT id, ts FROM readings WATERMARK ts DELAY OF 10s ARRIVAL at ORDER BY ts, id"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.splitlines() == [
        "id\tts\temit_time",
        "r2\t2024-01-01 00:01:35\t2024-01-01 00:01:53",
        "r1\t2024-01-01 00:01:40\t2024-01-01 00:01:53",
        "r4\t2024-01-01 00:01:44\t2024-01-01 00:02:06",
        "r3\t2024-01-01 00:01:52\t2024-01-01 00:02:06",
        "r6\t2024-01-01 00:02:05\t2024-01-01 00:02:06",
    ]


def test_a_streaming_insert_writes_its_dropped_rows_where_a_setting_says(spark, capsys, tmp_path, repo_root):
    """docs/streaming.md 8's script as written: `SET spark.sqlflow.droppedPath` before a streaming
    INSERT INTO a parquet sink writes the statement's rows to the sink and bob's late click (too
    late for [00:00, 00:01), which batch 2's watermark 00:01:10 closed) to the dropped path, each
    batch in its own directory; an INSERT into memory while it is set is refused at the INSERT."""
    import pandas as pd

    from tests.conftest import StreamFiles

    text = (repo_root / "docs" / "streaming.md").read_text(encoding="utf-8")
    section = text[text.index("## 8. What is counted where"):text.index("## 9. Performance")]
    script = section.split("```sql\n", 1)[1].split("```", 1)[0]
    files = StreamFiles(tmp_path / "clicks")
    for batch in ([("alice", "00:00:05"), ("bob", "00:00:30")], [("alice", "00:01:20")], [("alice", "00:02:30")],
                  [("bob", "00:00:50")]):
        files.write(pd.DataFrame({"user": [u for u, _ in batch], "ts": [f"2024-01-01 {t}" for _, t in batch]}),
                    fmt="json")
    keys = ("spark.sqlflow.checkpointLocation", "spark.sqlflow.trigger", "spark.sqlflow.droppedPath")
    try:
        status = main(["-S", "--header", "-d", f"out={tmp_path}", "-e", script])
        out, err = capsys.readouterr()
        assert status == 0, err
        assert out.splitlines()[-6:] == [
            "user\tclicks\twindow_start\tbatch_id",
            "alice\t1\t2024-01-01 00:00:00\t2",
            "bob\t1\t2024-01-01 00:00:00\t2",
            "alice\t1\t2024-01-01 00:01:00\t3",
            "user\tevent_time\treason\twindow_start\tbatch_id",
            "bob\t2024-01-01 00:00:50\ttoo late\t2024-01-01 00:00:00\t3",
        ]
        assert spark.conf.get("spark.sqlflow.droppedPath", None) is None  # the script's RESET
        status = main(["-S", "-e", f"SET spark.sqlflow.droppedPath = {tmp_path}/more;\n"
                                   "INSERT INTO memory.refused SELECT user, COUNT(*) AS n FROM clicks "
                                   "WATERMARK ts DELAY OF INTERVAL 10 SECONDS GROUP BY user WINDOW FIXED(SIZE 1m)"])
        err = capsys.readouterr().err
        assert status == 1
        assert ("spark.sqlflow.droppedPath is set, and the dropped rows go in the sink's file format: INSERT INTO "
                "<format>.`<path>` (json, csv, parquet, orc, text), not memory") in err, err
        assert not spark.streams.active
    finally:
        for key in keys:
            spark.conf.unset(key)
