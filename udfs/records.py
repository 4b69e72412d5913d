"""The rows of one input partition that can set a replay's watermark (`sqlflow/spark/timeline.py`).

Runs on Spark's Python workers (`mapInPandas` over the columns `et`, `at`, int64 microseconds):
it yields the partition's records and one summary row (`n`: how many rows; `at`: the last
arrival; `et`: the first arrival, where PERFECT's watermark takes its first value).

- `delay` (DELAY OF d: the running maximum of event time in arrival order): the rows whose event
  time exceeds that of every row arrived before them (or with them, taken first);
- `perfect` (the minimum event time of the rows still to arrive): the rows whose event time is
  below that of every row arriving after them (or with them, taken later);
- None (an explicit TIMELINE): no records, only the summary.

>>> import pandas as pd
>>> batch = pd.DataFrame({"et": [5, 3, 9, 7, 9], "at": [10, 11, 12, 13, 12]})
>>> out = pd.concat(PartitionRecords("delay")(iter([batch])))
>>> out.values.tolist()
[[False, 10, 5, 0], [False, 12, 9, 0], [True, 13, 10, 5]]
>>> out = pd.concat(PartitionRecords("perfect")(iter([batch])))
>>> sorted(out[~out.summary][["at", "et"]].values.tolist())
[[11, 3], [13, 7]]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sqlflow.time import NEG_INF, POS_INF
from sqlflow.udfs.worker_gc import freeze_imports

SCHEMA = "summary boolean, at long, et long, n long"


@dataclass(frozen=True)
class PartitionRecords:
    kind: str | None  # "delay", "perfect" or None

    def __call__(self, batches):
        freeze_imports()
        parts = [b for b in batches if len(b)]
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"et": [], "at": []})
        at = frame["at"].to_numpy(np.int64)
        et = frame["et"].to_numpy(np.int64)
        keep = frontier(at, et, self.kind)
        yield pd.DataFrame({"summary": np.zeros(len(keep), bool), "at": at[keep], "et": et[keep],
                            "n": np.zeros(len(keep), np.int64)})
        yield pd.DataFrame({"summary": [True], "at": [int(at.max()) if len(at) else NEG_INF], "et": [int(at.min()) if len(at) else POS_INF],
                            "n": [len(at)]})


def frontier(at: np.ndarray, et: np.ndarray, kind: str | None) -> np.ndarray:
    """Ascending indices of the rows that can set the watermark of `kind` (see the module doc).

    Rows of equal arrival are taken in input order, so a few more rows than needed may be kept
    (a tie's smaller event time before its larger one): a superset gives the same timeline, and a
    stable sort of int64 arrival times, mostly in order already, is much cheaper than ordering
    the ties by event time too (np.lexsort)."""
    if not len(at) or kind not in ("delay", "perfect"):
        return np.empty(0, np.int64)
    order = np.argsort(at, kind="stable")
    if kind == "perfect":  # reversed arrival order: rows arriving later come first
        order = order[::-1]
    e = et[order]
    better = np.empty(len(e), bool)  # beyond every row before it in that order
    if kind == "delay":
        better[0] = e[0] > NEG_INF
        np.greater(e[1:], np.maximum.accumulate(e)[:-1], out=better[1:])
    else:
        better[0] = e[0] < POS_INF
        np.less(e[1:], np.minimum.accumulate(e)[:-1], out=better[1:])
    return np.sort(order[better])
