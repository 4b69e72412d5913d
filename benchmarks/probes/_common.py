"""Helpers shared by the probes (run each probe with the dev venv: `python benchmarks/probes/X.py`)."""
from __future__ import annotations

import itertools
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from sqlflow.spark.session import local_session

BASE = pd.Timestamp("2024-01-01 00:00:00")  # event times are BASE + seconds
BASE_MS = int(BASE.timestamp() * 1000)


def spark(**conf):
    import logging

    # PySpark 4 logs every AnalysisException with a query context as a JSON ERROR line with a
    # full stack trace, even when the caller catches it: silence that (the exception is unchanged).
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return local_session(app_name="probe", conf=conf)


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="sqlflow-probe-"))


class Files:
    """Input dir of a file source: atomic writes, one second of mtime per file."""

    _clock = itertools.count(int(time.time()) - 100_000)

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.n = 0

    def write(self, frame: pd.DataFrame) -> None:
        self.n += 1
        tmp = self.path.parent / f".tmp-{self.n}.parquet"
        frame.to_parquet(tmp, index=False)
        t = next(self._clock)
        os.utime(tmp, (t, t))
        os.replace(tmp, self.path / f"part-{self.n:05d}.parquet")


def events(key_secs: list[tuple[str, float]]) -> pd.DataFrame:
    """Rows (k, ts, v) with ts = BASE + secs (microsecond timestamps)."""
    return pd.DataFrame({
        "k": [k for k, _ in key_secs],
        "ts": [BASE + pd.Timedelta(seconds=s) for _, s in key_secs],
        "v": list(range(len(key_secs))),
    }).astype({"ts": "datetime64[us]"})


def rel(ms):
    """Milliseconds since epoch -> seconds since BASE (None for negative sentinels)."""
    if ms is None or ms < 0:
        return ms
    return (ms - BASE_MS) / 1000
