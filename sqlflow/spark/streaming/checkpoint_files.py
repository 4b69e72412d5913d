"""Small files under a streaming checkpoint, through Hadoop's FileSystem (so a checkpoint on HDFS or
an object store works as Spark's own does): the owned-sink executor's state versions and their
bookkeeping, and Spark's offset log, where each micro-batch's timestamp is kept.

Spark's offset log (`<checkpoint>/offsets/<batch id>`) is written before the batch runs and read
back on a restart, so a re-run batch has the same timestamp: the batch's processing time.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any

from pyspark.sql import SparkSession

from ...errors import SqlflowExecutionError, SqlflowUnsupportedError


def file_system(spark: SparkSession, path: str) -> tuple[Any, str]:
    """Hadoop's FileSystem of `path` on a classic session, and the path's fully qualified URI
    (`file:/...` on the local file system)."""
    jvm: Any = spark._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark._jsc.hadoopConfiguration())
    return fs, str(fs.makeQualified(p).toUri())


class CheckpointFiles:
    """Files under one checkpoint directory (`root`). On a Spark Connect session (no JVM in this
    process) only a local checkpoint, read and written by Python (`local_only`)."""

    def __init__(self, spark: SparkSession, root: str):
        from ..lifetimes import is_connect

        self.spark: SparkSession | None = spark
        self.root = root.rstrip("/")
        #: the local directory of a checkpoint on the local file system, read and written by Python
        #: directly (no round trips to the JVM); None: through Hadoop's FileSystem
        self.local: str | None = None
        #: whether Spark's Python workers open the checkpoint's files with pyarrow (`opened_by_pyarrow`)
        self.pyarrow: bool | None = None
        if is_connect(spark):
            self.local = local_only(root)
            master = str(spark.conf.get("spark.master", "") or "")
            if not master.startswith("local"):
                raise SqlflowUnsupportedError(
                    f"on Spark Connect the owned-sink executor needs a server in local mode beside this process "
                    f"(it shares the checkpoint's local files with it), not master {master!r}", clause="STREAM",
                    hint="SET spark.sqlflow.streaming.executor = operator")
            self.pyarrow = True
            self.spark = None  # picklable: a Connect foreachBatch function carries it to the server
            return
        jvm: Any = spark._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._conf = spark._jsc.hadoopConfiguration()
        self._jvm = jvm
        self.fs, qualified = file_system(spark, self.root)
        self.local = _local_path(qualified) if qualified.startswith("file:") else None

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def uri(self, relative: str) -> str:
        """The file's fully qualified URI (`file:/...` for a local path), as a Python worker opens it."""
        if self.spark is None:  # Spark Connect: a local checkpoint
            return f"file:{self.local}/{relative}"
        return str(self.fs.makeQualified(self._Path(self.path(relative))).toUri())

    def opened_by_pyarrow(self) -> bool:
        """Whether Spark's Python workers can open the checkpoint's files with pyarrow's file
        systems (a local path in local mode, or a URI pyarrow knows: `s3://`, `gs://`, ...)."""
        if self.pyarrow is not None:
            return self.pyarrow
        uri = self.uri("")
        if uri.startswith("file:"):
            assert self.spark is not None
            return str(self.spark.sparkContext.master).startswith("local")
        try:
            from pyarrow import fs

            fs.FileSystem.from_uri(uri)
        except (ValueError, OSError, ImportError):  # a scheme pyarrow does not know (s3a://, ...), or no reach
            return False
        return True

    def exists(self, relative: str) -> bool:
        if self.local is not None:
            return os.path.exists(f"{self.local}/{relative}")
        return bool(self.fs.exists(self._Path(self.path(relative))))

    def read_text(self, relative: str) -> str | None:
        if self.local is not None:
            try:
                with open(f"{self.local}/{relative}", encoding="utf-8") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        path = self._Path(self.path(relative))
        if not self.fs.exists(path):
            return None
        stream = self.fs.open(path)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, relative: str, text: str) -> None:
        """Write a small file atomically (a temporary name, then a rename)."""
        if self.local is not None:
            final_path = f"{self.local}/{relative}"
            os.makedirs(os.path.dirname(final_path), exist_ok=True)
            with open(final_path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(final_path + ".tmp", final_path)
            return
        final = self._Path(self.path(relative))
        tmp = self._Path(self.path(relative) + ".tmp")
        stream = self.fs.create(tmp, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        if not self.fs.rename(tmp, final):  # Hadoop's rename does not replace (a re-run batch's file)
            self.fs.delete(final, False)
            if self.fs.rename(tmp, final):
                return
            raise SqlflowExecutionError(f"could not write {self.path(relative)}", clause="STREAM")

    def list_dir(self, relative: str) -> list[str]:
        if self.local is not None:
            where = f"{self.local}/{relative}"
            return os.listdir(where) if os.path.isdir(where) else []
        path = self._Path(self.path(relative))
        if not self.fs.exists(path):
            return []
        return [str(s.getPath().getName()) for s in self.fs.listStatus(path)]

    def delete(self, relative: str) -> None:
        if self.local is not None:
            where = f"{self.local}/{relative}"
            if os.path.isdir(where):
                shutil.rmtree(where, ignore_errors=True)
            elif os.path.exists(where):
                os.remove(where)
            return
        self.fs.delete(self._Path(self.path(relative)), True)

    def batch_timestamp_ms(self, batch_id: int) -> int:
        """The timestamp Spark logged for micro-batch `batch_id` (its offset log entry's
        `batchTimestampMs`: the same when Spark re-runs the batch after a failure)."""
        text = self.read_text(f"offsets/{batch_id}")
        if text is None:
            raise SqlflowExecutionError(f"micro-batch {batch_id} has no entry in the offset log of {self.root}",
                                        clause="STREAM")
        for line in text.splitlines():
            if line.startswith("{") and "batchTimestampMs" in line:
                return int(json.loads(line)["batchTimestampMs"])
        raise SqlflowExecutionError(f"the offset log entry {self.path(f'offsets/{batch_id}')} has no batch timestamp",
                                    clause="STREAM")


def local_only(root: str) -> str:
    """The local directory of a checkpoint that Python reads and writes itself (a Spark Connect
    session: no JVM in this process): an absolute path or a `file:` URI; else a located error.

    >>> local_only("/tmp/cp/"), local_only("file:///tmp/cp")
    ('/tmp/cp', '/tmp/cp')
    >>> try:
    ...     local_only("s3a://bucket/cp")
    ... except SqlflowUnsupportedError as e:
    ...     print(e.message)  # doctest: +NORMALIZE_WHITESPACE
    on Spark Connect the owned-sink executor reads and writes its checkpoint with Python's file I/O,
    so it must be an absolute local path (or file:/...), not 's3a://bucket/cp' (Hadoop's file
    systems are the JVM's)
    """
    path = _local_path(root) if root.startswith("file:") else root
    if "://" in path or not os.path.isabs(path):
        raise SqlflowUnsupportedError(
            "on Spark Connect the owned-sink executor reads and writes its checkpoint with Python's file I/O, so it "
            f"must be an absolute local path (or file:/...), not {root!r} (Hadoop's file systems are the JVM's)",
            clause="STREAM", hint="SET spark.sqlflow.streaming.executor = operator")
    return path.rstrip("/") or "/"


def _local_path(uri: str) -> str:
    """The local path of a `file:` URI (Hadoop's `file:/x`, or `file:///x`).

    >>> _local_path("file:/tmp/cp"), _local_path("file:///tmp/cp")
    ('/tmp/cp', '/tmp/cp')
    """
    return "/" + uri[len("file:"):].lstrip("/")
