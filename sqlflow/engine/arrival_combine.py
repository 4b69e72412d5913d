"""Replayed rows combined per key, aligned slice and arrival period: the rule.

A replay hands every input row to the engine. Many of them are interchangeable: rows of one key
whose event times lie in one gap-aligned slice `[k*gap, (k+1)*gap)` (always one session once
both arrived) and whose arrivals fall between the same two processing-time boundaries
`((j-1)*d + o, j*d + o]` give the same panes whether they arrive one by one or all at the first of their
arrivals, provided nothing can fire in between. This module says when that holds and is the
reference of the combining (`combine`, pandas); sqlflow/spark/replay_combine.py does the same in
Spark before the rows reach the Python workers.

**The rule.** Let `W(g)` be the watermark at the boundary `g = j*d + o` that ends the rows' arrival
period (after its advance). A row is *combinable* when `W(g) < its event time`. The combinable rows
of one (key, slice, period) become one element at their smallest event time `lo`, arriving at
their first arrival and carrying their partial aggregates, plus, when they span more, a neutral
element at their largest event time (COUNT 0, SUM/MIN/MAX NULL), as the bounded combining does
(sqlflow/spark/engine_path.py, `lifted_rows`). Why it is exact, for triggers that
`paths.schedule_shape` knows (REPEAT(WATERMARK), its SEQUENCE form, and
SEQUENCE(REPEAT_UNTIL(PERIOD d, WATERMARK), REPEAT(WATERMARK)); not EMIT ... ALWAYS), which never
finish:

- every window that holds one of the rows ends after `lo`, and every row whose window can touch
  theirs (a session merge) has an event time above `lo - gap`, so its own window ends after `lo`
  too. Until `g` the watermark stays at or below `W(g) < lo`: none of these windows is past the
  watermark, so no watermark trigger fires for them, no row is too late and none is collected;
- PERIOD timers sit on the boundaries `k*d + o` (PERIOD d OFFSET o): none falls strictly inside
  an arrival period, and a timer armed by any of the rows is the boundary `g` either way; at `g`
  itself arrivals come before timers (docs/semantics.md 1.1), so both ways every row is in;
- the triggers never finish, so no row meets a closed window. Nothing fires for these windows
  while the rows arrive, and what fires afterwards sees the same sessions and trigger states.

FIXED windows combine the same way with the window as the slice (`slice_offset`: its offset):
every row of the group is in that one window, which ends after `lo`, and nothing else changes.

**Holds** (sqlflow/engine/holds.py, what a later stage's watermark reads). A group's element
arrives at its first arrival, so where one of its rows joins two sessions later in the period,
the group joins them at that first arrival, and the retraction of the session it joined is held
from there (its rows hold it from the later row's arrival). The output watermark is the same
unless that retraction's output time is below the merged pane's, which is held from the group's
first arrival too: END OF WINDOW holds sit above the watermark of the period (`W(g) < lo`), and
START OF WINDOW holds at or above the merged session's start. EARLIEST and LATEST are over a
pane's new elements and can lie above the retracted pane's, so sessions with those output
timestamps do not combine (`paths._why_not_combined`).

**In chunks** (`split`, `merge`, `elements`, `ChunkedCombine`): the groups of (key, slice, period)
are reduced per chunk of a bucket's rows and merged across chunks (their partials, smallest and
largest event time, first arrival and row count combine), so a bucket read chunk by chunk (a hot
key, udfs/bucket.py) holds its groups and single rows, not its rows, and gives the elements of
`combine` over the whole bucket.

Other rows (not combinable, or without an event or arrival time) stay single, with their values,
so what is dropped is reported row by row as before. Aggregates must combine: COUNT, SUM of exact
integers, MIN, MAX (`paths.COMBINING`), and a bucket whose SUM arguments are large enough for
a partial sum to overflow keeps its rows single; the query must have no WHEN and no per-row gap.

>>> import pandas as pd
>>> from sqlflow.engine.watermarks import bounded_delay
>>> rows = pd.DataFrame({"k": [1, 1, 1, 2], "v": [1, 2, 3, 4], EVENT_TIME: [100, 130, 104, 100],
...                      ARRIVAL_TIME: [101, 131, 109, 150]})
>>> tl = bounded_delay(rows[ARRIVAL_TIME], rows[EVENT_TIME], 50)
>>> out = combine(rows, keys=("k",), gap=60, period=60, timeline=tl,
...               parts=(("n", "count_star", None), ("s", "sum", "v")), weight="w")
>>> out.sort_values(["k", EVENT_TIME]).to_dict("list")  # doctest: +NORMALIZE_WHITESPACE
{'k': [1, 1, 1, 2], 'v': [None, None, None, None], 'n': [2, 0, 1, 1], 's': [4, None, 2, 4],
 '__sqlflow_et': [100, 104, 130, 100], '__sqlflow_at': [101, 101, 131, 150], 'w': [2, 0, 1, 1]}
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import ast
from ..columns import ARRIVAL_TIME, EVENT_TIME
from ..time import MINUTE
from .exact import bigint_sums_fit
from .values import key_ids
from .paths import schedule_shape

def arrival_grid(windowing: "ast.Windowing") -> tuple[int, int] | None:
    """(d, o): the boundaries `k*d + o` of the arrival periods rows are combined in, or None when
    the windowing rules combining out (a trigger `paths.watermark_shape` does not know, or
    EMIT ... ALWAYS, which emits without new input). With PERIOD d OFFSET o, its boundaries; with
    watermark triggers only, any grid is exact: whole minutes."""
    shape = schedule_shape(windowing)
    if shape is None:
        return None
    kind, grid = shape
    return grid if kind == "early_period" else (MINUTE, 0)


def combine(rows: pd.DataFrame, *, keys: tuple, gap: int, period: int, offset: int = 0, timeline, parts: tuple,
            weight: str, slice_offset: int = 0) -> pd.DataFrame:
    """The engine elements of `rows` by the rule (module doc), in column operations: the key
    columns, the aggregate arguments echoed for single rows (NULL for combined elements, which
    are never dropped), the partial aggregates `parts` ((output column, "count_star" | "count" |
    "sum" | "min" | "max", input column or None); SUM, MIN and MAX of integer columns), event
    and arrival time, and `weight`: how many rows an element stands for. `gap` is the size of the
    aligned slices of event time (`slice_offset` their offset: a FIXED window's own)."""
    groups, single = split(rows, keys=keys, gap=gap, period=period, offset=offset, timeline=timeline, parts=parts,
                           fit=_sums_fit(rows, parts), slice_offset=slice_offset)
    return elements(groups, rows.take(single), keys=keys, parts=parts, weight=weight)


#: the columns of a frame of groups (`split`): slice, arrival boundary, smallest and largest event
#: time, first arrival, rows; then per part its partial and (but COUNT(*)) its non-NULL values
_SLICE, _BOUND, _LO, _HI, _FIRST, _ROWS = "__slice", "__bound", "__lo", "__hi", "__first", "__rows"
_SEEN = "__seen"
_IDENTITY = {"sum": 0, "min": np.iinfo(np.int64).max, "max": np.iinfo(np.int64).min}
_REDUCE: dict = {"sum": np.add, "min": np.minimum, "max": np.maximum, "count": np.add, "count_star": np.add}


def split(rows: pd.DataFrame, *, keys: tuple, gap: int, period: int, offset: int = 0, timeline, parts: tuple,
          fit: bool = True, slice_offset: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """The combinable rows of `rows` reduced to one row per (key, slice, arrival period) (a frame
    of groups, which `merge` reduces again and `elements` turns into engine elements), and the
    positions of the rows that stay single. `fit` False: every row stays single (a partial SUM
    could overflow)."""
    et, at = rows[EVENT_TIME], rows[ARRIVAL_TIME]
    known = ~(et.isna().to_numpy() | at.isna().to_numpy())
    e = et.to_numpy(np.int64, na_value=0)
    a = at.to_numpy(np.int64, na_value=0)
    g = a + np.mod(offset - a, period)  # the boundary that ends the row's arrival period
    ok = known & (timeline.at_many(g) < e) if len(rows) else known
    if not fit:
        ok[:] = False  # a partial SUM could overflow where the rows' total does not: rows stay single
    many, single = np.flatnonzero(ok), np.flatnonzero(~ok)
    code = _codes(rows, keys)[many]
    sl = e[many] - np.mod(e[many] - slice_offset, gap)
    order = np.lexsort((g[many], sl, code))
    idx = many[order]
    c, s, b = code[order], sl[order], g[many][order]
    new = np.r_[True, (c[1:] != c[:-1]) | (s[1:] != s[:-1]) | (b[1:] != b[:-1])] if len(idx) else np.empty(0, bool)
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(idx)]
    ei, ai = e[idx], a[idx]
    out = {k: rows[k].take(idx[starts]).reset_index(drop=True) for k in keys}
    out[_SLICE], out[_BOUND] = s[starts], b[starts]
    out[_LO] = np.minimum.reduceat(ei, starts) if len(idx) else ei
    out[_HI] = np.maximum.reduceat(ei, starts) if len(idx) else ei
    out[_FIRST] = np.minimum.reduceat(ai, starts) if len(idx) else ai
    out[_ROWS] = (ends - starts).astype(np.int64)
    for name, kind, column in parts:
        if kind == "count_star":
            out[name] = out[_ROWS]
            continue
        values = rows[column]
        seen = (~values.isna()).to_numpy()[idx].astype(np.int64)
        counts = np.add.reduceat(seen, starts) if len(idx) else seen
        if kind == "count":
            out[name] = counts
            continue
        v = values.to_numpy(np.int64, na_value=_IDENTITY[kind])[idx]
        out[name] = _REDUCE[kind].reduceat(v, starts) if len(idx) else v
        out[name + _SEEN] = counts
    return pd.DataFrame(out), single


def merge(groups: pd.DataFrame, *, keys: tuple, parts: tuple) -> pd.DataFrame:
    """Frames of groups (`split`, several concatenated) reduced to one row per (key, slice,
    arrival period): the groups of a bucket read in chunks are those of the whole bucket."""
    if not len(groups):
        return groups
    code = _codes(groups, keys)
    s, b = groups[_SLICE].to_numpy(np.int64), groups[_BOUND].to_numpy(np.int64)
    order = np.lexsort((b, s, code))
    c, s, b = code[order], s[order], b[order]
    new = np.r_[True, (c[1:] != c[:-1]) | (s[1:] != s[:-1]) | (b[1:] != b[:-1])]
    starts = np.flatnonzero(new)
    out = {k: groups[k].take(order[starts]).reset_index(drop=True) for k in keys}
    out[_SLICE], out[_BOUND] = s[starts], b[starts]
    reduce = {_LO: np.minimum, _HI: np.maximum, _FIRST: np.minimum, _ROWS: np.add}
    for name, kind, _ in parts:
        reduce[name] = _REDUCE[kind]
        if kind not in ("count", "count_star"):
            reduce[name + _SEEN] = np.add
    for column, fn in reduce.items():
        out[column] = fn.reduceat(groups[column].to_numpy(np.int64)[order], starts)
    return pd.DataFrame(out)


def elements(groups: pd.DataFrame, single: pd.DataFrame, *, keys: tuple, parts: tuple, weight: str) -> pd.DataFrame:
    """The engine elements of a frame of groups (`split`, `merge`) and of the rows that stay single:
    per group one element at its smallest event time, arriving at its first arrival, with the
    partial aggregates, and, when it spans more, a neutral one at its largest event time (COUNT 0,
    SUM/MIN/MAX NULL); then the single rows (module doc)."""
    lo, hi = groups[_LO].to_numpy(np.int64), groups[_HI].to_numpy(np.int64)
    first, rows_of = groups[_FIRST].to_numpy(np.int64), groups[_ROWS].to_numpy(np.int64)
    two = hi > lo
    n_lo, n_hi, n_single = len(lo), int(two.sum()), len(single)
    lo_hi = np.r_[np.arange(n_lo), np.flatnonzero(two)]
    out = {k: pd.concat([groups[k].take(lo_hi), single[k]], ignore_index=True) if n_single else
           groups[k].take(lo_hi).reset_index(drop=True) for k in keys}
    n_combined = n_lo + n_hi
    for column in dict.fromkeys(col for _, _, col in parts if col is not None and col not in keys):
        echo = single[column].reset_index(drop=True)
        if echo.dtype.kind in "iub":
            echo = echo.astype("Int64" if echo.dtype.kind != "b" else "boolean")
        nulls = pd.Series(pd.array([None] * n_combined, dtype=echo.dtype))
        out[column] = pd.concat([nulls, echo], ignore_index=True) if n_single else nulls
    for name, kind, column in parts:
        if kind == "count_star":
            out[name] = np.r_[rows_of, np.zeros(n_hi, np.int64), np.ones(n_single, np.int64)]
            continue
        values = single[column]
        seen = (~values.isna()).to_numpy()
        if kind == "count":
            out[name] = np.r_[groups[name].to_numpy(np.int64), np.zeros(n_hi, np.int64), seen.astype(np.int64)]
            continue
        v = values.to_numpy(np.int64, na_value=_IDENTITY[kind])
        data = np.r_[groups[name].to_numpy(np.int64), np.zeros(n_hi, np.int64), v]
        null = np.r_[groups[name + _SEEN].to_numpy(np.int64) == 0, np.ones(n_hi, bool), ~seen]
        out[name] = pd.arrays.IntegerArray(data, null)
    out[EVENT_TIME] = _times(np.r_[lo, hi[two]], single[EVENT_TIME])
    out[ARRIVAL_TIME] = _times(np.r_[first, first[two]], single[ARRIVAL_TIME])
    out[weight] = np.r_[rows_of, np.zeros(n_hi, np.int64), np.ones(n_single, np.int64)]
    return pd.DataFrame(out)


class ChunkedCombine:
    """The combining of one bucket read in chunks (udfs/bucket.py): each chunk's groups are merged
    into those of the chunks before, its single rows kept, so memory follows the groups and the
    single rows, not the bucket's rows. `elements()` is then `combine` over the whole bucket, but
    that a partial SUM that could overflow keeps the rows single from the chunk on that could
    make it overflow (earlier partials stay exact: the engine then tells the total's overflow)."""

    def __init__(self, *, keys: tuple, gap: int, period: int, offset: int = 0, timeline, parts: tuple,
                 slice_offset: int = 0):
        self.keys, self.parts = keys, parts
        self.gap, self.period, self.offset, self.slice_offset = gap, period, offset, slice_offset
        self.timeline = timeline
        self.groups: pd.DataFrame | None = None
        self.single: list[pd.DataFrame] = []
        self.rows = 0
        self.largest = {column: 0.0 for _, kind, column in parts if kind == "sum"}  # |value| seen so far
        self.fit = True
        self.template: pd.DataFrame | None = None  # no rows, the columns of the bucket's

    def add(self, rows: pd.DataFrame) -> None:
        """Combine one chunk of the bucket's rows (engine columns) into what is held."""
        self.rows += len(rows)
        if self.template is None:
            self.template = rows.iloc[:0]
        for column in self.largest:
            v = rows[column].to_numpy(np.int64, na_value=0)
            if len(v):
                self.largest[column] = max(self.largest[column], float(v.max()), -float(v.min()))
            self.fit = self.fit and self.largest[column] * self.rows < 2.0**62  # bigint_sums_fit, so far
        groups, single = self._split(rows, self.fit)
        if len(single):
            self.single.append(rows.take(single).reset_index(drop=True))
        if len(groups):
            both = groups if self.groups is None else pd.concat([self.groups, groups], ignore_index=True)
            self.groups = merge(both, keys=self.keys, parts=self.parts)

    def _split(self, rows: pd.DataFrame, fit: bool) -> tuple[pd.DataFrame, np.ndarray]:
        return split(rows, keys=self.keys, gap=self.gap, period=self.period, offset=self.offset,
                     timeline=self.timeline, parts=self.parts, fit=fit, slice_offset=self.slice_offset)

    def elements(self, weight: str) -> pd.DataFrame:
        """The engine elements of every row added (`elements`)."""
        if self.template is None:
            raise ValueError("no chunk was added")
        single = pd.concat(self.single, ignore_index=True) if self.single else self.template
        groups = self.groups
        if groups is None:
            groups, _ = self._split(self.template, True)
        return elements(groups, single, keys=self.keys, parts=self.parts, weight=weight)


def _codes(rows: pd.DataFrame, keys: tuple) -> np.ndarray:
    """Dense key ids (`values.key_ids`); one key when there are no GROUP BY keys."""
    return key_ids(rows, list(keys)) if keys else np.zeros(len(rows), np.int64)


def _sums_fit(rows: pd.DataFrame, parts: tuple) -> bool:
    """Whether no partial SUM can leave the int64 range (the engine tells an overflowing BIGINT
    total from its values, sqlflow/engine/exact.py; a wrapped partial would hide it)."""
    return all(bigint_sums_fit(rows[column].to_numpy(np.int64, na_value=0))
               for _, kind, column in parts if kind == "sum")


def _times(combined: np.ndarray, column: pd.Series):
    """Times of the combined elements, then those of the single rows (NULL stays NULL)."""
    data = np.r_[combined, column.to_numpy(np.int64, na_value=0)]
    null = np.r_[np.zeros(len(combined), bool), column.isna().to_numpy()]
    return pd.arrays.IntegerArray(data, null) if null.any() else data
