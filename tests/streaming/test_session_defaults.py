"""A stream on a session with Spark's defaults: `start` and scripts set the RocksDB state store
for the query they start; `sqlflow.sql` sets it on the session and says so once; the bucket count
does not follow the shuffle partitions, and `start` and the result's own `df.writeStream` run a
query on as many partitions as buckets; Python workers that cannot import sqlflow are a located
error when the stream is built; a local checkpoint is written without a process per file."""
import json
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.spark import conf, streaming as S
from sqlflow.spark.script import run_script
from sqlflow.spark.session import CHECKPOINT_FILES, ROCKSDB_PROVIDER, UNIX_SOCKETS, unix_sockets
from sqlflow.spark.streaming.session_conf import (CHANGELOG_KEY, CHECKPOINT_MANAGER_KEY, HDFS_PROVIDER, PROVIDER_KEY,
                                                  SET_PROVIDER, SqlflowSessionWarning, checkpoint_manager,
                                                  local_checkpoint)

#: what these tests check is a session with Spark's defaults: also run on one (tests/conftest.py),
#: all but the test of the partitions, which sets Spark's default 200 itself
DEFAULTS = pytest.mark.defaults

SESSIONS = ("SELECT user_id, COUNT(*) AS n FROM {view} WATERMARK ts DELAY OF INTERVAL 1 SECOND\n"
            "GROUP BY user_id WINDOW SESSIONS(GAP 1m)")


@pytest.fixture
def default_store(spark):
    """The session as Spark builds it by default: the HDFS-backed state store."""
    before = spark.conf.get(PROVIDER_KEY)
    spark.conf.unset(PROVIDER_KEY)
    assert spark.conf.get(PROVIDER_KEY) == HDFS_PROVIDER
    yield
    spark.conf.set(PROVIDER_KEY, before)


def clicks(spark, tmp_path, view):
    src = tmp_path / "in"
    src.mkdir()
    t = int(time.time()) - 1000
    for i, second in enumerate((0, 30, 200)):
        path = src / f"part-{i}.json"
        path.write_text(json.dumps({"user_id": "u1", "ts": f"2024-01-01T00:{second // 60:02d}:{second % 60:02d}Z"}))
        os.utime(path, (t + i, t + i))
    spark.readStream.schema("user_id string, ts timestamp").option("maxFilesPerTrigger", 1).json(str(src)) \
        .createOrReplaceTempView(view)
    return src


@DEFAULTS
def test_sql_sets_the_state_store_on_a_default_session_and_says_so_once(spark, tmp_path, default_store):
    clicks(spark, tmp_path, "clicks_plain")
    with pytest.warns(SqlflowSessionWarning, match="needs the RocksDB state store") as record:
        df = sqlflow.sql(spark, SESSIONS.format(view="clicks_plain"))
    said = [w for w in record if w.category is SqlflowSessionWarning]
    assert len(said) == 1 and said[0].filename == __file__  # at the user's line
    assert spark.conf.get(PROVIDER_KEY) == ROCKSDB_PROVIDER
    with warnings.catch_warnings():
        warnings.simplefilter("error", SqlflowSessionWarning)  # said once: the session has it now
        sqlflow.sql(spark, SESSIONS.format(view="clicks_plain"))
    # the stream runs as written: the first session closes, the last waits for more input
    query = df.writeStream.format("memory").queryName("sessions_plain_sql").trigger(availableNow=True).start()
    query.awaitTermination()
    got = sorted((r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.n)
                 for r in spark.table("sessions_plain_sql").collect())
    assert got == [("00:00", "01:30", 2)]
    # a provider of the user's own is theirs: refused, naming the line to add
    spark.conf.set(PROVIDER_KEY, "com.example.OwnStateStoreProvider")
    with pytest.raises(SqlflowUnsupportedError, match="RocksDB state store") as err:
        sqlflow.sql(spark, SESSIONS.format(view="clicks_plain"))
    assert (err.value.clause, err.value.line) == ("WINDOW", 2)
    assert SET_PROVIDER in err.value.hint
    # the native operator needs no state store of its own choosing
    fixed = sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM clicks_plain WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                               "GROUP BY user_id WINDOW FIXED(SIZE 1m)")
    assert [s.operator for s in S.pane_streams(fixed)] == ["native"]


@pytest.mark.connect
def test_the_buckets_and_partitions_follow_the_cores_not_the_shuffle_partitions(spark, tmp_path):
    """Spark's default 200 shuffle partitions once meant 800 buckets, each a Python call in every
    micro-batch, for any number of rows; and then 200 partitions, each a task and a state store
    committed in every micro-batch. `start`, and the result's own `df.writeStream...start()`, run
    the query on as many partitions as buckets; the session keeps its 200 (and a restart from the
    checkpoint the query's own number). On Connect, where `start` takes the same path, only the
    result's own `writeStream`, whose start the client wraps."""
    from sqlflow.spark.lifetimes import is_connect

    clicks(spark, tmp_path, "clicks_buckets")
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    queries = []
    try:
        text = sqlflow.explain(SESSIONS.format(view="clicks_buckets"), spark)
        df = sqlflow.sql(spark, SESSIONS.format(view="clicks_buckets"))
        if not is_connect(spark):
            queries.append((S.start(df, format="memory", query_name="sessions_partitions", available_now=True),
                            "sessions_partitions"))
            assert spark.conf.get("spark.sql.shuffle.partitions") == "200"
        own = (df.writeStream.format("memory").queryName("sessions_partitions_own").trigger(availableNow=True)
               .option("checkpointLocation", str(tmp_path / "own")).start())
        assert spark.conf.get("spark.sql.shuffle.partitions") == "200"
        own.awaitTermination()
        queries.append((own, "sessions_partitions_own"))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    cores = conf.cores(spark)
    buckets = max(1, cores // 2)  # the stateful operator's: one per two cores
    assert [s.buckets for s in S.pane_streams(df)] == [buckets]
    counted = "1 hash bucket" if buckets == 1 else f"{buckets} hash buckets"
    assert f"transformWithStateInPandas over {counted} of keys (1 per 2 cores, {cores} cores)" in text
    for q, table in queries:
        assert {op["numShufflePartitions"] for p in q.recentProgress for op in p["stateOperators"]} == {buckets}
        assert sorted((r.window_start.strftime("%M:%S"), r.n) for r in spark.table(table).collect()) \
            == [("00:00", 2)]


WORKERS_WITHOUT_SQLFLOW = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.argv[2]  # a Python without sqlflow (nor pyarrow)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
from pyspark.sql import SparkSession
import sqlflow
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.readStream.schema("user_id string, ts timestamp").json(sys.argv[1]).createOrReplaceTempView("clicks")
try:
    sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM clicks WATERMARK ts DELAY OF INTERVAL 1 SECOND\\n"
                       "GROUP BY user_id WINDOW SESSIONS(GAP 1m)")
    print("no error")
except sqlflow.SqlflowError as e:
    print(type(e).__name__, e.clause, e.line, e.column)
    print(e.message)
    print(e.hint)
"""


WITHOUT_SQLFLOW = "/usr/bin/python3"  # a Python without sqlflow (nor pyarrow)
NEEDS_IT = pytest.mark.skipif(not os.path.exists(WITHOUT_SQLFLOW),
                              reason=f"needs {WITHOUT_SQLFLOW}, a Python without sqlflow, to stand for workers that cannot import it")
FIX = (f"start Spark with the Python that has sqlflow installed: PYSPARK_PYTHON={sys.executable} in the environment "
       f"before the session starts, or SparkSession.builder.config(\"spark.pyspark.python\", \"{sys.executable}\")")
NO_SQLFLOW = ("the SELECT with WINDOW SESSIONS runs on a stream in Spark's Python workers, and they cannot run "
              "sqlflow: ModuleNotFoundError: No module named ")


@DEFAULTS
@NEEDS_IT
def test_workers_that_cannot_import_sqlflow_are_a_located_error_at_sql_time(spark, tmp_path, monkeypatch):
    """Spark's Python workers started from a Python without sqlflow: `sqlflow.sql` says so, with the
    fix, where Spark would fail the stream's first micro-batch
    (STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE). On the shared session: the Python its
    functions' workers run (PYSPARK_PYTHON, read when the session started) is replaced for the test,
    and the check, done once per Spark application, is made again."""
    from sqlflow.spark.streaming import session_conf

    monkeypatch.setattr(spark.sparkContext, "pythonExec", WITHOUT_SQLFLOW)
    monkeypatch.setattr(session_conf, "_WORKERS_READY", set())
    (tmp_path / "in").mkdir()
    spark.readStream.schema("user_id string, ts timestamp").json(str(tmp_path / "in")).createOrReplaceTempView(
        "clicks_without")
    try:
        with pytest.raises(sqlflow.SqlflowError) as caught:
            sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM clicks_without WATERMARK ts DELAY OF INTERVAL 1 SECOND\n"
                               "GROUP BY user_id WINDOW SESSIONS(GAP 1m)")
    finally:
        spark.catalog.dropTempView("clicks_without")
    e = caught.value
    assert (type(e).__name__, e.clause, e.line, e.column) == ("SqlflowExecutionError", "WINDOW", 2, 18)
    assert e.message.startswith(NO_SQLFLOW) and e.hint == FIX


@DEFAULTS
@NEEDS_IT
@pytest.mark.release
def test_workers_of_a_pyspark_python_without_sqlflow_are_a_located_error_at_sql_time(tmp_path):
    """The same, as a user meets it: PYSPARK_PYTHON names a Python without sqlflow when the session
    starts (a process of its own)."""
    (tmp_path / "in").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    out = subprocess.run([sys.executable, "-c", WORKERS_WITHOUT_SQLFLOW, str(tmp_path / "in"), WITHOUT_SQLFLOW],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "SqlflowExecutionError WINDOW 2 18", out.stdout + out.stderr[-3000:]
    assert lines[1].startswith(NO_SQLFLOW) and lines[2] == FIX
    # the check's failed tasks are not logged with their stack traces: the error says why
    assert "ERROR Executor" not in out.stderr and "PythonException" not in out.stderr, out.stderr[-3000:]


@DEFAULTS
def test_a_script_and_start_set_the_state_store_for_their_query_only(spark, tmp_path, default_store):
    clicks(spark, tmp_path, "clicks_script")
    script = f"""SET spark.sqlflow.checkpointLocation = {tmp_path / 'cp'};
        SET spark.sqlflow.trigger = availableNow;
        SET spark.sqlflow.finish = true;
        INSERT INTO memory.sessions_plain {SESSIONS.format(view='clicks_script')};"""
    try:
        run_script(spark, script)
    finally:
        for key in ("checkpointLocation", "trigger", "finish"):
            spark.conf.unset(f"spark.sqlflow.{key}")
    got = sorted((r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.n)
                 for r in spark.table("sessions_plain").collect())
    assert got == [("00:00", "01:30", 2), ("03:20", "04:20", 1)]
    assert spark.conf.get(PROVIDER_KEY) == HDFS_PROVIDER  # the session is as it was

    # sqlflow.sql once the line is added, then start: the same panes
    spark.conf.set(PROVIDER_KEY, "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "fin"))
    try:
        df = sqlflow.sql(spark, SESSIONS.format(view="clicks_script"))
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)
    spark.conf.unset(PROVIDER_KEY)
    S.start(df, format="memory", query_name="sessions_started", available_now=True, finish=True)
    again = sorted((r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.n)
                   for r in spark.table("sessions_started").collect())
    assert again == got
    assert spark.conf.get(PROVIDER_KEY) == HDFS_PROVIDER


@pytest.mark.parametrize("chosen", [None, "false"])
def test_the_operators_state_store_commits_its_changes_only_unless_the_session_chose(spark, tmp_path, chosen):
    """A stream on the stateful operator that sqlflow starts gets RocksDB's changelog
    checkpointing for its query: its state store's commits write the batch's changes
    (`.changelog` files) rather than a snapshot; a session that chose keeps its choice, and the
    session's setting is as it was after the start. The same panes either way."""
    view = f"clicks_changelog_{chosen}"
    clicks(spark, tmp_path, view)
    if chosen is not None:
        spark.conf.set(CHANGELOG_KEY, chosen)
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "fin"))
    try:
        df = sqlflow.sql(spark, SESSIONS.format(view=view))
        S.start(df, format="memory", query_name=f"sessions_{view}", checkpoint=str(tmp_path / "cp"),
                available_now=True, finish=True)
        assert spark.conf.get(CHANGELOG_KEY, None) == chosen
    finally:
        spark.conf.unset(CHANGELOG_KEY)
        spark.conf.unset(S.CONF_FINISH_DIR)
    suffixes = {f.suffix for f in (tmp_path / "cp" / "state").rglob("*") if f.is_file()}
    assert (".changelog" in suffixes) == (chosen is None)
    got = sorted((r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.n)
                 for r in spark.table(f"sessions_{view}").collect())
    assert got == [("00:00", "01:30", 2), ("03:20", "04:20", 1)]


#: Spark's default checkpoint file manager
SPARKS_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"


def manager(query) -> str:
    """The class writing `query`'s checkpoint files (its offset log's)."""
    return query._jsq.streamingQuery().offsetLog().fileManager().getClass().getName()


@pytest.mark.parametrize("executor", ["operator", "owned"])
def test_a_local_checkpoint_is_written_without_a_process_per_file_for_its_query_only(spark, tmp_path, executor):
    """On a session that has not chosen a checkpoint file manager (Spark's default forks `readlink`
    for every checkpoint file on the local file system), a stream sqlflow starts on a local
    checkpoint gets the FileSystem-based one for its query; the session stays as it was."""
    src = clicks(spark, tmp_path, f"clicks_files_{executor}")
    before = spark.conf.get(CHECKPOINT_MANAGER_KEY, None)
    assert before == CHECKPOINT_FILES  # as local_session sets it on the session it starts
    spark.conf.unset(CHECKPOINT_MANAGER_KEY)
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "fin"))
    try:
        df = sqlflow.sql(spark, SESSIONS.format(view=f"clicks_files_{executor}"))
        q = S.start(df, format="parquet", path=str(tmp_path / "out"), checkpoint=str(tmp_path / "cp"),
                    available_now=True, finish=True, executor=executor)
        assert manager(q) == CHECKPOINT_FILES
        assert spark.conf.get(CHECKPOINT_MANAGER_KEY, None) is None
        plain = spark.readStream.schema("user_id string, ts timestamp").json(str(src)).writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "plain")).trigger(availableNow=True).start()
        plain.awaitTermination()
        assert manager(plain) == SPARKS_MANAGER  # the session's own stream: Spark's default
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)
        if before is not None:
            spark.conf.set(CHECKPOINT_MANAGER_KEY, before)
    got = sorted((r.window_start.strftime("%M:%S"), r.n) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == [("00:00", 2), ("03:20", 1)]
    assert spark.conf.get(CHECKPOINT_MANAGER_KEY, None) == before


def test_the_checkpoint_file_manager_follows_the_checkpoints_file_system(spark, tmp_path):
    """Spark's default where the session has not chosen, the FileSystem-based manager for a local
    checkpoint (a path or a file: URI), Spark's default again for one elsewhere (an overwriting
    rename on HDFS keeps the old file), and a manager of the user's own left alone; the line
    docs/streaming.md gives users for their own streams sets the one `start` takes."""
    before = spark.conf.get(CHECKPOINT_MANAGER_KEY, None)
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text()
    fence = "`" * 3
    line = re.search(fence + r"python\n(.*?)" + fence, text[text.index("To give your own streams on a"):],
                     re.S).group(1)
    try:
        spark.conf.unset(CHECKPOINT_MANAGER_KEY)
        exec(line, {"spark": spark})
        assert spark.conf.get(CHECKPOINT_MANAGER_KEY) == CHECKPOINT_FILES
        spark.conf.unset(CHECKPOINT_MANAGER_KEY)
        assert checkpoint_manager(spark, str(tmp_path)) == CHECKPOINT_FILES
        assert checkpoint_manager(spark, f"file://{tmp_path}") == CHECKPOINT_FILES
        assert checkpoint_manager(spark, "hdfs://localhost:9000/cp") is None
        assert checkpoint_manager(spark, None) is None
        spark.conf.set(CHECKPOINT_MANAGER_KEY, CHECKPOINT_FILES)  # as local_session sets it
        assert checkpoint_manager(spark, str(tmp_path)) is None
        assert checkpoint_manager(spark, "hdfs://localhost:9000/cp") == ""
        assert local_checkpoint(spark, "hdfs://localhost:9000/cp") is False
        spark.conf.set(CHECKPOINT_MANAGER_KEY, "com.example.TheirManager")
        assert checkpoint_manager(spark, "hdfs://localhost:9000/cp") is None
        assert checkpoint_manager(spark, str(tmp_path)) is None
    finally:
        spark.conf.unset(CHECKPOINT_MANAGER_KEY)
        if before is not None:
            spark.conf.set(CHECKPOINT_MANAGER_KEY, before)


@pytest.mark.skipif(not unix_sockets(), reason="local_session keeps TCP here: Python workers over Unix domain "
                    "sockets need PySpark 4.1 or later, an OS with them (not Windows) and a temp dir short "
                    "enough for a socket's path")
def test_python_workers_talk_to_the_jvm_over_unix_sockets(spark):
    """`local_session`'s Python workers are started over Unix domain sockets (over TCP a Python
    task waited about 45 ms for its input, docs/spark-internals.md 8), and the builder line
    docs/streaming.md 9 gives for a session of one's own sets that setting and nothing else."""
    import textwrap

    def worker_env(batches):
        import pyarrow as pa

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"v": [os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "unset")]})

    assert spark.conf.get(UNIX_SOCKETS) == "true"
    assert spark.range(1).mapInArrow(worker_env, "v string").first().v == "True"
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text()
    fence = "`" * 3
    block = re.search(fence + r"python\n(.*?)" + fence,
                      text[text.index("session of your own needs it in its builder"):], re.S).group(1)
    settings: dict[str, str] = {}

    class Builder:
        def config(self, key, value):
            settings[key] = value
            return self

        def getOrCreate(self):
            return "the session"

    names = {"SparkSession": type("SparkSession", (), {"builder": Builder()})}
    exec(textwrap.dedent(block), names)
    assert settings == {UNIX_SOCKETS: "true"} and names["spark"] == "the session"


def test_a_temp_dir_too_long_for_a_socket_path_keeps_tcp(monkeypatch, tmp_path):
    """Spark makes a Python worker's socket `.<uuid>.sock` in the JVM's temp dir; where that path
    would not fit a Unix domain socket's address (103 bytes), `local_session` keeps TCP."""
    import tempfile

    from pyspark.version import __version__

    from sqlflow.spark.session import UNIX_SOCKET_PATH_MAX

    recent = tuple(int(p) for p in __version__.split(".")[:2]) >= (4, 1) and os.name != "nt"
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert unix_sockets() is recent
    longest = "/" + "t" * (UNIX_SOCKET_PATH_MAX - len("/") - len("/.") - 36 - len(".sock"))  # a dir, then the name
    monkeypatch.setattr(tempfile, "tempdir", longest)
    assert unix_sockets() is recent
    monkeypatch.setattr(tempfile, "tempdir", longest + "t")
    assert unix_sockets() is False
