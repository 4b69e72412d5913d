"""Shared by the live-stream tests of `WATERMARK ts ASCENDING PER p` (tests/streaming/
test_partition_stream.py, test_partition_union.py): times of the day the readings are on, the
files a stream reads one per micro-batch, the panes by the batch that emitted them."""
from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pandas as pd

DAY = dt.datetime(2024, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)


def T(seconds: float) -> dt.datetime:
    return DAY + dt.timedelta(seconds=seconds)


def at(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=micros)


_mtime = [int(time.time()) - 40_000]


def write_files(folder: Path, batches) -> None:
    """One parquet file per batch of (device, second) rows, each file newer than the last."""
    folder.mkdir(parents=True, exist_ok=True)
    for rows in batches:
        _mtime[0] += 1
        tmp = folder.parent / f".part-{_mtime[0]}.parquet"
        pd.DataFrame({"device": [d for d, _ in rows], "ts": [T(s) for _, s in rows]}) \
            .astype({"ts": "datetime64[us]"}).to_parquet(tmp, index=False)
        os.utime(tmp, (_mtime[0], _mtime[0]))
        os.replace(tmp, folder / f"part-{_mtime[0]}.parquet")


def panes_by_batch(rows, times: list[int], count: str = "n") -> list[tuple]:
    """(n, window start in seconds, timing, the batch that emitted it) per pane (`count`: the
    column of n)."""
    index = {at(p): b for b, p in enumerate(times)}
    return sorted((r[count], int((r.window_start - DAY).total_seconds()), r.pane_timing, index[r.emit_time])
                  for r in rows)
