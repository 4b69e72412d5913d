"""`PaneStream`: a streaming DataFrame of panes and what runs it (and how to finish it)."""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql import DataFrame

from ...errors import SqlflowUnsupportedError
from ..report import ATTRIBUTE
from .metrics import METRICS_NAME


@dataclass
class PaneStream:
    """A streaming DataFrame of panes and what runs it.

    - `panes`: the pane changelog (what `stream_panes` returns);
    - `raw`: the stateful operator's output before it is split into panes and dropped rows;
    - `dropped`: rows dropped by the engine (too late, closed window, NULL event time, bad gap),
      with the window they missed, when `keep_dropped=True`; under ASCENDING PER always, with the
      rows behind their partition (no window) among them (same query as `panes`: use
      `start(..., dropped_path=...)` to write both, on either executor);
    - `finish_dir`: where `finish()` writes the end-of-input marker (None: cannot finish);
    - `operator`: "native" or "stateful";
    - `chain`: when a later windowed stage reads this one (udfs/chained_operator.py), its panes (KIND
      DATA) and each operator call's report (KIND REPORT, `columns.REPORT_COLUMNS`) in one
      relation: what that stage reads, in place of `panes`;
    - `owned`: what the owned-sink executor needs to run the same stream through foreachBatch
      (`owned.OwnedRecipe`; its `why_not` says when it cannot), used by `start`;
    - `keeping_dropped`: for a stream built without `keep_dropped`, a function building the same
      stream with it (on the stateful operator): what `start(..., dropped_path=...)` runs on the
      operator, so that a stream nobody asks the dropped rows of costs nothing for them.
    """

    panes: DataFrame
    raw: DataFrame | None
    dropped: DataFrame | None
    finish_dir: str | None
    operator: str
    buckets: int
    metrics_name: str = METRICS_NAME
    pane_projection: list | None = None
    dropped_projection: list | None = None
    chain: DataFrame | None = None
    owned: Any = None
    keeping_dropped: Callable[[], "PaneStream"] | None = None

    def finish(self) -> None:
        """End the input: the next micro-batch moves the watermark to +infinity in every bucket,
        emitting and expiring every window (later rows are too late and counted)."""
        if self.finish_dir is None:
            raise SqlflowUnsupportedError("this stream was built without finish_dir, so it cannot be finished",
                                          clause="STREAM")
        write_finish_marker(self.finish_dir)


#: the names of end-of-input marker files (`write_finish_marker`)
MARKER_PREFIX, MARKER_SUFFIX = "finish-", ".json"


def no_finish_dir() -> SqlflowUnsupportedError:
    """`finish=True` for a stream built without a finish directory: what to do, from Python and SQL."""
    from ..conf import STREAMING_FINISH_DIR

    return SqlflowUnsupportedError(
        "finish needs a stream built with a finish directory", clause="STREAM",
        hint=f"set {STREAMING_FINISH_DIR} to a directory before sqlflow.sql builds the stream "
             f"(spark.conf.set(\"{STREAMING_FINISH_DIR}\", path) in Python, SET in SQL), or pass finish_dir to "
             "build_stream; or start without finish=True (docs/streaming.md, 3)")


def write_finish_marker(finish_dir: str) -> None:
    """Write one end-of-input marker file (atomically: Spark's file source never sees half of it)."""
    os.makedirs(finish_dir, exist_ok=True)
    name = f"{MARKER_PREFIX}{time.time_ns()}-{uuid.uuid4().hex[:8]}{MARKER_SUFFIX}"
    tmp = os.path.join(finish_dir, "." + name + ".tmp")
    with open(tmp, "w") as out:
        out.write(json.dumps({"finish": "finish"}) + "\n")
    os.replace(tmp, os.path.join(finish_dir, name))


def clear_finish_markers(finishers: list[PaneStream]) -> int:
    """Delete the end-of-input markers in the finish directories of `finishers`, before a run that
    starts from a fresh checkpoint: a marker belongs to the run that wrote it, and its file source
    would read an earlier run's markers in its first batch, finishing the run there and dropping
    every later row as too late. Returns how many it deleted.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> write_finish_marker(d); write_finish_marker(d)
    >>> s = PaneStream(None, None, None, d, "stateful", 1)
    >>> clear_finish_markers([s, s]), sorted(os.listdir(d)), clear_finish_markers([s])
    (2, [], 0)
    """
    deleted = 0
    for finish_dir in dict.fromkeys(s.finish_dir for s in finishers if s.finish_dir is not None):
        if not os.path.isdir(finish_dir):
            continue
        for name in os.listdir(finish_dir):
            if name.startswith(MARKER_PREFIX) and name.endswith(MARKER_SUFFIX):
                try:
                    os.remove(os.path.join(finish_dir, name))
                    deleted += 1
                except FileNotFoundError:  # pragma: no cover - removed meanwhile
                    pass
    return deleted


def named_and_triggered(writer, *, query_name: str | None, available_now: bool, finish: bool,
                        trigger_interval: str | None):
    """A DataStreamWriter with the query name and trigger `start` gives it (availableNow unless the
    stream is finished by `start`'s two runs, else the interval, else Spark's default)."""
    if query_name is not None:
        writer = writer.queryName(query_name)
    if available_now and not finish:
        writer = writer.trigger(availableNow=True)
    elif trigger_interval is not None:
        writer = writer.trigger(processingTime=trigger_interval)
    return writer


def fresh_checkpoint(spark, checkpoint: str | None, query_name: str | None = None) -> bool:
    """Whether a query started with `checkpoint` (None: Spark's choice) starts a new run rather
    than resuming one: no micro-batch planned yet (no `<checkpoint>/offsets/<n>`). Without a
    checkpoint Spark takes `spark.sql.streaming.checkpointLocation/<query name>` when both are
    set (a resumable one), else a new directory. A checkpoint on a file system other than the
    local one cannot be looked at from here: not fresh (its markers are kept).

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> class Conf:
    ...     def get(self, key, default=None):
    ...         return default
    >>> class Spark:
    ...     conf = Conf()
    >>> fresh_checkpoint(Spark(), None), fresh_checkpoint(Spark(), d), fresh_checkpoint(Spark(), "s3a://b/cp")
    (True, True, False)
    >>> os.makedirs(os.path.join(d, "offsets")); open(os.path.join(d, "offsets", "0"), "w").close()
    >>> fresh_checkpoint(Spark(), d), fresh_checkpoint(Spark(), "file://" + d)
    (False, False)
    """
    if checkpoint is None:
        root = spark.conf.get("spark.sql.streaming.checkpointLocation", None)
        if not root or not query_name:
            return True
        checkpoint = os.path.join(root, query_name)
    if checkpoint.startswith("file:"):
        checkpoint = "/" + checkpoint[len("file:"):].lstrip("/")
    elif re.match(r"[A-Za-z][A-Za-z0-9+.-]+:", checkpoint):  # hdfs:, s3a:, ...
        return False
    offsets = os.path.join(checkpoint, "offsets")
    return not os.path.isdir(offsets) or not any(not n.startswith((".", "_")) for n in os.listdir(offsets))


def aggregated(df) -> bool:
    """Whether a `sqlflow.sql` result aggregates the panes of a stream downstream (a streaming
    aggregation without a watermark: Spark writes it in complete or update mode, not append)."""
    report = getattr(df, ATTRIBUTE, None)
    return report is not None and any(s.extra.get("aggregated") for s in report.stages)


def pane_streams(df) -> list[PaneStream]:
    """The pane streams behind a `sqlflow.sql` result over a stream (for `start` and `finish`)."""
    report = getattr(df, ATTRIBUTE, None)
    if report is None:
        return []
    return [s.extra["stream"] for s in report.stages if "stream" in s.extra]
