"""A current-results table kept from a pane changelog: what one micro-batch of panes changes.

A consumer that keeps "the answer now" holds one row per key and window: the GROUP BY keys,
`window_start` and `window_end` are its key; its other columns are the aggregates and the pane
columns of the last pane applied. A micro-batch of panes (rows in no particular order) changes it
by upserts and deletes (docs/postgres.md, "How a batch is applied"):

- ACCUMULATING, ACCUMULATING AND RETRACTING: per key and window, the last row of the batch (by
  emit time, a retraction before the pane emitted with it, then pane index) decides: a pane
  replaces the row, a retraction deletes it. So a retraction that a later pane of the same batch
  replaces is no delete, and the windows of sessions that merged are deleted while the merged one
  is inserted (the Dataflow paper, section 2.3). Without retractions nothing is ever deleted: the
  windows a merge replaced stay, as the changelog has no row saying they are gone.
- DISCARDING: each pane holds what is new since the window's last pane; the panes of one key and
  window are summed and added to the row. Only aggregates that add do so (COUNT, SUM: `ADDITIVE`);
  the caller refuses others when it plans the query.

`apply_changes` applies the changes to a table held as a DataFrame: the reference the PostgreSQL
writer's statements are tested against (tests/postgres/).

>>> import pandas as pd
>>> shape = TableShape(keys=("k",), aggregates=("n",), mode=AccumulationMode.ACCUMULATING_AND_RETRACTING)
>>> panes = pd.DataFrame({"k": ["a", "a", "a"], "n": [2, 2, 5], "window_start": [0, 0, 0],
...     "window_end": [10, 10, 15], "pane_index": [0, 0, 0], "pane_timing": ["EARLY"] * 3,
...     "is_last": [False] * 3, "emit_time": [1, 2, 2], "output_time": [9, 9, 14],
...     "is_retraction": [False, True, False]})
>>> c = batch_changes(panes, shape)
>>> c.upserts[["k", "n", "window_end"]].values.tolist(), c.deletes.values.tolist()
([['a', 5, 15]], [['a', 0, 10]])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..ast import AccumulationMode
from ..columns import EMIT_TIME, IS_LAST, IS_RETRACTION, OUTPUT_TIME, PANE_INDEX, PANE_TIMING, WINDOW_END, WINDOW_START

#: the aggregate functions whose values add across discarding panes (COUNT(*), COUNT(x), SUM(x))
ADDITIVE = ("COUNT", "SUM")
#: the pane columns a current-results table keeps, of the last pane applied to a row
TABLE_PANE_COLUMNS = (PANE_INDEX, PANE_TIMING, IS_LAST, EMIT_TIME, OUTPUT_TIME)


@dataclass(frozen=True)
class TableShape:
    """What a current-results table holds: the query's GROUP BY output columns, its aggregate
    columns (the rest of its SELECT list) and its accumulation mode."""

    keys: tuple[str, ...]
    aggregates: tuple[str, ...]
    mode: AccumulationMode

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The table's key: the GROUP BY keys and the window."""
        return (*self.keys, WINDOW_START, WINDOW_END)

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.key_columns, *self.aggregates, *TABLE_PANE_COLUMNS)


@dataclass(frozen=True)
class Changes:
    """What one batch does to the table: rows to insert or replace (in DISCARDING mode: to add to
    the row, `TableShape.columns`), and the keys of rows to delete (`TableShape.key_columns`).
    No key is in both."""

    upserts: pd.DataFrame
    deletes: pd.DataFrame


def _in_order(panes: pd.DataFrame) -> pd.DataFrame:
    """The batch's rows in changelog order: emit time (NULL first: bounded data has none), a
    retraction before the pane emitted with it, pane index."""
    emit = panes[EMIT_TIME]
    emitted = emit.notna().to_numpy()
    if pd.api.types.is_datetime64_any_dtype(emit):
        time = np.where(emitted, pd.DatetimeIndex(emit).asi8, 0)
    else:
        time = np.where(emitted, pd.to_numeric(emit).fillna(0).to_numpy(np.float64), 0)
    retraction = (panes[IS_RETRACTION].fillna(False).to_numpy(bool) if IS_RETRACTION in panes
                  else np.zeros(len(panes), bool))
    order = np.lexsort((panes[PANE_INDEX].to_numpy(np.int64), ~retraction, time, emitted))
    return panes.iloc[order]


def batch_changes(panes: pd.DataFrame, shape: TableShape) -> Changes:
    """The upserts and deletes one micro-batch of panes makes (the module's docstring)."""
    keys = list(shape.key_columns)
    ordered = _in_order(panes)
    if shape.mode is AccumulationMode.DISCARDING:
        group = ordered.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
        last = pd.Series(np.arange(len(ordered))).groupby(group).max()
        sums = ordered[list(shape.aggregates)].reset_index(drop=True).groupby(group).sum(min_count=1)
        up = ordered.iloc[last.to_numpy()][list(shape.columns)].reset_index(drop=True)
        for a in shape.aggregates:
            up[a] = sums.loc[last.index, a].to_numpy()
        return Changes(_typed(up, panes), panes.iloc[:0][keys].reset_index(drop=True))
    last = ordered.drop_duplicates(keys, keep="last")
    retracted = (last[IS_RETRACTION].fillna(False).to_numpy(bool) if IS_RETRACTION in last
                 else np.zeros(len(last), bool))
    upserts = last[~retracted][list(shape.columns)].reset_index(drop=True)
    deletes = last[retracted][keys].reset_index(drop=True)
    return Changes(upserts, deletes)


def _typed(frame: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    """The batch's column types back where a join or a sum changed them (int to float by NULLs)."""
    out = frame.copy()
    for c in out.columns:
        if out[c].dtype != like[c].dtype and pd.api.types.is_integer_dtype(like[c].dtype) and out[c].notna().all():
            out[c] = out[c].astype(like[c].dtype)
    return out.reset_index(drop=True)


def apply_changes(table: pd.DataFrame, changes: Changes, shape: TableShape) -> pd.DataFrame:
    """The table after the changes: the reference semantics of the writer's statements."""
    keys = list(shape.key_columns)

    def rows_of(frame: pd.DataFrame, among: pd.DataFrame) -> np.ndarray:
        """Which rows of `frame` have a key of `among` (NULL matching NULL, as in the table's key)."""
        if not len(frame) or not len(among):
            return np.zeros(len(frame), bool)
        mine = frame[keys].astype(object).where(frame[keys].notna(), None)
        theirs = among[keys].astype(object).where(among[keys].notna(), None).assign(_hit=True)
        return mine.merge(theirs, on=keys, how="left")["_hit"].notna().to_numpy()

    table = table[~rows_of(table, changes.deletes)]
    up = changes.upserts
    if shape.mode is AccumulationMode.DISCARDING and len(table) and len(up):
        before = table[rows_of(table, up)]
        if len(before):
            left = up[keys].astype(object).where(up[keys].notna(), None)
            right = before[keys].astype(object).where(before[keys].notna(), None)
            old = left.merge(right.assign(**{f"_old{i}": before[a].to_numpy() for i, a in enumerate(shape.aggregates)}),
                             on=keys, how="left")
            up = up.copy()
            for i, a in enumerate(shape.aggregates):
                mine, prior = up[a].to_numpy(object), old[f"_old{i}"].to_numpy(object)
                up[a] = np.where(pd.isna(prior), mine, np.where(pd.isna(mine), prior, mine + prior))
    table = table[~rows_of(table, up)]
    parts = [p[list(shape.columns)].astype(object) for p in (table, up) if len(p)]
    if not parts:
        return up.iloc[:0][list(shape.columns)]
    return pd.concat(parts, ignore_index=True)
