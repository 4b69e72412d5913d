"""A local SparkSession with the settings these machines need.

Why each setting (measured, see docs/spark-internals.md):

- ``SPARK_LOCAL_IP=127.0.0.1``: otherwise the driver binds the external interface.
- ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON = sys.executable``: otherwise Python workers run the
  system python, and every pandas UDF fails with "No module named pandas".
- ``spark.sql.shuffle.partitions=2``: 200 is slow on 2 cores and means 200 state stores per
  stateful streaming operator.
- RocksDB state store: required by ``transformWithStateInPandas``.
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

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

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
    }


def set_environment() -> None:
    """The environment a local Spark needs (see above): set where the user has not set it."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


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

    settings = default_conf(master)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def ensure_session(spark: "SparkSession | None" = None) -> "SparkSession":
    """`spark` if given, else the active SparkSession, else a new `local_session()`."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return active if active is not None else local_session()
