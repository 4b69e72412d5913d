"""`PaneStream`: a streaming DataFrame of panes and what runs it (and how to finish it)."""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

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
      with the window they missed, when `keep_dropped=True` (same query as `panes`: use
      `start(..., dropped_path=...)` to write both);
    - `finish_dir`: where `finish()` writes the end-of-input marker (None: cannot finish);
    - `operator`: "native" or "stateful";
    - `chain`: when a later windowed stage reads this one (udfs/chained.py), its panes (KIND
      DATA) and each operator call's report (KIND REPORT, `columns.REPORT_COLUMNS`) in one
      relation: what that stage reads, in place of `panes`;
    - `owned`: what the owned-sink executor needs to run the same stream through foreachBatch
      (`owned.OwnedRecipe`; its `why_not` says when it cannot), used by `start`.
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

    def finish(self) -> None:
        """End the input: the next micro-batch moves the watermark to +infinity in every bucket,
        emitting and expiring every window (later rows are too late and counted)."""
        if self.finish_dir is None:
            raise SqlflowUnsupportedError("this stream was built without finish_dir, so it cannot be finished",
                                          clause="STREAM")
        write_finish_marker(self.finish_dir)


def write_finish_marker(finish_dir: str) -> None:
    """Write one end-of-input marker file (atomically: Spark's file source never sees half of it)."""
    os.makedirs(finish_dir, exist_ok=True)
    name = f"finish-{time.time_ns()}-{uuid.uuid4().hex[:8]}.json"
    tmp = os.path.join(finish_dir, "." + name + ".tmp")
    with open(tmp, "w") as out:
        out.write(json.dumps({"finish": "finish"}) + "\n")
    os.replace(tmp, os.path.join(finish_dir, name))


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
