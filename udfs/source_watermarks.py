"""The streaming operator's side of several watermarked inputs (docs/semantics.md, 9).

Each data row carries its source's number (column SOURCE); each heartbeat row carries one
source's max event time in an input partition. A bucket keeps the largest event time of each
source (`Meta.seen_by`, as text: a value state of one string needs no schema change per count of
sources), and its watermark is the minimum over the sources of what Spark computes for one
source, `own_watermark_ms`: max event time - that source's delay. A source that has sent no row
yet holds it at "none" (0, -inf for the engine), as in a replay (the low-watermark article: the input low
watermark is the minimum over *all* inputs; Spark's own minimum leaves such a source out).

>>> seen = merge_seen(None, 2, pd.DataFrame({SOURCE: [1, 1, 0], EVENT_TIME: [5_000, 9_000, None]}))
>>> seen, watermark_ms(seen, 0, (1, 2))
(',9000', 0)
>>> seen = merge_seen(seen, 2, pd.DataFrame({SOURCE: [0], EVENT_TIME: [20_000]}))
>>> seen, watermark_ms(seen, 0, (1, 2))
('20000,9000', 7)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sqlflow.columns import EVENT_TIME, SOURCE, TOO_LATE


def decode(seen_by: str | None, n: int) -> list[int | None]:
    """The per-source largest event times of `Meta.seen_by` (None: none yet)."""
    if not seen_by:
        return [None] * n
    return [int(v) if v else None for v in seen_by.split(",")]


def merge_seen(seen_by: str | None, n: int, heartbeats: pd.DataFrame) -> str | None:
    """`seen_by` raised by the max event time of each source among `heartbeats` (rows with
    SOURCE and EVENT_TIME)."""
    if not len(heartbeats):
        return seen_by
    times = pd.to_numeric(heartbeats[EVENT_TIME], errors="coerce")
    sources = pd.to_numeric(heartbeats[SOURCE], errors="coerce")
    ok = times.notna() & sources.notna()
    if not ok.any():
        return seen_by
    top = times[ok].groupby(sources[ok].astype(np.int64)).max()
    seen = decode(seen_by, n)
    for s, t in top.items():
        if 0 <= s < n:
            seen[s] = int(t) if seen[s] is None else max(seen[s], int(t))
    return ",".join("" if v is None else str(v) for v in seen)


def watermark_ms(seen_by: str | None, column_shift: int, delays_ms: tuple[int, ...]) -> int:
    """The window's watermark (ms of the shifted watermark column; 0: none yet): the minimum over
    the sources of max event time + `column_shift` (whole ms) - the source's delay."""
    seen = decode(seen_by, len(delays_ms))
    known = [v for v in seen if v is not None]
    if len(known) < len(seen):
        return 0
    return min((v + column_shift) // 1000 - d for v, d in zip(known, delays_ms))


def late_by_source(dropped: pd.DataFrame, rows: pd.DataFrame, n: int, weight: np.ndarray | None = None) -> list[int]:
    """How many (row, window) pairs of each source the engine dropped as too late.

    >>> rows = pd.DataFrame({SOURCE: [0, 1, 1]})
    >>> late_by_source(pd.DataFrame({"row": [1, 2, 2], "reason": [TOO_LATE, TOO_LATE, "closed window"]}), rows, 3)
    [0, 2, 0]
    """
    if not len(dropped):
        return [0] * n
    too_late = dropped["row"].to_numpy(dtype=np.int64)[dropped["reason"].to_numpy(dtype=object) == TOO_LATE]
    sources = rows[SOURCE].to_numpy(dtype=np.int64, na_value=-1)[too_late]
    keep = (sources >= 0) & (sources < n)
    counts = np.bincount(sources[keep], minlength=n)
    return [int(c) for c in counts[:n]]


def source_maxima(batch, time_column: str, n_sources: int) -> list:
    """The max of `time_column` per source (0..n_sources-1) in one Arrow batch (None: no row)."""
    import pyarrow.compute as pc

    out = [None] * n_sources
    if not batch.num_rows:
        return out
    sources = batch.column(SOURCE)
    times = batch.column(time_column)
    for s in range(n_sources):  # a handful of sources: a few Arrow kernels per batch
        m = pc.max(pc.filter(times, pc.equal(sources, s))).as_py()
        out[s] = m
    return out
