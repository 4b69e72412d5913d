"""The live windows of many keys as columns: what `stream_step.py` keeps between micro-batches.

One row per live window (struct of arrays): its key (an id into a table of the keys' values),
bounds, pane bookkeeping, the trigger state (`trigger_columns.py`, one column per part), and one
accumulator row per aggregate for the input it has not emitted yet. Accumulating modes also keep
the window's lineage, the panes its next pane supersedes (its last pane, or the last panes of the
windows merged into it), one row each with its bounds, index, timing and total, in a second
table owned by window rows. Everything is numpy arrays (object arrays only for the aggregates that
hold Python values), so a bucket's state pickles as a few dozen arrays, however many keys it has.

>>> import numpy as np
>>> from sqlflow import ast
>>> from sqlflow.engine.aggregates import Aggregate
>>> from sqlflow.engine.triggers import compile_trigger
>>> from sqlflow.engine.trigger_composites import columns_of
>>> aggs = (Aggregate("count_star", None, "n"),)
>>> t = WindowTable.empty(columns_of(compile_trigger(ast.Repeat(ast.Watermark()))), aggs, [], lineage=False)
>>> rows = t.append(np.array([0, 0]), np.array([0, 10]), np.array([10, 20]), [{"cnt": np.zeros(0, np.int64)}])
>>> t.n, rows.tolist(), t.cols["end"].tolist(), t.T["0.0"].tolist()
(2, [0, 1], [10, 20], [False, False])
"""
from __future__ import annotations

import numpy as np
import pandas as pd

_I64 = np.int64
INT_FIELDS = ("key", "start", "end", "next_index", "count", "pending_time")
BOOL_FIELDS = ("had_nonearly", "closed", "has_pending")
#: a lineage pane's output_time, as output_time.column gives it (NONE of the policy for NULL), and
#: whether the hold of its retraction was released (docs/semantics.md, 1.3: the watermark passed the
#: end of the window it is pending in)
LINEAGE_FIELDS = ("owner", "start", "end", "index", "timing", "output_time", "released")


def take(acc: dict, rows) -> dict:
    return {f: a[rows] for f, a in acc.items()}


def identity(agg, like: dict, n: int) -> dict:
    """n accumulator rows that hold nothing, typed as `like`."""
    return agg.merge({f: a[:0] for f, a in like.items()}, np.empty(0, _I64), n)


def replace_rows(agg, acc: dict, rows: np.ndarray, new: dict) -> dict:
    """`acc` with rows `rows` replaced by `new` (row i by row i). Concatenated, not assigned: the
    new values may be of another type (a batch's column typed apart, `Aggregate.concat`)."""
    n = len(next(iter(acc.values())))
    both = agg.concat([acc, new])
    idx = np.arange(n)
    idx[rows] = n + np.arange(len(rows))
    return take(both, idx)


class Lineage:
    """Panes that windows build on: rows (owner window, start, end, index, timing) and their
    totals (one accumulator per aggregate, None while there is no row)."""

    def __init__(self, cols: dict, totals: list):
        self.cols, self.totals = cols, totals

    @staticmethod
    def empty(aggs) -> "Lineage":
        return Lineage({f: np.empty(0, _I64) for f in LINEAGE_FIELDS}, [None] * len(aggs))

    @property
    def m(self) -> int:
        return len(self.cols["owner"])

    def keep(self, rows: np.ndarray) -> None:
        self.cols = {f: a[rows] for f, a in self.cols.items()}
        self.totals = [None if t is None else take(t, rows) for t in self.totals]

    def add(self, aggs, owner, start, end, index, timing, output_time, totals: list[dict]) -> None:
        released = np.zeros(len(np.atleast_1d(owner)), _I64)
        for f, v in zip(LINEAGE_FIELDS, (owner, start, end, index, timing, output_time, released)):
            self.cols[f] = np.r_[self.cols[f], np.asarray(v, _I64)]
        self.totals = [new if old is None else agg.concat([old, new])
                       for agg, old, new in zip(aggs, self.totals, totals)]


class WindowTable:
    """Live windows (see the module doc). `keys` holds the key values, one row per key id."""

    def __init__(self, trig, aggs, key_names, keys: pd.DataFrame, cols: dict, T: dict, pending: list,
                 lineage: Lineage | None, no_time: int = 0):
        self.trig, self.aggs, self.key_names = trig, aggs, list(key_names)
        self.no_time = no_time  # pending_time of a window without timely pending input (output_time.NONE)
        self.keys, self.cols, self.T, self.pending, self.lineage = keys, cols, T, pending, lineage

    @staticmethod
    def empty(trig, aggs, key_names, *, lineage: bool, no_time: int = 0) -> "WindowTable":
        cols = {f: np.empty(0, _I64) for f in INT_FIELDS}
        cols.update({f: np.empty(0, bool) for f in BOOL_FIELDS})
        keys = pd.DataFrame({k: pd.Series([], dtype=object) for k in key_names}) if key_names \
            else pd.DataFrame(index=range(1))
        return WindowTable(trig, aggs, key_names, keys, cols, trig.table(0), [None] * len(aggs),
                           Lineage.empty(aggs) if lineage else None, no_time)

    @property
    def n(self) -> int:
        return len(self.cols["start"])

    # ------------------------------------------------------------------ keys

    def add_keys(self, batch_keys: pd.DataFrame) -> np.ndarray:
        """The key id of each row of `batch_keys` (distinct keys), adding the new ones."""
        if not self.key_names:
            return np.zeros(len(batch_keys), _I64)
        if not len(batch_keys):
            return np.empty(0, _I64)
        if len(self.key_names) == 1:
            column = batch_keys[self.key_names[0]]
            if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iub" \
                    and (not len(self.keys) or self.keys.dtypes.iloc[0] == column.dtype):  # no NULLs
                return self._add_plain_keys(column)
        batch = batch_keys[self.key_names].reset_index(drop=True)
        if not len(self.keys):  # typed as the batch (an empty frame of objects would make it object)
            self.keys = batch.iloc[:0]
        stored = self.keys
        if len(stored) and not stored.dtypes.equals(batch.dtypes):  # batches typed apart
            stored, batch = stored.astype(object), batch.astype(object)
        both = pd.concat([stored, batch], ignore_index=True)
        ids = both.groupby(self.key_names, dropna=False, sort=False).ngroup().to_numpy().astype(_I64)
        batch_ids = ids[len(stored):]
        new = np.flatnonzero(batch_ids >= len(stored))
        if len(new):
            first = new[np.unique(batch_ids[new], return_index=True)[1]]  # in id order
            self.keys = pd.concat([stored, batch.iloc[first]], ignore_index=True)
        else:
            self.keys = stored
        return batch_ids

    def _add_plain_keys(self, column: pd.Series) -> np.ndarray:
        """add_keys for one key column of a type without NULLs (integers, booleans), typed as the
        stored keys: a hash lookup, no group-by."""
        name = self.key_names[0]
        values = column.to_numpy()
        stored = self.keys[name].to_numpy() if len(self.keys) else values[:0]
        ids = pd.Index(stored).get_indexer(values).astype(_I64)
        new = np.flatnonzero(ids < 0)
        if len(new):
            ids[new] = len(stored) + np.arange(len(new))
            self.keys = pd.DataFrame({name: np.concatenate([stored, values[new]])})
        return ids

    # ------------------------------------------------------------------ rows

    def append(self, key, start, end, like: list[dict]) -> np.ndarray:
        """Add fresh windows (new trigger state, nothing pending); returns their rows. `like`: an
        accumulator per aggregate whose types the empty pending rows take when there are none yet."""
        k = len(start)
        first = self.n
        vals = {"key": key, "start": start, "end": end, "pending_time": np.full(k, self.no_time, _I64)}
        for f in INT_FIELDS:
            self.cols[f] = np.r_[self.cols[f], np.asarray(vals.get(f, np.zeros(k, _I64)), _I64)]
        for f in BOOL_FIELDS:
            self.cols[f] = np.r_[self.cols[f], np.zeros(k, bool)]
        fresh = self.trig.table(k)
        self.T = {c: np.r_[a, fresh[c]] for c, a in self.T.items()}
        for i, agg in enumerate(self.aggs):
            base = self.pending[i] if self.pending[i] is not None else like[i]
            empty = identity(agg, base, k)
            self.pending[i] = empty if self.pending[i] is None else agg.concat([self.pending[i], empty])
        return np.arange(first, first + k)

    def keep(self, rows: np.ndarray) -> None:
        """Keep only windows `rows` (in that order), their lineage and the keys they use."""
        remap = np.full(self.n, -1, _I64)
        remap[rows] = np.arange(len(rows))
        self.cols = {f: a[rows] for f, a in self.cols.items()}
        self.T = {c: a[rows] for c, a in self.T.items()}
        self.pending = [None if p is None else take(p, rows) for p in self.pending]
        if self.lineage is not None and self.lineage.m:
            owner = remap[self.lineage.cols["owner"]]
            kept = np.flatnonzero(owner >= 0)
            self.lineage.keep(kept)
            self.lineage.cols["owner"] = owner[kept]
        if self.key_names:
            used = np.bincount(self.cols["key"], minlength=len(self.keys)) > 0
            if not used.all():
                self.keys = self.keys.iloc[np.flatnonzero(used)].reset_index(drop=True)
                self.cols["key"] = (np.cumsum(used) - 1)[self.cols["key"]]

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict:
        """A plain dict (pickled by the streaming operator); {} when no window is live."""
        if not self.n:
            return {}
        return {"windows": self.cols, "trigger": self.T, "keys": self.keys, "pending": self.pending,
                "lineage": None if self.lineage is None else (self.lineage.cols, self.lineage.totals)}

    @staticmethod
    def from_state(state: dict, trig, aggs, key_names, *, lineage: bool, no_time: int = 0) -> "WindowTable":
        """The table of a stored state (copies: the caller's state stays as it was)."""
        if not state:
            return WindowTable.empty(trig, aggs, key_names, lineage=lineage, no_time=no_time)
        cols = {f: a.copy() for f, a in state["windows"].items()}
        if "pending_time" not in cols:  # a checkpoint from before output timestamps: END OF WINDOW
            cols["pending_time"] = np.full(len(cols["start"]), no_time, _I64)
        T = {c: a.copy() for c, a in state["trigger"].items()}
        lin = None
        if lineage:
            lc, lt = state["lineage"]
            lc = {f: a.copy() for f, a in lc.items()}
            if "output_time" not in lc:
                end = lc["end"]
                lc["output_time"] = np.where(lc["start"] == np.iinfo(_I64).min, no_time, end - 1)
            if "released" not in lc:  # a checkpoint from before retraction holds
                lc["released"] = np.zeros(len(lc["owner"]), _I64)
            lin = Lineage(lc, list(lt))
        return WindowTable(trig, aggs, key_names, state["keys"], cols, T, list(state["pending"]), lin, no_time)
