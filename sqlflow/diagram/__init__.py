"""Pane diagrams, drawn the way the Dataflow paper draws them (docs/interfaces.md).

Event time runs across, processing time runs up; each pane is a box over its window rising to
its emit time, labelled with its value; retractions are hatched (`pane_diagram.py`). Bounded panes (no
`emit_time`) rise to a line marked "after all input"; GLOBAL windows span the plotted range.

Many keys get **small multiples**: one diagram per key, at most `max_keys` of them (those with the
most panes, or the ones `select` names), and a note under the figure says what was left out.
Labels never collide (`labels.py`): a label with no free place is left out, and counted in the
note. One legend under the diagrams, outside them, says what the marks encode (`legend.py`).

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

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SqlflowError
from .frames import (PANE_COLUMNS, check_not_streaming, check_panes, input_points, is_spark, pyplot, to_pandas,
                     watermark_steps)
from .legend import add_figure_legend
from .pane_diagram import Diagram, columns_of
from .stages import chain_of, plot_stages

__all__ = ["plot", "PANE_COLUMNS", "DEFAULT_LIMIT", "DEFAULT_MAX_KEYS"]

#: at most this many panes (and input rows) are collected from a Spark DataFrame
DEFAULT_LIMIT = 2000
#: at most this many keys get a diagram each (those with the most panes, unless `select` names them)
DEFAULT_MAX_KEYS = 6
#: a pipeline's first stage draws this many keys in one diagram unless max_keys says otherwise
PIPELINE_MAX_KEYS = 1
#: Spark types that are numbers (a pane's value, never a default key)
_SPARK_NUMBERS = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
#: Spark types that are never default keys: times are aggregates (MIN(ts)) far more often than keys
_SPARK_TIMES = ("timestamp", "timestamp_ntz", "date")
#: keys counted at most, to choose which to draw
_MAX_COUNTED = 100_000


def plot(result: Any, *, inputs: Any = None, watermark: Any = None, ax: Any = None,
         title: str | None = None, path: str | None = None, value: str | None = None,
         key: str | list[str] | None = None, select: Any = None, max_keys: int | None | str = "auto",
         event_time: str | None = None, arrival_time: str | None = None, input_value: str | None = None,
         limit: int = DEFAULT_LIMIT, stages: str = "auto"):
    """Draw the panes of `result` and return the matplotlib Axes (with several keys, the first
    key's; `ax.figure.axes` holds them all).

    - `result`: panes as a pandas DataFrame, a Spark DataFrame (at most `limit` panes are
      collected) or an engine result (its `.panes`).
    - `key`: the grouping columns (default: the columns that are neither pane columns, numbers nor
      times); `select`: the key values to draw (a value, or a list; tuples for several key
      columns); `max_keys`: at most this many keys are drawn (None: all; "auto": 6, one in a
      pipeline's first stage), one diagram each, those with the most panes unless `select` names them.
    - `value`: the aggregate that labels each pane (default: the first number that is not a pane
      column or a key, i.e. the query's first aggregate).
    - `inputs`: optional input rows (pandas or Spark) with an event-time column, an arrival-time
      column and a value; their names are guessed (`event_time`/`ts`, `arrival_time`/`arrived_at`,
      the last numeric column) unless given as `event_time=`, `arrival_time=`, `input_value=`.
      With the key columns, each key's diagram shows its own rows.
    - `watermark`: optional steps: a DataFrame with `proc_time` and `watermark` columns (or its
      first two columns), a list of `(proc_time, watermark)` pairs, or an engine `Timeline`.
    - `ax`: draw into these Axes (the keys drawn share them, a colour each); `title`; `path`:
      also save the figure there (PNG by suffix).
    - `stages`: a `sqlflow.sql` result whose windowed SELECT reads a replayed windowed stage
      (docs/pipelines.md) is drawn as its pipeline: one diagram per stage, side by side on one
      processing-time axis, each stage's holds and output watermark, which the next stage draws as
      its watermark (`stages.py`); `key`, `select`, `max_keys`, `value` and `inputs` then apply
      to the first stage, and the last stage's Axes is returned. "auto" (the default) does so when
      the result is such a pipeline's, "all" requires one, "result" draws only the result's rows.
    """
    if stages not in ("auto", "all", "result"):
        raise SqlflowError(f"stages={stages!r}: expected 'auto', 'all' or 'result'", clause="PLOT")
    chain = _pipeline(result, stages)
    if chain is None and max_keys == "auto":
        max_keys = DEFAULT_MAX_KEYS
    if chain is not None:
        return _plot_pipeline(chain, inputs=inputs, watermark=watermark, ax=ax, title=title,
                              path=path, value=value, key=key, select=select, max_keys=max_keys,
                              event_time=event_time, arrival_time=arrival_time, input_value=input_value,
                              limit=limit)
    plt = pyplot()
    chosen = _choose(result, key=key, value=value, select=select, max_keys=max_keys, limit=limit)
    inputs_frame = _inputs_frame(inputs, chosen, limit)
    steps = watermark_steps(watermark, limit)
    notes = list(chosen.notes)

    if ax is not None:
        colours = {k: f"C{n % 10}" for n, k in enumerate(chosen.shown)} if len(chosen.shown) > 1 else None
        diagram = Diagram.build(chosen.panes, value=chosen.value, keys=chosen.keys)
        diagram.draw(ax, input_points(inputs_frame, event_time, arrival_time, input_value), steps, colours=colours,
                     legend_in_axes=True)
        if title:
            ax.set_title(title)
        hidden = diagram.place_labels(ax)
        _note(ax, notes + _hidden_note(hidden), in_axes=True)
        _save(ax.figure, path)
        return ax

    panels = max(len(chosen.shown), 1)
    cols = 1 if panels == 1 else 2
    rows = math.ceil(panels / cols)
    width, height = (8.0, 5.5) if panels == 1 else (6.4 * cols, 4.2 * rows)
    band = 0.45  # inches under the diagrams for the note
    fig, axes = plt.subplots(rows, cols, figsize=(width, height + band), squeeze=False)
    grid = list(axes.flat)
    for extra in grid[panels:]:
        fig.delaxes(extra)
    diagrams = []
    panels_shown: list[tuple | None] = list(chosen.shown) or [None]
    for n, shown in enumerate(panels_shown):
        here = grid[n]
        panes = chosen.panes if shown is None else chosen.panes[chosen.mask(shown)]
        diagram = Diagram.build(panes.reset_index(drop=True), value=chosen.value, keys=chosen.keys)
        diagram.draw(here, input_points(_for_key(inputs_frame, chosen.keys, shown), event_time, arrival_time,
                                        input_value), steps)
        if shown is not None and (panels > 1 or chosen.picked):
            here.set_title(f"{chosen.describe(shown)} ({len(panes)} pane{'s' if len(panes) != 1 else ''})",
                           fontsize=10)
        diagrams.append(diagram)
    if title and panels == 1 and not chosen.picked:
        grid[0].set_title(title)
    elif title:
        fig.suptitle(title)
    below = band + add_figure_legend(fig, [d.handles for d in diagrams], bottom=band)
    fig.tight_layout(rect=(0, below / fig.get_figheight(), 1, 1))
    hidden = sum(d.place_labels(here) for d, here in zip(diagrams, grid))
    _note(fig, notes + _hidden_note(hidden), in_axes=False)
    _save(fig, path)
    return grid[0]


# --------------------------------------------------------------------------- pipelines


def _pipeline(result, stages: str):
    """The stages to draw side by side (`stages.chain_of`), or None to draw the result's rows."""
    if stages == "result":
        return None
    chain = chain_of(result) if is_spark(result) else None
    if chain is None and stages == "all":
        raise SqlflowError("stages='all' draws a pipeline: this result is not the result of a windowed SELECT "
                           "over a replayed windowed stage", clause="PLOT",
                           hint="plot the DataFrame sqlflow.sql returned for such a query (docs/pipelines.md)")
    return chain


def _plot_pipeline(chain, *, inputs, watermark, ax, title, path, value, key, select, max_keys,
                   event_time, arrival_time, input_value, limit):
    for given, name in ((watermark, "watermark"), (ax, "ax")):
        if given is not None:
            raise SqlflowError(f"{name}= cannot be given for a pipeline: each stage's watermark is its own "
                               "(the first stage's, then each stage's output watermark), one Axes per stage",
                               clause="PLOT", hint="stages='result' draws only the result's rows")

    def choose(panes, n: int) -> _Chosen:
        if n == 0:
            keys = PIPELINE_MAX_KEYS if max_keys == "auto" else max_keys
            return _choose(panes, key=key, value=value, select=select, max_keys=keys, limit=limit)
        return _choose(panes, key=None, value=None, select=None, max_keys=None, limit=limit)

    def first_inputs(chosen: _Chosen):
        frame = _for_keys(_inputs_frame(inputs, chosen, limit), chosen)
        return input_points(frame, event_time, arrival_time, input_value)

    fig, axes, notes = plot_stages(chain, choose=choose, first_inputs=first_inputs, title=title, limit=limit)
    _note(fig, notes, in_axes=False)
    _save(fig, path)
    return axes[-1]


def _for_keys(frame: pd.DataFrame | None, chosen: "_Chosen") -> pd.DataFrame | None:
    """The input rows of the keys shown (all of them when the rows have no key columns)."""
    if frame is None or not chosen.keys or not all(k in frame.columns for k in chosen.keys):
        return frame
    mask = np.zeros(len(frame), bool)
    for shown in chosen.shown:
        one = np.ones(len(frame), bool)
        for k, v in zip(chosen.keys, shown):
            one &= (frame[k].isna() if _is_null(v) else frame[k] == v).to_numpy()
        mask |= one
    return frame[mask]


# --------------------------------------------------------------------------- which panes


@dataclass
class _Chosen:
    """The panes to draw (pandas), their key columns and value, the keys shown, and notes on what
    was left out."""

    panes: pd.DataFrame
    keys: list[str]
    value: str | None
    shown: list[tuple] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    picked: bool = False  # the keys shown are some of those present (chosen, or named by select)

    def mask(self, shown: tuple) -> np.ndarray:
        out = np.ones(len(self.panes), bool)
        for k, v in zip(self.keys, shown):
            column = self.panes[k]
            out &= (column.isna() if _is_null(v) else column == v).to_numpy()
        return out

    def describe(self, shown: tuple) -> str:
        return ", ".join(f"{k} = {v}" for k, v in zip(self.keys, shown))


def _is_null(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT


def _wanted(select) -> list[tuple] | None:
    if select is None:
        return None
    values = select if isinstance(select, (list, set)) else [select]
    return [v if isinstance(v, tuple) else (v,) for v in values]


def _choose(result, *, key, value, select, max_keys, limit) -> _Chosen:
    wanted = _wanted(select)
    if is_spark(result):
        check_not_streaming(result, "panes")
        check_panes(result.columns)
        keys = _spark_keys(result, key)
        df, counted = result, None
        if wanted is not None and keys:
            df = df.where(_spark_any(keys, wanted))
        elif keys and max_keys:
            df, counted = _spark_top_keys(df, keys, max_keys)
        rows = df.limit(limit + 1).toPandas()
        truncated = len(rows) > limit
        chosen = _choose_pandas(rows.head(limit), key=keys, value=value, wanted=wanted,
                                max_keys=max_keys, total=None if wanted is not None or not keys else counted)
        if truncated:
            chosen.notes.append(f"only the first {limit:,} panes were collected (limit={limit})")
        return chosen
    panes = to_pandas(result, None, "panes")
    check_panes(panes.columns)
    return _choose_pandas(panes.reset_index(drop=True), key=key, value=value, wanted=wanted,
                          max_keys=max_keys, total=None)


def _choose_pandas(panes: pd.DataFrame, *, key, value, wanted, max_keys, total) -> _Chosen:
    value, keys = columns_of(panes, value=value, key=key)
    chosen = _Chosen(panes, keys, value)
    if not keys:
        return chosen
    counts = panes.groupby(keys, dropna=False, sort=True).size()
    present = [k if isinstance(k, tuple) else (k,) for k in counts.index]
    n = dict(zip(present, counts.to_numpy()))
    label = keys[0] if len(keys) == 1 else "(" + ", ".join(keys) + ")"
    if wanted is not None:
        missing = [w for w in wanted if not any(_same(w, p) for p in present)]
        if missing:
            some = ", ".join(repr(p[0] if len(p) == 1 else p) for p in present[:5])
            raise SqlflowError(f"no panes for {label} = {missing[0][0] if len(keys) == 1 else missing[0]!r}",
                               clause="PLOT", hint=f"keys present: {some}{', ...' if len(present) > 5 else ''}")
        chosen.shown = [next(p for p in present if _same(w, p)) for w in wanted]
        chosen.picked = True
    else:
        ranked = sorted(present, key=lambda p: -n[p])  # stable: ties in key order
        chosen.shown = ranked[:max_keys] if max_keys else ranked
        known = total if total is not None else len(present)
        chosen.picked = len(chosen.shown) < known
        if chosen.picked:
            more = "more than " if known > _MAX_COUNTED else ""
            chosen.notes.append(f"{len(chosen.shown)} of {more}{min(known, _MAX_COUNTED):,} {label} values drawn, "
                                "those with the most panes (select=[...] picks others, max_keys=None draws all)")
    chosen.panes = panes[np.logical_or.reduce([chosen.mask(s) for s in chosen.shown])].reset_index(drop=True)
    return chosen


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all((_is_null(x) and _is_null(y)) or (not _is_null(x) and x == y)
                                    for x, y in zip(a, b))


def _spark_keys(df, key) -> list[str]:
    if key is not None:
        keys = [key] if isinstance(key, str) else list(key)
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise SqlflowError(f"the panes have no column {missing[0]!r} to group them by", clause="PLOT")
        return keys
    return [name for name, dtype in df.dtypes if name not in PANE_COLUMNS
            and not dtype.startswith(_SPARK_NUMBERS) and dtype not in _SPARK_TIMES and dtype != "boolean"]


def _spark_any(keys: list[str], wanted: list[tuple]):
    from functools import reduce

    from pyspark.sql import functions as F

    def one(values):
        parts = [F.col(k).isNull() if _is_null(v) else F.col(k) == F.lit(v) for k, v in zip(keys, values)]
        return reduce(lambda a, b: a & b, parts)

    return reduce(lambda a, b: a | b, [one(w) for w in wanted])


def _spark_top_keys(df, keys: list[str], max_keys: int):
    """The panes of the `max_keys` keys with the most panes (one job counts the keys), and how
    many keys there are."""
    counts = df.groupBy(*keys).count().limit(_MAX_COUNTED + 1).toPandas()
    counts = counts.sort_values(["count", *keys], ascending=[False] + [True] * len(keys), kind="stable")
    top = [tuple(r) for r in counts[keys].head(max_keys).itertuples(index=False)]
    if len(counts) <= max_keys:
        return df, len(counts)
    return df.where(_spark_any(keys, top)), len(counts)


def _inputs_frame(inputs, chosen: _Chosen, limit: int) -> pd.DataFrame | None:
    """The input rows, only those of the keys drawn when they carry the key columns."""
    if inputs is None:
        return None
    keyed = chosen.keys and chosen.shown and all(k in getattr(inputs, "columns", []) for k in chosen.keys)
    if is_spark(inputs) and keyed:
        check_not_streaming(inputs, "inputs")
        inputs = inputs.where(_spark_any(chosen.keys, chosen.shown))
    frame = to_pandas(inputs, limit, "inputs")
    return frame


def _for_key(frame: pd.DataFrame | None, keys: list[str], shown: tuple | None) -> pd.DataFrame | None:
    if frame is None or shown is None or not all(k in frame.columns for k in keys):
        return frame
    mask = np.ones(len(frame), bool)
    for k, v in zip(keys, shown):
        mask &= (frame[k].isna() if _is_null(v) else frame[k] == v).to_numpy()
    return frame[mask]


# --------------------------------------------------------------------------- notes and saving


def _hidden_note(hidden: int) -> list[str]:
    if not hidden:
        return []
    return [f"{hidden} label{'s' if hidden != 1 else ''} left out where {'they' if hidden != 1 else 'it'} "
            "would overlap"]


def _note(where, notes: list[str], *, in_axes: bool) -> None:
    """What the figure leaves out, in small grey type under it (gid "plot-note")."""
    if not notes:
        return
    text = "; ".join(notes)
    if in_axes:
        t = where.text(0.0, -0.16, text, transform=where.transAxes, fontsize=7.5, color="dimgrey", va="top",
                       wrap=True)
    else:
        width = where.get_figwidth()
        t = where.text(0.01, 0.01, textwrap.fill(text, int(width * 15)), fontsize=8, color="dimgrey",
                       va="bottom", ha="left")
    t.set_gid("plot-note")


def _save(fig, path: str | None) -> None:
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
