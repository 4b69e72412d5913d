"""Deterministic synthetic events for the comparison suite (benchmarks/compare.py).

A day of clickstream per million rows, so every size has the same density:

- **keys**: `rows // 100` users whose popularity follows Zipf's law (the user of rank r gets a
  share proportional to 1/r, ranks shuffled over the ids): at a million rows the busiest user has
  about 10% of the clicks, the median user a handful;
- **event times**: each user's clicks come in visits (geometric length, mean 10 clicks, about
  30 s apart) that start uniformly over the span;
- **arrival**: event time plus a delay: 97% within seconds (exponential, mean 2 s), 2.5% between
  10 s and 2 minutes, 0.5% between 5 and 30 minutes (phones coming back online). Rows are
  therefore out of order, and with a watermark one minute behind the largest event time about 1.4%
  of them are late. No row is more than 30 minutes late;
- times are whole milliseconds (Beam's timestamps and watermarks are milliseconds).

Columns: user_id (bigint), amount (bigint, 1..99), event_time and arrival_time (timestamps, UTC).
`dataset(rows)` writes the parquet file once under benchmarks/data/ and reuses it. The same rows
as CSV (`csv_dataset`, `csv_stream_files`) are what sqlflow and Flink both read without extra
jars (Flink's parquet format is a separate jar): no header, the times as epoch milliseconds.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

MS = 1_000  # microseconds
SECOND = 1_000 * MS
MINUTE = 60 * SECOND
DAY = 24 * 60 * MINUTE
BASE = 1_700_000_000 * SECOND  # 2023-11-14 22:13:20 UTC
VERSION = 1  # bump when the generator changes: cached files carry it in their names

DATA = Path(os.environ.get("SQLFLOW_BENCH_DATA", Path(__file__).resolve().parent / "data"))


def events(rows: int, *, seed: int = 7) -> pd.DataFrame:
    """`rows` events (int64 microseconds for the times), in event order of visits, not sorted."""
    rng = np.random.default_rng(seed)
    keys = max(100, rows // 100)
    span = max(MINUTE, rows * DAY // 1_000_000)
    weight = 1.0 / np.arange(1, keys + 1)
    popularity = rng.permutation(keys)  # user id -> rank: hot users are not the small ids
    share = weight[popularity] / weight.sum()

    clicks_per_visit = 10
    visits = rows // clicks_per_visit + rows // 200 + 10  # 5% spare: the last visits are cut off
    visit_user = rng.choice(keys, size=visits, p=share)
    visit_start = BASE + rng.integers(0, span, visits)
    length = rng.geometric(1 / clicks_per_visit, visits)
    visit = np.repeat(np.arange(visits), length)[:rows]
    if len(visit) < rows:  # top up the last visit so there are exactly `rows` clicks
        visit = np.r_[visit, np.full(rows - len(visit), visits - 1)]
    first = np.r_[0, np.flatnonzero(np.diff(visit)) + 1]
    step = rng.exponential(30 * SECOND, rows).astype(np.int64)
    step[first] = 0
    cum = np.cumsum(step)
    counts = np.diff(np.r_[first, rows])
    offset = cum - np.repeat(cum[first], counts)
    event_time = visit_start[visit] + offset

    u = rng.random(rows)
    delay = np.where(u < 0.97, rng.exponential(2 * SECOND, rows),
                     np.where(u < 0.995, rng.uniform(10 * SECOND, 2 * MINUTE, rows),
                              rng.uniform(5 * MINUTE, 30 * MINUTE, rows))).astype(np.int64)
    event_time = event_time // MS * MS
    arrival_time = (event_time + delay) // MS * MS
    return pd.DataFrame({
        "user_id": visit_user[visit].astype(np.int64),
        "amount": rng.integers(1, 100, rows).astype(np.int64),
        "event_time": event_time,
        "arrival_time": arrival_time,
    })


def to_table(frame: pd.DataFrame) -> pa.Table:
    ts = pa.timestamp("us", tz="UTC")
    return pa.table({
        "user_id": pa.array(frame["user_id"].to_numpy(), pa.int64()),
        "amount": pa.array(frame["amount"].to_numpy(), pa.int64()),
        "event_time": pa.array(frame["event_time"].to_numpy(), pa.int64()).cast(ts),
        "arrival_time": pa.array(frame["arrival_time"].to_numpy(), pa.int64()).cast(ts),
    })


def dataset(rows: int, *, seed: int = 7) -> Path:
    """The parquet file of `events(rows)`, rows in arrival order; written on first use."""
    path = DATA / f"events-v{VERSION}-{rows}-s{seed}.parquet"
    if not path.exists():
        frame = events(rows, seed=seed).sort_values("arrival_time", kind="stable", ignore_index=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        pq.write_table(to_table(frame), tmp, row_group_size=1_000_000)
        tmp.rename(path)
    return path


def prefix(rows: int, of: int, *, seed: int = 7) -> Path:
    """The first `rows` arrivals of dataset(of), as their own file (Beam's input)."""
    path = DATA / f"events-v{VERSION}-{of}-s{seed}-first-{rows}.parquet"
    if not path.exists():
        table = pq.read_table(dataset(of, seed=seed)).slice(0, rows)
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        tmp.rename(path)
    return path


def stream_files(rows: int, files: int, *, seed: int = 7) -> Path:
    """dataset(rows) split into `files` parquet files of equal size in arrival order, for a file
    stream read one file per micro-batch (modification times increase with the file number)."""
    where = DATA / f"stream-v{VERSION}-{rows}-s{seed}-{files}-files"
    if not (where / "_COMPLETE").exists():
        where.mkdir(parents=True, exist_ok=True)
        table = pq.read_table(dataset(rows, seed=seed))
        size = -(-table.num_rows // files)
        for i in range(files):
            part = where / f"part-{i:04d}.parquet"
            pq.write_table(table.slice(i * size, size), part)
            os.utime(part, (1_600_000_000 + i, 1_600_000_000 + i))  # the file source orders by mtime
        (where / "_COMPLETE").write_text("")
    return where


CSV_COLUMNS = "user_id BIGINT, amount BIGINT, event_ms BIGINT, arrival_ms BIGINT"  # Spark's DDL; times in ms


def _write_csv(table: pa.Table, path: Path) -> None:
    """`table` (dataset's columns) as CSV without header, times as epoch milliseconds."""
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    def ms(name):
        return pc.divide(table.column(name).cast(pa.int64()), MS)

    out = pa.table({"user_id": table.column("user_id"), "amount": table.column("amount"),
                    "event_ms": ms("event_time"), "arrival_ms": ms("arrival_time")})
    tmp = path.with_name("." + path.name + ".tmp")  # hidden: neither Spark nor Flink lists it
    pcsv.write_csv(out, tmp, pcsv.WriteOptions(include_header=False))
    tmp.rename(path)


def csv_dataset(rows: int, *, seed: int = 7) -> Path:
    """dataset(rows) as one CSV file (`CSV_COLUMNS`), rows in arrival order; written on first use."""
    path = DATA / f"events-v{VERSION}-{rows}-s{seed}.csv"
    if not path.exists():
        _write_csv(pq.read_table(dataset(rows, seed=seed)), path)
    return path


def csv_stream_files(rows: int, files: int, *, seed: int = 7) -> Path:
    """stream_files(rows, files) as CSV (`CSV_COLUMNS`): a folder of `files` files in arrival order,
    modification times increasing with the file number (the order a file stream reads them in)."""
    where = DATA / f"stream-v{VERSION}-{rows}-s{seed}-{files}-csv"
    if not (where / "_COMPLETE").exists():
        where.mkdir(parents=True, exist_ok=True)
        for i, part in enumerate(sorted(stream_files(rows, files, seed=seed).glob("part-*.parquet"))):
            target = where / f"part-{i:04d}.csv"
            _write_csv(pq.read_table(part), target)
            os.utime(target, (1_600_000_000 + i, 1_600_000_000 + i))
        (where / "_COMPLETE").write_text("")
    return where
