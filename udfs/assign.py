"""Window assignment as pandas UDF bodies: the windows each timestamp belongs to.

`sqlflow.register(spark)` wraps these as Spark pandas UDFs (sqlflow/spark/windowfns.py); they run
on Python workers, so they import only the engine's window functions, numpy and pandas.

Timestamps reach a pandas UDF as naive wall-clock times of the session time zone; windows are
aligned on UTC microseconds since the epoch, as Spark's `window()` and sqlflow's engine do.

>>> import pandas as pd
>>> from sqlflow import ast
>>> from sqlflow.engine.windows import window_fn
>>> fn = window_fn(ast.Sliding(ast.Duration(600_000_000), ast.Duration(300_000_000)))
>>> ts = pd.Series(pd.to_datetime(["2024-01-01 00:07:00", None]))
>>> out = windows_of(fn, ts, "UTC")
>>> [(w["start"].strftime("%H:%M"), w["end"].strftime("%H:%M")) for w in out[0]], out[1]
([('00:00', '00:10'), ('00:05', '00:15')], None)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sqlflow.udfs.worker_gc import freeze_imports


def to_micros(ts: pd.Series, tz: str) -> tuple[np.ndarray, np.ndarray]:
    """(UTC microseconds, valid mask) of a Series of naive session-local timestamps."""
    valid = ts.notna().to_numpy()
    values = pd.to_datetime(ts[valid])
    if values.dt.tz is None:
        values = values.dt.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward")
    micros = (values.dt.tz_convert("UTC") - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(microseconds=1)
    return micros.to_numpy(np.int64), valid


def from_micros(micros: np.ndarray, tz: str) -> pd.DatetimeIndex:
    """Naive session-local timestamps of UTC microseconds (what PySpark expects back)."""
    return pd.to_datetime(micros, unit="us", utc=True).tz_convert(tz).tz_localize(None)


def windows_of(fn, ts: pd.Series, tz: str) -> pd.Series:
    """For each timestamp, the list of its windows as {"start", "end"} (None for a NULL time)."""
    freeze_imports()
    micros, valid = to_micros(ts, tz)
    out = np.full(len(ts), None, dtype=object)
    if len(micros):
        row, start, end = fn.assign(micros)
        starts, ends = from_micros(np.asarray(start), tz), from_micros(np.asarray(end), tz)
        where = np.flatnonzero(valid)
        lists: list[list] = [[] for _ in range(len(micros))]
        for r, s, e in zip(np.asarray(row).tolist(), starts, ends):
            lists[r].append({"start": s, "end": e})
        for i, windows in zip(where.tolist(), lists):
            out[i] = windows
    return pd.Series(out, index=ts.index)


def duration_micros(value) -> int:
    """A duration argument: '5m' (sqlflow's form), '5 minutes' (Spark's), or an interval value."""
    from sqlflow.time import INTERVAL_UNITS, parse_duration

    if isinstance(value, (pd.Timedelta, np.timedelta64)):
        return int(pd.Timedelta(value) // pd.Timedelta(microseconds=1))
    if hasattr(value, "total_seconds"):
        return int(round(value.total_seconds() * 1_000_000))
    text = str(value).strip()
    try:
        return parse_duration(text)
    except ValueError:
        pass
    parts = text.lower().split()
    if len(parts) % 2 == 0 and parts:
        total = 0
        for number, unit in zip(parts[::2], parts[1::2]):
            size = INTERVAL_UNITS.get(unit.rstrip("s")) or INTERVAL_UNITS.get(unit)
            if size is None:
                break
            total += int(float(number) * size)
        else:
            return total
    raise ValueError(f"not a duration: {value!r} (write '5m', '5 minutes' or an INTERVAL)")


def constant(series: pd.Series, what: str):
    """The single value of a literal argument column."""
    values = series.dropna().unique()
    if len(values) != 1:
        raise ValueError(f"{what} must be one literal value for the whole query")
    value = values[0]
    return value.item() if isinstance(value, np.generic) else value
