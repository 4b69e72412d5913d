"""Replayed rows combined per key, gap-aligned slice and arrival period: the rule.

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
            weight: str) -> pd.DataFrame:
    """The engine elements of `rows` by the rule (module doc), in column operations: the key
    columns, the aggregate arguments echoed for single rows (NULL for combined elements, which
    are never dropped), the partial aggregates `parts` ((output column, "count_star" | "count" |
    "sum" | "min" | "max", input column or None); SUM, MIN and MAX of integer columns), event
    and arrival time, and `weight`: how many rows an element stands for."""
    et, at = rows[EVENT_TIME], rows[ARRIVAL_TIME]
    known = ~(et.isna().to_numpy() | at.isna().to_numpy())
    e = et.to_numpy(np.int64, na_value=0)
    a = at.to_numpy(np.int64, na_value=0)
    g = a + np.mod(offset - a, period)  # the boundary that ends the row's arrival period
    ok = known & (timeline.at_many(g) < e) if len(rows) else known
    if not _sums_fit(rows, parts):
        ok[:] = False  # a partial SUM could overflow where the rows' total does not: rows stay single
    many, single = np.flatnonzero(ok), np.flatnonzero(~ok)
    code = key_ids(rows, list(keys))[many]
    sl = e[many] - np.mod(e[many], gap)
    order = np.lexsort((g[many], sl, code))
    idx = many[order]
    c, s, b = code[order], sl[order], g[many][order]
    new = np.r_[True, (c[1:] != c[:-1]) | (s[1:] != s[:-1]) | (b[1:] != b[:-1])] if len(idx) else np.empty(0, bool)
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(idx)]
    ei, ai = e[idx], a[idx]
    lo = np.minimum.reduceat(ei, starts) if len(idx) else ei
    hi = np.maximum.reduceat(ei, starts) if len(idx) else ei
    first = np.minimum.reduceat(ai, starts) if len(idx) else ai
    two = hi > lo
    n_lo, n_hi, n_single = len(starts), int(two.sum()), len(single)
    rep = idx[starts]
    take = np.r_[rep, rep[two], single]
    out = {k: rows[k].take(take).reset_index(drop=True) for k in keys}
    combined = np.r_[np.ones(n_lo + n_hi, bool), np.zeros(n_single, bool)]
    for column in dict.fromkeys(col for _, _, col in parts if col is not None and col not in keys):
        echo = rows[column].take(take).reset_index(drop=True)
        if echo.dtype.kind in "iub":
            echo = echo.astype("Int64" if echo.dtype.kind != "b" else "boolean")
        out[column] = echo.mask(pd.Series(combined))
    for name, kind, column in parts:
        out[name] = _partials(rows, kind, column, idx, starts, ends, two, single)
    out[EVENT_TIME] = _times(np.r_[lo, hi[two]], et, single)
    out[ARRIVAL_TIME] = _times(np.r_[first, first[two]], at, single)
    out[weight] = np.r_[ends - starts, np.zeros(n_hi, np.int64), np.ones(n_single, np.int64)]
    return pd.DataFrame(out)


def _sums_fit(rows: pd.DataFrame, parts: tuple) -> bool:
    """Whether no partial SUM can leave the int64 range (the engine tells an overflowing BIGINT
    total from its values, sqlflow/engine/exact.py; a wrapped partial would hide it)."""
    return all(bigint_sums_fit(rows[column].to_numpy(np.int64, na_value=0))
               for _, kind, column in parts if kind == "sum")


def _partials(rows, kind, column, idx, starts, ends, two, single) -> pd.array:
    """A partial aggregate for the lo elements, the neutral one for the hi elements, a single
    row's own for the single rows."""
    n_hi = int(two.sum())
    if kind == "count_star":
        return np.r_[ends - starts, np.zeros(n_hi, np.int64), np.ones(len(single), np.int64)]
    values = rows[column]
    seen = (~values.isna()).to_numpy()
    counts = np.add.reduceat(seen[idx].astype(np.int64), starts) if len(idx) else np.zeros(0, np.int64)
    if kind == "count":
        return np.r_[counts, np.zeros(n_hi, np.int64), seen[single].astype(np.int64)]
    identity = {"sum": 0, "min": np.iinfo(np.int64).max, "max": np.iinfo(np.int64).min}[kind]
    ufunc: np.ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[kind]
    v = values.to_numpy(np.int64, na_value=identity)
    part = ufunc.reduceat(v[idx], starts) if len(idx) else np.zeros(0, np.int64)
    data = np.r_[part, np.zeros(n_hi, np.int64), v[single]]
    null = np.r_[counts == 0, np.ones(n_hi, bool), ~seen[single]]
    return pd.arrays.IntegerArray(data, null)


def _times(combined: np.ndarray, column: pd.Series, single: np.ndarray):
    """Times of the combined elements, then those of the single rows (NULL stays NULL)."""
    data = np.r_[combined, column.to_numpy(np.int64, na_value=0)[single]]
    null = np.r_[np.zeros(len(combined), bool), column.isna().to_numpy()[single]]
    return pd.arrays.IntegerArray(data, null) if null.any() else data
