"""The second stage's side of two chained windowed stages on a stream (docs/pipelines.md, "On a
stream"; docs/semantics.md, 1.3): what it keeps of the first stage's reports, and its watermark.

Each call of a first-stage bucket (hash bucket b of n1) reports on its METRICS row
(`columns.REPORT_COLUMNS`, udfs/streaming.py): its call number (`seq`, increasing per bucket),
its input watermark W and its holds after the call (`Engine.held`: the smallest `output_time`
of its pending retractions, +inf when none), the batch time, and whether its input has finished;
Spark copies the row to every second-stage bucket (sqlflow/spark/streaming/chained_stage.py), so that
every second-stage bucket runs in every batch. A second-stage bucket runs in timeMode None
(udfs/chained_operator.py), so Spark gives it neither a watermark nor a batch time
(tests/upstream/test_transform_with_state.py): both come from the reports. It keeps, per first-stage bucket, the value of its latest report, min(W, held), since
a bucket not visited in a batch holds what it last held; its watermark is the running maximum of
the minimum over the buckets (the low-watermark article: InputLowWatermark = min of the upstream
OutputLowWatermarks), and a bucket that has not reported yet holds it at -inf.

A bucket can be called twice in one batch (its rows, then its expired timer): the report with
the larger `seq` is the later state. The reports cannot reach the second stage by a branch of
their own: a UNION ALL of two branches read off one operator runs it twice
(`test_two_branches_off_one_operator_run_it_twice`); they travel in the panes' rows.

>>> from sqlflow.time import POS_INF
>>> kept = Reports.start(2)
>>> kept, p = kept.merge(pd.DataFrame({FROM: [0, 0, 1], SEQ: [1, 2, 1], WM: [40, 40, 40],
...                                    HELD: [31, POS_INF, POS_INF], TIME: [30, 30, 30],
...                                    DONE: [False, False, False]}))
>>> kept.value.tolist(), p, kept.watermark(NEG_INF)
([40, 40], 30, 40)
>>> kept, p = kept.merge(pd.DataFrame({FROM: [1], SEQ: [2], WM: [50], HELD: [31], TIME: [45], DONE: [True]}))
>>> kept.value.tolist(), p, kept.watermark(40), kept.finished
([40, 31], 45, 40, False)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sqlflow.columns import REPORT_DONE as DONE
from sqlflow.columns import REPORT_FROM as FROM
from sqlflow.columns import REPORT_HELD as HELD
from sqlflow.columns import REPORT_SEQ as SEQ
from sqlflow.columns import REPORT_TIME as TIME
from sqlflow.columns import REPORT_WM as WM
from sqlflow.time import NEG_INF


@dataclass(frozen=True)
class Reports:
    """A second-stage bucket's view of the n1 first-stage buckets: per bucket, the `seq` and
    value min(W, held) of its latest report, and whether its input finished."""

    seq: np.ndarray    # int64 per first-stage bucket; -1: no report yet
    value: np.ndarray  # int64 per first-stage bucket; NEG_INF: no report yet
    done: np.ndarray   # bool per first-stage bucket

    @staticmethod
    def start(n1: int) -> "Reports":
        return Reports(np.full(n1, -1, np.int64), np.full(n1, NEG_INF, np.int64), np.zeros(n1, bool))

    @property
    def finished(self) -> bool:
        """Every first-stage bucket's input has finished (the second stage may emit all it holds)."""
        return bool(self.done.all())

    def watermark(self, previous: int) -> int:
        """The second stage's watermark: never back, the minimum of the buckets' latest values."""
        return max(int(previous), int(self.value.min())) if len(self.value) else int(previous)

    def merge(self, reports: pd.DataFrame) -> tuple["Reports", int | None]:
        """Take the reports of a batch (rows with REPORT_COLUMNS; vectorised over them): each
        bucket's newest by `seq`. Returns the new view and the batch time (None: no report)."""
        if not len(reports):
            return self, None
        source = reports[FROM].to_numpy(np.int64)
        seq = reports[SEQ].to_numpy(np.int64)
        value = np.minimum(reports[WM].to_numpy(np.int64), reports[HELD].to_numpy(np.int64))
        done = reports[DONE].to_numpy(bool)
        order = np.lexsort((seq, source))  # by bucket, then seq: the last of each bucket is its newest
        last = np.r_[source[order][1:] != source[order][:-1], True]
        pick = order[last]
        newer = seq[pick] > self.seq[source[pick]]
        pick = pick[newer]
        out_seq, out_value, out_done = self.seq.copy(), self.value.copy(), self.done.copy()
        out_seq[source[pick]] = seq[pick]
        out_value[source[pick]] = value[pick]
        out_done[source[pick]] = done[pick]
        return Reports(out_seq, out_value, out_done), int(reports[TIME].to_numpy(np.int64).max())

    def to_bytes(self) -> bytes:
        """The view as one value of state (three int64 arrays, the flags as 0/1)."""
        return np.stack([self.seq, self.value, self.done.astype(np.int64)]).tobytes()

    @staticmethod
    def of_bytes(blob: bytes, n1: int) -> "Reports":
        """The view `to_bytes` wrote.

        >>> r = Reports(np.array([4, -1]), np.array([31, NEG_INF]), np.array([True, False]))
        >>> back = Reports.of_bytes(r.to_bytes(), 2)
        >>> back.seq.tolist(), back.value.tolist() == r.value.tolist(), back.done.tolist()
        ([4, -1], True, [True, False])
        """
        a = np.frombuffer(bytes(blob), np.int64).reshape(3, n1)
        return Reports(a[0].copy(), a[1].copy(), a[2].astype(bool))


__all__ = ["Reports"]
