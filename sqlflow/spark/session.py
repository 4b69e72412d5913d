"""A local SparkSession with the settings these machines need.

Why each setting (measured, see docs/spark-internals.md):

- ``SPARK_LOCAL_IP=127.0.0.1``: otherwise the driver binds the external interface.
- ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON = sys.executable``: otherwise Python workers run the
  system python, and every pandas UDF fails with "No module named pandas".
- ``spark.sql.shuffle.partitions=2``: 200 is slow on 2 cores and means 200 state stores per
  stateful streaming operator.
- RocksDB state store: required by ``transformWithStateInPandas``.
- ``spark.sql.streaming.checkpointFileManagerClass``: Hadoop's FileSystem API for a stream's
  checkpoint files (`CHECKPOINT_FILES`). Spark's default goes through Hadoop's FileContext, which
  on the local file system runs the `readlink` command, a new process forked from the JVM, for
  every checkpoint file it writes: offsets, commits, the source's log and the state store's
  files, several per micro-batch (3,304 processes for the 12 tests of
  tests/streaming/test_pipelines.py). Through the FileSystem API none: those tests and
  tests/streaming/test_owned.py's took 92-98 s against 110-122 s (115 against 140 CPU-seconds),
  alternated, 2 rounds each. A local rename is atomic either way; Spark itself takes this class
  for file systems without FileContext. Set on the running session (`RUNTIME_CONF`), not when
  Spark starts: a setting given to the builder stays in every query's Hadoop settings even
  after `spark.conf.unset`, and `start` unsets it for a checkpoint on another file system
  (sqlflow/spark/streaming/session_conf.py).
- ``spark.python.unix.domain.socket.enabled`` (`UNIX_SOCKETS`, PySpark 4.1 and later, where the
  operating system has them): Python workers talk to the JVM over Unix domain sockets, not TCP.
  Over TCP a Python task's input waited about 45 ms before its first rows arrived (a
  `mapInArrow` over 2,000 rows, the function's wait measured inside the worker), about 5 ms
  over a Unix socket: that wait is paid by every Python stage of every micro-batch (the
  stateful operator's pass and its operator), and 50 micro-batches of 2,000 rows through
  `sqlflow.sql`'s streaming DataFrame took 11.4-12.4 s against 13.5-14.8 s. A static setting:
  Spark reads it when it starts (docs/streaming.md 9 gives the line for a session of one's own).
- Warehouse, Derby metastore and derby.log under a private temp dir: nothing lands in the
  working directory.

This module imports neither sqlglot nor lark.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from ..errors import SqlflowError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: Spark's checkpoint file manager on Hadoop's FileSystem API (see above)
CHECKPOINT_FILES = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"

#: Python workers over Unix domain sockets (see above; PySpark 4.1 and later read it)
UNIX_SOCKETS = "spark.python.unix.domain.socket.enabled"

#: what `local_session` sets on the running session (the rest of its settings: `default_conf`)
RUNTIME_CONF = {"spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILES}

_scratch: str | None = None


def _scratch_dir() -> str:
    """One temp dir per process for Spark's warehouse and metastore, removed at exit."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="sqlflow-spark-")
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def default_conf(master: str = "local[2]") -> dict[str, str]:
    """The Spark configuration `local_session` starts from (before the caller's `conf`)."""
    scratch = _scratch_dir()
    derby = os.path.join(scratch, "derby")
    return {
        "spark.master": master,
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.warehouse.dir": os.path.join(scratch, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(derby, 'metastore_db')};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={derby}",
        # Temporary checkpoints of queries without checkpointLocation (memory sink, console):
        # delete them when the query stops.
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.log.level": "WARN",
        **({UNIX_SOCKETS: "true"} if unix_sockets() else {}),
    }


#: the longest path of a Unix domain socket everywhere (108 bytes on Linux, 104 on macOS, with
#: its terminating NUL)
UNIX_SOCKET_PATH_MAX = 103


def unix_sockets() -> bool:
    """Whether this PySpark and operating system can run Python workers over Unix domain
    sockets (`UNIX_SOCKETS`: PySpark 4.1 and later; not on Windows). Spark names a socket
    `.<uuid>.sock` in the JVM's temp dir (`java.io.tmpdir`, which is TMPDIR on macOS): a temp dir
    so long that the path would not fit keeps TCP."""
    import socket

    from pyspark.version import __version__

    major, minor = (int(p) for p in __version__.split(".")[:2])
    path = os.path.join(tempfile.gettempdir(), f".{'0' * 36}.sock")
    return ((major, minor) >= (4, 1) and hasattr(socket, "AF_UNIX") and os.name != "nt"
            and len(path.encode()) <= UNIX_SOCKET_PATH_MAX)


def set_environment() -> None:
    """The environment a local Spark needs (see above): set where the user has not set it."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


#: how to get the Java Spark runs on (Spark 4 supports Java 17 and 21)
INSTALL_JAVA = ("install it (Debian, Ubuntu: sudo apt-get install openjdk-17-jre-headless; macOS: brew install "
                "openjdk@17; conda: conda install -c conda-forge openjdk=17), then put its bin directory on PATH "
                "or set JAVA_HOME to it")


def missing_java() -> str | None:
    """Why spark-submit will find no java to start Spark's JVM with (it takes JAVA_HOME's
    bin/java if JAVA_HOME is set, else the java on PATH), or None when it will find one."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        return None if os.access(java, os.X_OK) else f"JAVA_HOME is {home}, which has no bin/java"
    return None if shutil.which("java") else "no java on PATH, and JAVA_HOME is not set"


def java_error(why: str) -> SqlflowError:
    """The error of a JVM that cannot start for want of Java (instead of PySpark's
    JAVA_GATEWAY_EXITED traceback)."""
    return SqlflowError(f"Spark needs Java 17 (or 21) and found none: {why}", clause="SPARK", hint=INSTALL_JAVA)


def jvm_start_error(error: Exception) -> SqlflowError | None:
    """PySpark's JAVA_GATEWAY_EXITED (spark-submit ended before Spark's JVM ran: its own
    messages were printed above) as a SqlflowError naming the java it ran; None for another error."""
    condition = getattr(error, "getCondition", None)
    if condition is None or condition() != "JAVA_GATEWAY_EXITED":
        return None
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    return SqlflowError(f"Spark's JVM did not start with {java} (spark-submit's messages are above); "
                        "Spark needs Java 17 (or 21)", clause="SPARK",
                        hint=f"check that {java} -version says 17 or 21; or " + INSTALL_JAVA)


def check_java() -> None:
    """Before this process starts Spark's JVM (not when one runs already, nor for Spark
    Connect): a SqlflowError saying how to install Java if there is none to start it with."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("SPARK_REMOTE"):
        return
    why = missing_java()
    if why is not None:
        raise java_error(why)


def local_session(
    app_name: str = "sqlflow",
    master: str = "local[2]",
    conf: dict[str, Any] | None = None,
) -> "SparkSession":
    """Get or create a local SparkSession configured for sqlflow; `conf` overrides the defaults.

    If a session already exists it is returned as is (Spark ignores static settings then).
    """
    set_environment()
    from pyspark.sql import SparkSession

    check_java()
    settings = default_conf(master)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as error:
        failed = jvm_start_error(error)
        if failed is None:
            raise
        raise failed from None
    spark.sparkContext.setLogLevel("WARN")
    for key, value in RUNTIME_CONF.items():
        if key not in settings:
            spark.conf.set(key, value)
    return spark


def keeps_active_session(batch_function):
    """`batch_function` (a foreachBatch function) leaving the process's active SparkSession as it
    found it. pyspark's `createDataFrame` makes its session the active one, a class attribute that
    every thread shares, and a micro-batch's session is the stream's clone of the user's: a batch
    that builds a DataFrame would leave `SparkSession.getActiveSession()` returning that clone to
    the user's code, and to the magic and the CLI, which run on the active session (so settings
    made on the user's session after a stream went unseen)."""
    from functools import wraps

    @wraps(batch_function)
    def kept(*args, **kwargs):
        from pyspark.sql import SparkSession

        prior = SparkSession._activeSession
        try:
            return batch_function(*args, **kwargs)
        finally:
            SparkSession._activeSession = prior
    return kept


def ensure_session(spark: "SparkSession | None" = None) -> "SparkSession":
    """`spark` if given, else the active SparkSession, else a new `local_session()`."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return active if active is not None else local_session()
