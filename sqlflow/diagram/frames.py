"""What `sqlflow.plot` is given, as pandas frames and arrays of matplotlib date numbers.

Panes come as a pandas DataFrame, a Spark DataFrame or an engine result; inputs and watermark
steps as DataFrames (or pairs, or an engine Timeline). Times may be int64 microseconds (the
engine's time) or timestamps (the Spark paths'); they become float days, matplotlib's dates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..columns import (ALL_PANE_COLUMNS, ARRIVAL_TIME, DROPPED_ARRIVAL_TIME, DROPPED_EVENT_TIME, EVENT_TIME,
                       WINDOW_END, WINDOW_START)
from ..errors import SqlflowError

#: columns every pane row carries besides the keys and the aggregates
PANE_COLUMNS = ALL_PANE_COLUMNS

_EVENT_NAMES = (DROPPED_EVENT_TIME, EVENT_TIME, "ts", "et", "time", "timestamp")
_ARRIVAL_NAMES = (DROPPED_ARRIVAL_TIME, ARRIVAL_TIME, "arrived_at", "arrival", "proc_time", "at")
_NEG_INF = -(2**63)
_POS_INF = 2**63 - 1
_US_PER_DAY = 86_400_000_000


def pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "sqlflow.plot needs matplotlib: pip install matplotlib (the project's [plot] extra)"
        ) from None
    return plt


def is_spark(frame: Any) -> bool:
    return hasattr(frame, "toPandas") and hasattr(frame, "limit") and not isinstance(frame, pd.DataFrame)


def to_pandas(frame: Any, limit: int | None, what: str) -> pd.DataFrame:
    """A pandas frame of `frame` (a Spark DataFrame: at most `limit` rows, collected)."""
    if frame is None:
        raise SqlflowError(f"nothing to plot as {what}", clause="PLOT")
    if hasattr(frame, "panes") and isinstance(frame.panes, pd.DataFrame):
        return frame.panes  # an engine result
    if isinstance(frame, pd.DataFrame):
        return frame
    if is_spark(frame):
        check_not_streaming(frame, what)
        return (frame.limit(limit) if limit is not None else frame).toPandas()
    if isinstance(frame, (list, tuple)):
        return pd.DataFrame(frame)
    raise TypeError(f"{what}: expected a pandas or Spark DataFrame, got {type(frame).__name__}")


def check_not_streaming(frame: Any, what: str) -> None:
    if getattr(frame, "isStreaming", False):
        raise SqlflowError(f"cannot plot a streaming DataFrame as {what}: write it to a memory "
                           "sink and plot that table (spark.table(name))", clause="PLOT")


#: the columns a diagram places panes by
WINDOW_COLUMNS = (WINDOW_START, WINDOW_END)


def are_panes(columns) -> bool:
    """Whether rows with these columns can be drawn as panes (a windowed query's result, or rows
    that keep its window columns)."""
    return all(c in columns for c in WINDOW_COLUMNS)


def check_panes(columns) -> None:
    missing = [c for c in WINDOW_COLUMNS if c not in columns]
    if missing:
        raise SqlflowError(f"these rows are not panes: no {', '.join(missing)} column "
                           "(plot the result of a windowed query)", clause="PLOT")


def days(values: Any) -> np.ndarray:
    """Times as matplotlib date numbers (float days); NULL -> nan, int64 infinities -> +-inf.

    Integers are microseconds since the epoch (the engine's time); timestamps are taken as they
    come (Spark gives naive timestamps in the session time zone).
    """
    import matplotlib.dates as mdates

    s = pd.Series(values)
    if s.empty:
        return np.empty(0)
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        if getattr(s.dt, "tz", None) is not None:
            s = s.dt.tz_localize(None)
        out = np.full(len(s), np.nan)
        ok = s.notna().to_numpy()
        out[ok] = mdates.date2num(s[ok].to_numpy())
        return out
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        ok = s.notna().to_numpy()
        micros = np.zeros(len(s), dtype=np.int64)
        micros[ok] = s[ok].astype("int64").to_numpy()
        epoch = mdates.date2num(np.datetime64("1970-01-01T00:00:00"))
        out = epoch + micros / _US_PER_DAY
        out[micros == _NEG_INF] = -np.inf
        out[micros == _POS_INF] = np.inf
        out[~ok] = np.nan
        return out
    # objects: datetimes, strings, None
    converted = pd.to_datetime(s, errors="coerce", utc=False)
    return days(converted)


@dataclass
class Points:
    """Input rows to draw: (event time, arrival time) points labelled with a value."""

    event: np.ndarray
    arrival: np.ndarray | None
    labels: list[str]

    def subset(self, mask: np.ndarray) -> "Points":
        return Points(self.event[mask], self.arrival[mask] if self.arrival is not None else None,
                      [lab for lab, keep in zip(self.labels, mask) if keep])


def _pick(columns, given: str | None, names: tuple[str, ...], what: str) -> str | None:
    if given is not None:
        if given not in columns:
            raise SqlflowError(f"inputs have no column {given!r} ({what})", clause="PLOT")
        return given
    lower = {str(c).lower(): c for c in columns}
    for name in names:
        if name in lower:
            return lower[name]
    return None


def input_points(frame: pd.DataFrame | None, event_time, arrival_time, input_value) -> Points | None:
    """The inputs' points; names are guessed unless given (docs/interfaces.md)."""
    if frame is None:
        return None
    et = _pick(frame.columns, event_time, _EVENT_NAMES, "event time")
    if et is None:
        times = [c for c in frame.columns if pd.api.types.is_datetime64_any_dtype(frame[c].dtype)]
        if not times:
            raise SqlflowError("inputs: which column is the event time? pass event_time='...'",
                               clause="PLOT")
        et = times[0]
    at = _pick(frame.columns, arrival_time, _ARRIVAL_NAMES, "arrival time")
    if input_value is None:
        numeric = [c for c in frame.columns if c not in (et, at) and is_number(frame[c])]
        input_value = numeric[-1] if numeric else None
    labels = [fmt_value(v) for v in frame[input_value]] if input_value is not None else [""] * len(frame)
    return Points(days(frame[et]), days(frame[at]) if at is not None else None, labels)


def watermark_steps(watermark, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(processing times, watermarks) as date numbers, sorted by processing time."""
    if watermark is None:
        return None
    if hasattr(watermark, "times") and hasattr(watermark, "values") and not isinstance(watermark, pd.DataFrame):
        proc, wm = np.asarray(watermark.times), np.asarray(watermark.values)  # an engine Timeline
    else:
        frame = to_pandas(watermark, limit, "watermark")
        if {"proc_time", "watermark"} <= set(frame.columns):
            proc, wm = frame["proc_time"], frame["watermark"]
        else:
            proc, wm = frame.iloc[:, 0], frame.iloc[:, 1]
    p, w = days(proc), days(wm)
    w = np.where(np.isnan(w), np.inf, w)  # a NULL watermark means +inf (docs/semantics.md 1.2)
    order = np.argsort(p, kind="stable")
    return p[order], w[order]


def is_number(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def fmt_value(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "NULL"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):g}"
    return str(v)
