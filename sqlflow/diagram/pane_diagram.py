"""One diagram of panes, drawn the way the Dataflow paper draws them (docs/interfaces.md).

Event time runs across, processing time runs up. Each pane is a rectangle spanning its window in
event time and rising to the processing time it was emitted at (from the previous pane of the
same window, or of the windows a session grew from, or from the bottom), labelled with its value.
A retraction is a hatched rectangle over the time the withdrawn value was current, labelled with a
minus sign. Input rows are points at (event time, arrival time) labelled with their values; the
watermark is the line of `(W(p), p)`. Labels are placed by `labels.place`, so that none collide.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .frames import PANE_COLUMNS, Points, days, fmt_value
from .labels import Label, artist_boxes, box_places, marker_boxes, place, point_places

_TIMING_STYLE: dict[str, Any] = {"EARLY": ":", "ON_TIME": "-", "LATE": "--"}
#: area of an input point, in points^2 (matplotlib's scatter `s`)
INPUT_SIZE = 22
#: above this many input points (a later stage's input: every key's panes), they are drawn small
#: and grey, so that they read as a cloud and the panes' values stand out
MANY_INPUTS = 150
INPUT_SIZE_MANY = 6
#: points of space kept between a label and a point of such a cloud (a point's own value sits
#: right next to it, so a few points keep none)
POINT_MARGIN = 2.0
#: the opacity of a pane's fill (its edge is opaque)
PANE_ALPHA = 0.28
#: label ranks: the values a window ends with first, input values last
FINAL, PANE, RETRACTION, INPUT = range(4)


@dataclass
class Diagram:
    """The panes of one or more keys, in emission order, with their times as date numbers."""

    panes: pd.DataFrame
    value: str | None
    keys: list[str]
    start: np.ndarray
    end: np.ndarray
    emit: np.ndarray
    retraction: np.ndarray
    input_size: float = INPUT_SIZE

    @staticmethod
    def build(panes: pd.DataFrame, *, value: str | None, keys: list[str]) -> "Diagram":
        emit = days(panes["emit_time"]) if "emit_time" in panes else np.full(len(panes), np.nan)
        retraction = (panes["is_retraction"].fillna(False).astype(bool).to_numpy()
                      if "is_retraction" in panes else np.zeros(len(panes), bool))
        # emission order (docs/semantics.md, 4): by emit time (bounded panes last); within an
        # instant retractions first, then by window; a window's bounded panes by pane index
        start, end = days(panes["window_start"]), days(panes["window_end"])
        index = panes["pane_index"].to_numpy() if "pane_index" in panes else np.zeros(len(panes))
        order = np.lexsort((index, np.nan_to_num(end, nan=np.inf), np.nan_to_num(start, nan=-np.inf),
                            ~retraction, np.where(np.isnan(emit), np.inf, emit)))
        panes = panes.iloc[order].reset_index(drop=True)
        return Diagram(panes, value, keys, start[order], end[order], emit[order], retraction[order])

    def key_of(self, i: int) -> tuple:
        return tuple(self.panes.at[i, k] for k in self.keys)

    def draw(self, ax, points: Points | None, steps, *, colours: dict | None = None, limits: tuple | None = None,
             watermark: tuple[str, str] = ("tab:green", "watermark"), input_label: str = "input",
             legend_in_axes: bool = False) -> None:
        """Draw the shapes into `ax` and prepare the labels (`place_labels`, once the layout is
        settled); `colours`: key -> colour (several keys in one Axes, with a legend); `limits`:
        (x_lo, x_hi, y_lo, y_hi) instead of the extent of what is drawn (stages sharing their axes);
        `watermark`: the watermark line's colour and legend; `input_label`: the input points' legend;
        `legend_in_axes`: draw the legend (`self.handles`) in `ax`, else the figure draws one legend
        for all its Axes, outside them (`legend.py`)."""
        import matplotlib.dates as mdates
        from matplotlib.colors import to_rgba
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
        x_lo, x_hi = _extent(np.concatenate(xs), pad_min=1 / 1440)
        has_time = any(np.isfinite(y).any() for y in ys)
        y_lo, y_hi = _extent(np.concatenate(ys), pad_min=1 / 1440) if has_time else (0.0, 1.0)
        if limits is not None:
            x_lo, x_hi, y_lo, y_hi = limits
            has_time = True
        bounded = np.isnan(self.emit)
        span = y_hi - y_lo
        after = (y_hi + 0.06 * span) if has_time else y_lo + 0.8 * span
        band = 0.1 * span  # bounded panes of one window share the band above "after all input"

        # ---- panes
        keys = [self.key_of(i) for i in range(len(self.panes))]
        colour = colours or {}
        last_top: dict[tuple, float] = {}     # (key, window) -> top of its last pane
        tops: dict[tuple, list] = {}          # key -> [(start, end, top)] of its panes so far
        pane_top: dict[tuple, float] = {}     # (key, window, pane_index) -> top of that pane
        bounded_seen: dict[tuple, int] = {}
        n_bounded: dict[tuple, int] = {}
        windows = [(k, _bound(s), _bound(e)) for k, s, e in zip(keys, self.start, self.end)]
        for window, b in zip(windows, bounded):
            if b:
                n_bounded[window] = n_bounded.get(window, 0) + 1
        final = self._final(windows)
        labels: list[Label] = []
        top = after
        n = len(self.panes)
        for i in range(n):
            x0, x1 = self.start[i], self.end[i]
            x0 = x_lo if not np.isfinite(x0) else x0   # GLOBAL (NULL) or -inf bounds
            x1 = x_hi if not np.isfinite(x1) else x1
            window = windows[i]
            index = int(self.panes.at[i, "pane_index"]) if "pane_index" in self.panes else i
            if bounded[i]:
                k = bounded_seen.get(window, 0)
                bounded_seen[window] = k + 1
                y1 = after + band * k / max(n_bounded.get(window, 1), 1)
            else:
                y1 = self.emit[i]
            top = max(top, y1)
            c = colour.get(keys[i], "C0")
            timing = str(self.panes.at[i, "pane_timing"]) if "pane_timing" in self.panes else "ON_TIME"
            value = fmt_value(self.panes.at[i, self.value]) if self.value is not None else ""
            if self.retraction[i]:
                y0 = pane_top.get((window, index), last_top.get(window, y_lo))
                height = max(y1 - y0, 0.004 * span)
                rect = Rectangle((x0, y0), x1 - x0, height, facecolor="none", edgecolor=c,
                                 hatch="///", linewidth=1.0, linestyle="-", zorder=3)
                rect.set_gid("retraction")
                text, gid, rank = "\u2212" + value, "retraction-label", (RETRACTION, -i)
            else:
                # on top of the last pane of this window, or of a window it grew from (a
                # session that grew or merged contains the windows it replaces)
                lo = -np.inf if np.isnan(self.start[i]) else self.start[i]
                hi = np.inf if np.isnan(self.end[i]) else self.end[i]
                below = [t for s_, e_, t in tops.get(keys[i], []) if s_ >= lo and e_ <= hi]
                y0 = max(below) if below else y_lo
                height = max(y1 - y0, 0.004 * span)
                # above the retractions' hatching (zorder 3): a pane that replaces retracted ones
                # covers the same span of processing time, and its edge says its timing
                rect = Rectangle((x0, y0), x1 - x0, height, facecolor=to_rgba(c, PANE_ALPHA), edgecolor=c,
                                 linewidth=1.4, linestyle=_TIMING_STYLE.get(timing, "-"), zorder=3.5)
                rect.set_gid("pane")
                last_top[window] = y1
                tops.setdefault(keys[i], []).append((lo, hi, y1))
                pane_top[(window, index)] = y1
                text, gid = value, "pane-label"
                rank = (FINAL, i) if i in final else (PANE, -i)
            ax.add_patch(rect)
            if text:
                # a value at the top of its pane; a retraction in the middle of its hatching (its
                # replacement, emitted at the same instant, is labelled at the top)
                style = {"fontsize": 9, "fontweight": "bold", "zorder": 5,
                         "color": "darkred" if self.retraction[i] else "black"}
                labels.append(Label(text, gid, rank, box_places(x0, x1, y0, y0 + height,
                                                                middle_first=bool(self.retraction[i])), style))

        obstacles = []
        if bounded.any():
            line = ax.axhline(after, color="grey", linewidth=0.8, linestyle="--", zorder=1)
            line.set_gid("after-all-input")
            note = ax.text(x_hi, after, " after all input", ha="right", va="bottom", fontsize=8, color="grey")
            note.set_gid("after-all-input-label")
            obstacles.append(note)

        # ---- inputs
        px = py = np.empty(0)
        if points is not None and len(points.event):
            py = points.arrival if points.arrival is not None else np.full(len(points.event), y_lo + 0.02 * span)
            ok = np.isfinite(points.event) & np.isfinite(py)
            px, py = points.event[ok], py[ok]
            self.input_size = INPUT_SIZE if len(px) <= MANY_INPUTS else INPUT_SIZE_MANY
            ax.scatter(px, py, s=self.input_size, color="black" if len(px) <= MANY_INPUTS else "0.45",
                       linewidths=0, zorder=6, label=input_label, gid="inputs")
            for j, (xv, yv, lab) in enumerate(zip(px, py, np.asarray(points.labels, dtype=object)[ok])):
                if lab:
                    labels.append(Label(str(lab), "input-label", (INPUT, j), point_places(xv, yv),
                                        {"fontsize": 8, "zorder": 6}))

        # ---- watermark: (W(p), p) as a step line
        if steps is not None and len(steps[0]):
            wx, wy = _watermark_line(steps, x_lo, x_hi, top if bounded.any() else y_hi)
            ax.plot(wx, wy, color=watermark[0], linestyle="--", linewidth=1.5, zorder=4, label=watermark[1],
                    gid="watermark")

        # ---- axes
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, (top + 0.04 * span) if bounded.any() else y_hi)
        ax.set_xlabel("event time")
        # as many ticks as their labels have room for (a time like 12:01 takes ~0.42 inch)
        box = ax.get_position()
        wide, high = box.width * ax.figure.get_figwidth(), box.height * ax.figure.get_figheight()
        locator = mdates.AutoDateLocator(minticks=3, maxticks=max(3, int(wide / 0.5)))
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        if has_time:
            ylocator = mdates.AutoDateLocator(minticks=3, maxticks=max(3, int(high / 0.35)))
            ax.yaxis.set_major_locator(ylocator)
            ax.yaxis.set_major_formatter(mdates.ConciseDateFormatter(ylocator))
            ax.set_ylabel("processing time")
        else:
            ax.set_yticks([])
            ax.set_ylabel("processing time (bounded data: panes after all input)")
        line_handles, _ = ax.get_legend_handles_labels()
        self.handles = line_handles + self._encodings(colour)
        if legend_in_axes and self.handles:
            obstacles.append(ax.legend(handles=self.handles, loc="best", fontsize=8))
        ax.grid(True, linewidth=0.3, alpha=0.5)
        self.labels, self.obstacles, self.points = labels, obstacles, (px, py)

    def _encodings(self, colour: dict) -> list:
        """Legend entries for what the boxes encode: a pane's timing by its edge (EARLY dotted,
        ON_TIME solid, LATE dashed), a retraction by hatching, and with several keys in one
        Axes, each key's colour."""
        from matplotlib.colors import to_rgba
        from matplotlib.patches import Patch

        shade = "C0" if len(colour) <= 1 else "0.5"
        timings = set(self.panes["pane_timing"].astype(str)[~self.retraction]) if "pane_timing" in self.panes \
            else {"ON_TIME"}
        out = [Patch(facecolor=to_rgba(shade, PANE_ALPHA), edgecolor=shade, linestyle=style, linewidth=1.4,
                     label=f"{timing} pane: its value at the top")
               for timing, style in _TIMING_STYLE.items() if timing in timings]
        if self.retraction.any():
            out.append(Patch(facecolor="none", edgecolor=shade, hatch="///", linewidth=1.0,
                             label="retraction of an earlier pane (\u2212value)"))
        if len(colour) > 1:
            out += [Patch(facecolor=to_rgba(c, PANE_ALPHA), edgecolor=c, label=", ".join(map(str, k)))
                    for k, c in colour.items()]
        return out

    def place_labels(self, ax) -> int:
        """Place the labels once the figure's layout is settled; the number left out."""
        from .labels import renderer_of

        renderer = renderer_of(ax.figure)
        obstacles = np.vstack([artist_boxes(self.obstacles, renderer),
                               marker_boxes(ax, *self.points, self.input_size,
                                            margin=POINT_MARGIN if self.input_size < INPUT_SIZE else 0.0)])
        return place(ax, self.labels, obstacles)

    def _final(self, windows: list[tuple]) -> set[int]:
        """The panes whose values stand at the end: the last pane of each window, unless a later
        retraction withdraws it (a session merged into another)."""
        last: dict[tuple, int] = {}
        withdrawn = set()
        for i, window in enumerate(windows):
            if self.retraction[i]:
                withdrawn.add(window)
            else:
                last[window] = i
                withdrawn.discard(window)
        return {i for w, i in last.items() if w not in withdrawn}


def columns_of(panes: pd.DataFrame, *, value: str | None, key) -> tuple[str | None, list[str]]:
    """The value labelling each pane and the key columns: given, or the first numeric column that
    is neither a pane column nor a key (the query's first aggregate, as a rule), and the
    non-numeric columns that are not pane columns."""
    from ..errors import SqlflowError
    from .frames import is_number

    others = [c for c in panes.columns if c not in PANE_COLUMNS]
    if key is None:
        keys = [c for c in others if c != value and not is_number(panes[c])]
    else:
        keys = [key] if isinstance(key, str) else list(key)
        missing = [k for k in keys if k not in panes.columns]
        if missing:
            raise SqlflowError(f"the panes have no column {missing[0]!r} to group them by", clause="PLOT")
    if value is None:
        numeric = [c for c in others if c not in keys and is_number(panes[c])]
        value = numeric[0] if numeric else None
    elif value not in panes.columns:
        raise SqlflowError(f"the panes have no column {value!r} to label them with", clause="PLOT")
    return value, keys


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


def extent(values: np.ndarray) -> tuple[float, float]:
    """The range drawn for these date numbers (their finite ones, padded)."""
    return _extent(values, pad_min=1 / 1440)


def watermark_line(steps, x_lo, x_hi, y_top):
    return _watermark_line(steps, x_lo, x_hi, y_top)


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
