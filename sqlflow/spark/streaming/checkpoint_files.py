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

from ...errors import SqlflowExecutionError


class CheckpointFiles:
    """Files under one checkpoint directory (`root`)."""

    def __init__(self, spark: SparkSession, root: str):
        self.spark, self.root = spark, root.rstrip("/")
        jvm: Any = spark._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._conf = spark._jsc.hadoopConfiguration()
        self._jvm = jvm
        self.fs = self._Path(self.root).getFileSystem(self._conf)
        #: the local directory of a checkpoint on the local file system, read and written by Python
        #: directly (no round trips to the JVM); None: through Hadoop's FileSystem
        qualified = str(self.fs.makeQualified(self._Path(self.root)).toUri())
        self.local = _local_path(qualified) if qualified.startswith("file:") else None

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def uri(self, relative: str) -> str:
        """The file's fully qualified URI (`file:/...` for a local path), as a Python worker opens it."""
        return str(self.fs.makeQualified(self._Path(self.path(relative))).toUri())

    def opened_by_pyarrow(self) -> bool:
        """Whether Spark's Python workers can open the checkpoint's files with pyarrow's file
        systems (a local path in local mode, or a URI pyarrow knows: `s3://`, `gs://`, ...)."""
        uri = self.uri("")
        if uri.startswith("file:"):
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


def _local_path(uri: str) -> str:
    """The local path of a `file:` URI (Hadoop's `file:/x`, or `file:///x`).

    >>> _local_path("file:/tmp/cp"), _local_path("file:///tmp/cp")
    ('/tmp/cp', '/tmp/cp')
    """
    return "/" + uri[len("file:"):].lstrip("/")
