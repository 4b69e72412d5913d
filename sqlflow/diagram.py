"""Pane diagrams, drawn the way the Dataflow paper draws them.

Event time runs across, processing time runs up. Each pane is a rectangle spanning its window in
event time and rising to the processing time it was emitted at (from the previous pane of the same
window, or from the bottom), labelled with its value. A retraction is a hatched rectangle over the
time the withdrawn value was current, labelled with a minus sign. Input rows are points at (event
time, arrival time) labelled with their values; the watermark is the line of `(W(p), p)`.

Bounded panes (no `emit_time`: bounded data without arrival times) rise to a line marked
"after all input" above everything else. GLOBAL windows (NULL bounds) span the plotted event-time
range. The edge of a pane says its timing: dotted EARLY, solid ON_TIME, dashed LATE.

Times may be int64 microseconds (the engine's output) or timestamps (the Spark paths' output).

>>> import pandas as pd
>>> panes = pd.DataFrame({"k": ["a", "a"], "total": [5, 12],
...     "window_start": [0, 0], "window_end": [120_000_000, 120_000_000],
...     "pane_index": [0, 1], "pane_timing": ["EARLY", "ON_TIME"], "is_last": [False, True],
...     "emit_time": [300_000_000, 360_000_000]})
>>> ax = plot(panes, title="two panes")
>>> [t.get_text() for t in ax.texts if t.get_gid() == "pane-label"]
['5', '12']
>>> import matplotlib.pyplot as plt; plt.close(ax.figure)

matplotlib is an optional dependency (`pip install ".[plot]"` in a checkout, or `pip install matplotlib`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import SqlflowError

#: columns every pane row carries besides the keys and the aggregates
PANE_COLUMNS = ("window_start", "window_end", "pane_index", "pane_timing", "is_last", "emit_time",
                "is_retraction")

#: at most this many panes (and input rows) are collected from a Spark DataFrame
DEFAULT_LIMIT = 2000

_EVENT_NAMES = ("event_time", "__sqlflow_et", "ts", "et", "time", "timestamp")
_ARRIVAL_NAMES = ("arrival_time", "__sqlflow_at", "arrived_at", "arrival", "proc_time", "at")
_TIMING_STYLE = {"EARLY": ":", "ON_TIME": "-", "LATE": "--"}
_NEG_INF = -(2**63)
_POS_INF = 2**63 - 1
_US_PER_DAY = 86_400_000_000


def plot(result: Any, *, inputs: Any = None, watermark: Any = None, ax: Any = None,
         title: str | None = None, path: str | None = None, value: str | None = None,
         key: str | list[str] | None = None, event_time: str | None = None,
         arrival_time: str | None = None, input_value: str | None = None,
         limit: int = DEFAULT_LIMIT):
    """Draw the panes of `result` and return the matplotlib Axes.

    - `result`: panes as a pandas DataFrame, a Spark DataFrame (at most `limit` rows are
      collected) or an engine result (its `.panes`).
    - `inputs`: optional input rows (pandas or Spark) with an event-time column, an arrival-time
      column and a value; their names are guessed (`event_time`/`ts`, `arrival_time`/`arrived_at`,
      the last numeric column) unless given as `event_time=`, `arrival_time=`, `input_value=`.
    - `watermark`: optional steps: a DataFrame with `proc_time` and `watermark` columns (or its
      first two columns), a list of `(proc_time, watermark)` pairs, or an engine `Timeline`.
    - `value`: the aggregate that labels each pane (default: the last numeric column that is not
      a pane column); `key`: the grouping columns, one colour each (default: the non-numeric
      columns that are not pane columns).
    - `ax`: draw into these Axes; `title`; `path`: also save the figure there (PNG by suffix).
    """
    plt = _pyplot()
    panes = _panes_frame(result, limit)
    diagram = _Diagram.build(panes, value=value, key=key)
    points = _input_points(inputs, limit, event_time, arrival_time, input_value)
    steps = _watermark_steps(watermark)

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5.5))
    diagram.draw(ax, points, steps)
    if title:
        ax.set_title(title)
    if path is not None:
        ax.figure.savefig(path, dpi=120, bbox_inches="tight")
    return ax


# --------------------------------------------------------------------------- inputs to arrays


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "sqlflow.plot needs matplotlib: pip install matplotlib (the project's [plot] extra)"
        ) from None
    return plt


def _to_pandas(frame: Any, limit: int, what: str) -> pd.DataFrame:
    if frame is None:
        return None
    if hasattr(frame, "panes") and isinstance(frame.panes, pd.DataFrame):
        return frame.panes  # an engine result
    if isinstance(frame, pd.DataFrame):
        return frame
    if hasattr(frame, "toPandas") and hasattr(frame, "limit"):  # a Spark DataFrame
        if getattr(frame, "isStreaming", False):
            raise SqlflowError(f"cannot plot a streaming DataFrame as {what}: write it to a memory "
                               "sink and plot that table (spark.table(name))", clause="PLOT")
        return frame.limit(limit).toPandas()
    if isinstance(frame, (list, tuple)):
        return pd.DataFrame(frame)
    raise TypeError(f"{what}: expected a pandas or Spark DataFrame, got {type(frame).__name__}")


def _panes_frame(result: Any, limit: int) -> pd.DataFrame:
    panes = _to_pandas(result, limit, "panes")
    missing = [c for c in ("window_start", "window_end") if c not in panes.columns]
    if missing:
        raise SqlflowError(f"these rows are not panes: no {', '.join(missing)} column "
                           "(plot the result of a windowed query)", clause="PLOT")
    return panes.reset_index(drop=True)


def _days(values: Any) -> np.ndarray:
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
    return _days(converted)


@dataclass
class _Points:
    event: np.ndarray
    arrival: np.ndarray | None
    labels: list[str]


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


def _input_points(inputs, limit, event_time, arrival_time, input_value) -> _Points | None:
    frame = _to_pandas(inputs, limit, "inputs")
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
        numeric = [c for c in frame.columns if c not in (et, at) and _is_number(frame[c])]
        input_value = numeric[-1] if numeric else None
    labels = [_fmt_value(v) for v in frame[input_value]] if input_value is not None else [""] * len(frame)
    return _Points(_days(frame[et]), _days(frame[at]) if at is not None else None, labels)


def _watermark_steps(watermark) -> tuple[np.ndarray, np.ndarray] | None:
    """(processing times, watermarks) as date numbers, sorted by processing time."""
    if watermark is None:
        return None
    if hasattr(watermark, "times") and hasattr(watermark, "values") and not isinstance(watermark, pd.DataFrame):
        proc, wm = np.asarray(watermark.times), np.asarray(watermark.values)  # an engine Timeline
    else:
        frame = _to_pandas(watermark, DEFAULT_LIMIT, "watermark")
        if {"proc_time", "watermark"} <= set(frame.columns):
            proc, wm = frame["proc_time"], frame["watermark"]
        else:
            proc, wm = frame.iloc[:, 0], frame.iloc[:, 1]
    p, w = _days(proc), _days(wm)
    w = np.where(np.isnan(w), np.inf, w)  # a NULL watermark means +inf (docs/semantics.md 1.2)
    order = np.argsort(p, kind="stable")
    return p[order], w[order]


def _is_number(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def _fmt_value(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "NULL"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):g}"
    return str(v)


# --------------------------------------------------------------------------- the diagram


@dataclass
class _Diagram:
    panes: pd.DataFrame
    value: str | None
    keys: list[str]
    start: np.ndarray
    end: np.ndarray
    emit: np.ndarray
    retraction: np.ndarray

    @staticmethod
    def build(panes: pd.DataFrame, *, value, key) -> "_Diagram":
        others = [c for c in panes.columns if c not in PANE_COLUMNS]
        if value is None:
            numeric = [c for c in others if _is_number(panes[c])]
            value = numeric[-1] if numeric else None
        elif value not in panes.columns:
            raise SqlflowError(f"the panes have no column {value!r} to label them with", clause="PLOT")
        if key is None:
            keys = [c for c in others if c != value and not _is_number(panes[c])]
        else:
            keys = [key] if isinstance(key, str) else list(key)
        emit = _days(panes["emit_time"]) if "emit_time" in panes else np.full(len(panes), np.nan)
        retraction = (panes["is_retraction"].fillna(False).astype(bool).to_numpy()
                      if "is_retraction" in panes else np.zeros(len(panes), bool))
        # emission order (docs/semantics.md, 4): by emit time (bounded panes last); within an
        # instant retractions first, then by window; a window's bounded panes by pane index
        start, end = _days(panes["window_start"]), _days(panes["window_end"])
        index = panes["pane_index"].to_numpy() if "pane_index" in panes else np.zeros(len(panes))
        order = np.lexsort((index, np.nan_to_num(end, nan=np.inf), np.nan_to_num(start, nan=-np.inf),
                            ~retraction, np.where(np.isnan(emit), np.inf, emit)))
        panes = panes.iloc[order].reset_index(drop=True)
        return _Diagram(panes, value, keys, start[order], end[order], emit[order], retraction[order])

    def _key_of(self, i: int) -> tuple:
        return tuple(self.panes.at[i, k] for k in self.keys)

    def draw(self, ax, points: _Points | None, steps) -> None:
        import matplotlib.dates as mdates
        from matplotlib.patches import Rectangle

        # ---- extent of event time (x) and processing time (y)
        xs = [self.start, self.end]
        ys = [self.emit]
        if points is not None:
            xs.append(points.event)
            if points.arrival is not None:
                ys.append(points.arrival)
        if steps is not None:
            ys.append(steps[0])
            xs.append(steps[1])
        x_lo, x_hi = _extent(np.concatenate(xs) if xs else np.empty(0), pad_min=1 / 1440)
        has_time = any(np.isfinite(y).any() for y in ys)
        if has_time:
            y_lo, y_hi = _extent(np.concatenate(ys), pad_min=1 / 1440)
        else:
            y_lo, y_hi = 0.0, 1.0
        bounded = np.isnan(self.emit)
        span = y_hi - y_lo
        after = (y_hi + 0.06 * span) if has_time else y_lo + 0.8 * span
        band = 0.1 * span  # bounded panes of one window share the band above "after all input"

        # ---- panes
        keys = [self._key_of(i) for i in range(len(self.panes))]
        palette = {k: f"C{n % 10}" for n, k in enumerate(dict.fromkeys(keys))}
        last_top: dict[tuple, float] = {}     # (key, window) -> top of its last pane
        tops: dict[tuple, list] = {}          # key -> [(start, end, top)] of its panes so far
        pane_top: dict[tuple, float] = {}     # (key, window, pane_index) -> top of that pane
        bounded_seen: dict[tuple, int] = {}
        n_bounded: dict[tuple, int] = {}
        for k, s, e, b in zip(keys, self.start, self.end, bounded):
            if b:
                n_bounded[(k, _bound(s), _bound(e))] = n_bounded.get((k, _bound(s), _bound(e)), 0) + 1
        top = after
        for i in range(len(self.panes)):
            x0, x1 = self.start[i], self.end[i]
            x0 = x_lo if not np.isfinite(x0) else x0   # GLOBAL (NULL) or -inf bounds
            x1 = x_hi if not np.isfinite(x1) else x1
            window = (keys[i], _bound(self.start[i]), _bound(self.end[i]))
            index = int(self.panes.at[i, "pane_index"]) if "pane_index" in self.panes else i
            if bounded[i]:
                k = bounded_seen.get(window, 0)
                bounded_seen[window] = k + 1
                y1 = after + band * k / max(n_bounded.get(window, 1), 1)
            else:
                y1 = self.emit[i]
            top = max(top, y1)
            color = palette[keys[i]]
            timing = str(self.panes.at[i, "pane_timing"]) if "pane_timing" in self.panes else "ON_TIME"
            label = _fmt_value(self.panes.at[i, self.value]) if self.value is not None else ""
            if self.retraction[i]:
                y0 = pane_top.get((window, index), last_top.get(window, y_lo))
                height = max(y1 - y0, 0.004 * span)
                rect = Rectangle((x0, y0), x1 - x0, height, facecolor="none", edgecolor=color,
                                 hatch="///", linewidth=1.2, linestyle="-", zorder=3)
                rect.set_gid("retraction")
                text = "\u2212" + label if label else "\u2212"
            else:
                # on top of the last pane of this window, or of a window it grew from (a
                # session that grew or merged contains the windows it replaces)
                lo = -np.inf if np.isnan(self.start[i]) else self.start[i]
                hi = np.inf if np.isnan(self.end[i]) else self.end[i]
                below = [t for s_, e_, t in tops.get(keys[i], []) if s_ >= lo and e_ <= hi]
                y0 = max(below) if below else y_lo
                height = max(y1 - y0, 0.004 * span)
                rect = Rectangle((x0, y0), x1 - x0, height, facecolor=color, alpha=0.28,
                                 edgecolor=color, linewidth=1.4, linestyle=_TIMING_STYLE.get(timing, "-"),
                                 zorder=2)
                rect.set_gid("pane")
                last_top[window] = y1
                tops.setdefault(keys[i], []).append((lo, hi, y1))
                pane_top[(window, index)] = y1
                text = label
            ax.add_patch(rect)
            # a value at the top of its pane; a retraction in the middle of its hatching (its
            # replacement, emitted at the same instant, is labelled at the top)
            ty, va = (y0 + height / 2, "center") if self.retraction[i] else (y0 + height, "top")
            t = ax.text((x0 + x1) / 2, ty, text, ha="center", va=va, fontsize=9,
                        color="darkred" if self.retraction[i] else "black", zorder=5,
                        fontweight="bold")
            t.set_gid("retraction-label" if self.retraction[i] else "pane-label")

        if bounded.any():
            line = ax.axhline(after, color="grey", linewidth=0.8, linestyle="--", zorder=1)
            line.set_gid("after-all-input")
            ax.text(x_hi, after, " after all input", ha="right", va="bottom", fontsize=8, color="grey")

        # ---- inputs
        if points is not None and len(points.event):
            py = points.arrival if points.arrival is not None else np.full(len(points.event), y_lo + 0.02 * span)
            ok = np.isfinite(points.event) & np.isfinite(py)
            ax.scatter(points.event[ok], py[ok], s=22, color="black", zorder=6, label="input", gid="inputs")
            for xv, yv, lab in zip(points.event[ok], py[ok], np.asarray(points.labels, dtype=object)[ok]):
                t = ax.annotate(lab, (xv, yv), xytext=(4, 2), textcoords="offset points", fontsize=8, zorder=6)
                t.set_gid("input-label")

        # ---- watermark: (W(p), p) as a step line
        if steps is not None and len(steps[0]):
            wx, wy = _watermark_line(steps, x_lo, x_hi, top if bounded.any() else y_hi)
            ax.plot(wx, wy, color="tab:green", linestyle="--", linewidth=1.5, zorder=4, label="watermark",
                    gid="watermark")

        # ---- axes
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, (top + 0.04 * span) if bounded.any() else y_hi)
        ax.set_xlabel("event time")
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        if has_time:
            ylocator = mdates.AutoDateLocator()
            ax.yaxis.set_major_locator(ylocator)
            ax.yaxis.set_major_formatter(mdates.ConciseDateFormatter(ylocator))
            ax.set_ylabel("processing time")
        else:
            ax.set_yticks([])
            ax.set_ylabel("processing time (bounded data: panes after all input)")
        handles = []
        if len(palette) > 1 and self.keys:
            from matplotlib.patches import Patch

            handles = [Patch(facecolor=c, alpha=0.4, label=", ".join(map(str, k))) for k, c in palette.items()]
        line_handles, _ = ax.get_legend_handles_labels()
        if handles or line_handles:
            ax.legend(handles=line_handles + handles, loc="upper left", fontsize=8)
        ax.grid(True, linewidth=0.3, alpha=0.5)


def _bound(x: float) -> float | None:
    """A window bound usable as a dict key (NaN, a GLOBAL window's bound, never equals itself)."""
    return None if np.isnan(x) else float(x)


def _extent(values: np.ndarray, pad_min: float) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        # nothing finite to place: an arbitrary hour around the epoch
        import matplotlib.dates as mdates

        lo = mdates.date2num(np.datetime64("1970-01-01T00:00:00"))
        return lo, lo + 1 / 24
    lo, hi = float(finite.min()), float(finite.max())
    pad = max((hi - lo) * 0.05, pad_min)
    return lo - pad, hi + pad


def _watermark_line(steps, x_lo, x_hi, y_top):
    """Points of the watermark curve: W stays put between steps (vertical), jumps at a step."""
    proc, wm = steps
    wm = np.clip(wm, x_lo, x_hi)
    xs, ys = [], []
    for i, (p, w) in enumerate(zip(proc, wm)):
        if i > 0:
            xs.append(wm[i - 1])
            ys.append(p)
        xs.append(w)
        ys.append(p)
    xs.append(wm[-1])
    ys.append(max(y_top, proc[-1]))
    return np.asarray(xs), np.asarray(ys)
