"""Rows in and out of the engine, for every path (the per-key loop, `vectorised.py`, `stream_step.py`).

`prepare` makes a batch of rows ready: the rows the engine cannot use are set aside (NULL event
or arrival time, a NULL or non-positive per-row gap), keys get dense ids, the usable rows are
assigned to windows. `when_truth` and `accumulators` give the WHEN predicates and the aggregates'
input per (row, window) assignment; `engine_result` gathers panes, dropped rows and counters into an
`EngineResult`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..columns import (ARRIVAL_TIME, BAD_GAP, CLOSED, DROP_CODE, EVENT_TIME, GAP, NULL_ARRIVAL_TIME, NULL_EVENT_TIME,
                       RETRACTION_COLUMN, TOO_LATE, when_column)
from ..errors import SqlflowExecutionError
from ..time import POS_INF
from .keys import factorize_keys
from .plan import EnginePlan

@dataclass
class EngineResult:
    """Panes (sorted as they were emitted), dropped input rows, and counters."""

    panes: pd.DataFrame
    dropped: pd.DataFrame
    metrics: dict = field(default_factory=dict)


@dataclass
class Input:
    """Rows prepared for the engine: usable rows assigned to windows."""

    rows: pd.DataFrame
    et: np.ndarray
    at: np.ndarray
    null_et: np.ndarray
    bad_gap: np.ndarray
    null_at: np.ndarray  # replay: an event time but no arrival time
    key_id: np.ndarray
    key_frame: pd.DataFrame
    a_row: np.ndarray
    a_start: np.ndarray
    a_end: np.ndarray

    @property
    def a_key(self):
        return self.key_id[self.a_row]

    @property
    def a_at(self):
        return self.at[self.a_row]


def prepare(plan: EnginePlan, wfn, rows: pd.DataFrame, *, replay: bool, key_id=None,
            key_frame=None) -> Input:
    """Rows made ready for the engine: drops of unusable rows, key ids (given, or factorized
    from the keys), window assignment by `wfn` (`windows.window_fn`)."""
    rows = rows.reset_index(drop=True)
    n = len(rows)
    null_et = pd.isna(rows[EVENT_TIME]).to_numpy()
    et = np.where(null_et, 0, rows[EVENT_TIME].to_numpy()).astype(np.int64) if n else np.empty(0, np.int64)
    if replay:
        if ARRIVAL_TIME not in rows:
            raise SqlflowExecutionError("replay needs an arrival-time column", clause="WATERMARK")
        null_at = pd.isna(rows[ARRIVAL_TIME]).to_numpy()
        at = np.where(null_at, 0, rows[ARRIVAL_TIME].to_numpy()).astype(np.int64) if n else et
        null_at = null_at & ~null_et
    else:
        at = et
        null_at = np.zeros(n, bool)
    bad_gap = np.zeros(n, bool)
    gap = None
    if plan.per_row_gap:
        gap, usable = _gaps(rows[GAP])
        bad_gap = ~null_et & ~null_at & ~usable
    valid = ~(null_et | null_at | bad_gap)
    if key_id is None:
        keys = list(plan.keys)
        if keys:
            key_id, first = factorize_keys(rows, keys)
            key_frame = rows[keys].iloc[first].reset_index(drop=True)
        else:
            key_id = np.zeros(n, np.int64)
            key_frame = pd.DataFrame(index=range(1 if n else 0))
    vrows = np.flatnonzero(valid) if not valid.all() else np.arange(n)
    a_row, a_start, a_end = wfn.assign(et[vrows], None if gap is None else gap[vrows])
    return Input(rows, et, at, null_et, bad_gap, null_at, key_id, key_frame, vrows[a_row],
                  np.asarray(a_start, np.int64), np.asarray(a_end, np.int64))


def when_truth(plan: EnginePlan, inp: Input, sub: np.ndarray) -> np.ndarray:
    """WHEN predicate i of each assignment in `sub`: a NULL predicate is false (as in WHERE)."""
    when = np.zeros((len(inp.a_row), plan.n_when), dtype=bool)
    for i in range(plan.n_when):
        col = inp.rows[when_column(i)]
        truth = col.where(col.notna(), False).astype(bool).to_numpy()
        when[sub, i] = truth[inp.a_row[sub]]
    return when


def accumulators(plan: EnginePlan, inp: Input, order_seq: np.ndarray) -> list[dict]:
    """One accumulator row per assignment, per aggregate."""
    cols = sorted({agg.column for agg in plan.aggregates if agg.column is not None})
    a_row = inp.a_row
    if len(a_row) == len(inp.rows) and (not len(a_row) or (a_row[0] == 0 and (np.diff(a_row) == 1).all())):
        src = inp.rows[cols]  # one assignment per row, in order (rows has a RangeIndex)
    else:
        src = pd.DataFrame({c: inp.rows[c].iloc[a_row].reset_index(drop=True) for c in cols},
                           index=pd.RangeIndex(len(a_row)))
    return [agg.create(src, inp.et[inp.a_row], order_seq[inp.a_row]) for agg in plan.aggregates]


def engine_result(inp: Input, frame: pd.DataFrame, drop_reason: np.ndarray) -> EngineResult:
    """Panes, dropped rows and counters. `drop_reason` per assignment: the reason (a string, ""
    for kept ones), or an int8 code (columns.DROP_CODE)."""
    if drop_reason.dtype != object:
        too_late, closed = drop_reason == DROP_CODE[TOO_LATE], drop_reason == DROP_CODE[CLOSED]
    else:
        too_late, closed = drop_reason == TOO_LATE, drop_reason == CLOSED
    parts = []
    if inp.null_et.any():
        parts.append(_drops(np.flatnonzero(inp.null_et), NULL_EVENT_TIME))
    if inp.null_at.any():
        parts.append(_drops(np.flatnonzero(inp.null_at), NULL_ARRIVAL_TIME))
    if inp.bad_gap.any():
        parts.append(_drops(np.flatnonzero(inp.bad_gap), BAD_GAP))
    for reason, sel in ((TOO_LATE, too_late), (CLOSED, closed)):
        if sel.any():
            parts.append(_drops(inp.a_row[sel], reason, inp.a_start[sel], inp.a_end[sel]))
    if parts:
        dropped = pd.concat(parts, ignore_index=True)
        dropped["window_start"] = dropped["window_start"].astype("Int64")
        dropped["window_end"] = dropped["window_end"].astype("Int64")
        dropped = dropped.sort_values(["row", "window_start"], na_position="first").reset_index(drop=True)
    else:
        dropped = _drops(np.empty(0, np.int64), "")
    retraction = frame[RETRACTION_COLUMN] if RETRACTION_COLUMN in frame else pd.Series(False, index=frame.index)
    metrics = {
        "input_rows": len(inp.rows),
        "panes": int((~retraction).sum()),
        "retractions": int(retraction.sum()),
        "dropped_null_event_time": int(inp.null_et.sum()),
        "dropped_null_arrival_time": int(inp.null_at.sum()),
        "dropped_bad_gap": int(inp.bad_gap.sum()),
        "dropped_too_late": int(too_late.sum()),
        "dropped_closed_window": int(closed.sum()),
    }
    return EngineResult(frame, dropped, metrics)


def _gaps(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per-row session gaps as int64 microseconds, and which are usable (not NULL, at least 1).
    Integer columns stay exact; a gap of +inf, or past the largest int64, is +inf (the session
    then ends at +inf); unusable gaps are 1 (their rows are dropped anyway)."""
    if column.dtype.kind in "iu":
        g = column.to_numpy(dtype=np.int64, na_value=0)
        usable = g >= 1
        return np.where(usable, g, 1), usable
    f = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    usable = f >= 1
    huge = f >= 2.0 ** 63
    g = np.where(usable & ~huge, f, 1).astype(np.int64)
    g[huge] = POS_INF
    return g, usable


def _drops(rows, reason, start=None, end=None) -> pd.DataFrame:
    n = len(rows)
    if not n:
        return _NO_DROPS.copy(deep=False)
    return pd.DataFrame({
        "row": np.asarray(rows, np.int64),
        "reason": np.full(n, reason, dtype=object),
        "window_start": pd.array(start if start is not None else [None] * n, dtype="Int64"),
        "window_end": pd.array(end if end is not None else [None] * n, dtype="Int64"),
    })


_NO_DROPS = pd.DataFrame({"row": np.empty(0, np.int64), "reason": np.empty(0, dtype=object),
                          "window_start": pd.array([], dtype="Int64"), "window_end": pd.array([], dtype="Int64")})
