"""Panes: the table every engine path fills, and its assembly into output rows.

A pane is identified by its position in a `PaneTable`. Each (row, window) assignment records
the pane that first emitted it; each pane lists the panes it supersedes (its *lineage*: the
window's previous pane, or after a merge the last pane of every source window). From that:

- DISCARDING value of a pane = aggregate of the assignments it first emitted;
- ACCUMULATING value = that, merged with the accumulating values of its lineage;
- ACCUMULATING AND RETRACTING adds, before the pane, one retraction row per lineage pane.

Output order (docs/semantics.md, 4): by emit instant; within an instant retractions first, then
by window start, window end and key.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..columns import EARLY, LATE, ON_TIME, RETRACTION_COLUMN
from ..time import NEG_INF
from . import holds, kernels, output_time
from .aggregates import Grouping, fieldwise_merges, overflow_column
from .kernels import lineage_fold

TIMINGS = np.array([EARLY, ON_TIME, LATE], dtype=object)
TIMING_CODE = {EARLY: 0, ON_TIME: 1, LATE: 2}
NO_EMIT_TIME = np.iinfo(np.int64).min  # marks panes of bounded data, which have no processing time


class PaneTable:
    """Panes appended one by one (the per-key loop) or in blocks (vectorised paths)."""

    _FIELDS = ("key", "start", "end", "index", "timing", "is_last", "emit", "time")

    def __init__(self):
        self._blocks: list[dict] = []
        self._rows: dict[str, list] = {f: [] for f in self._FIELDS}
        self._parents: list[list[int]] = []
        self._gen: list[int] = []
        self.size = 0
        # the per-key loop's retraction holds (docs/semantics.md, 1.3): per pane, when its window
        # first took new input after it (its retraction is certain from then), and when the
        # watermark passed the end of the window that retraction was pending in
        self._retract_since: dict[int, int] = {}
        self._retract_release: dict[int, int] = {}

    def add(self, key, start, end, index, timing_code, is_last, emit, time, parents) -> int:
        """Append one pane; `emit` is NO_EMIT_TIME for bounded data. Returns its id."""
        pid = self.size
        r = self._rows
        r["key"].append(key)
        r["start"].append(start)
        r["end"].append(end)
        r["index"].append(index)
        r["timing"].append(timing_code)
        r["is_last"].append(is_last)
        r["emit"].append(emit)
        r["time"].append(time)
        self._parents.append(list(parents))
        self._gen.append(1 + max((self.gen_of(q) for q in parents), default=-1))
        self.size += 1
        return pid

    def hold_retraction(self, pid: int, since: int) -> None:
        """Pane `pid`'s window took new input at `since` (only the first time counts)."""
        self._retract_since.setdefault(pid, since)

    def release_retraction(self, pid: int, at: int) -> None:
        """The watermark passed the end of the window pane `pid`'s retraction is pending in."""
        self._retract_release.setdefault(pid, at)

    def mark_last(self, pid: int) -> None:
        """Pane `pid` is its window's last after all (EMIT ... CLOSING ALWAYS: the window closed at
        the instant of that pane, with nothing new)."""
        base = self.size - len(self._gen)
        if pid >= base:
            self._rows["is_last"][pid - base] = True
            return
        b = next(b for b in self._blocks if b["first"] <= pid < b["first"] + len(b["key"]))
        b["is_last"][pid - b["first"]] = True

    def gen_of(self, pid: int) -> int:
        base = self.size - len(self._gen)
        if pid >= base:
            return self._gen[pid - base]
        for b in self._blocks:
            if b["first"] <= pid < b["first"] + len(b["key"]):
                return int(b["gen"][pid - b["first"]])
        raise IndexError(pid)

    def add_block(self, *, key, start, end, index, timing, is_last, emit, time, parent, gen) -> int:
        """Append panes from arrays. `parent` is the single pane each supersedes (block-relative
        index, or -1) and `gen` its depth in the lineage. Returns the id of the block's first pane."""
        self._flush()
        first = self.size
        parent = np.asarray(parent, np.int64)
        has = parent >= 0
        self._blocks.append({
            "first": first,
            "key": np.asarray(key, np.int64), "start": np.asarray(start, np.int64),
            "end": np.asarray(end, np.int64), "index": np.asarray(index, np.int64),
            "timing": np.asarray(timing, np.int64), "is_last": np.asarray(is_last, bool),
            "emit": np.asarray(emit, np.int64), "time": np.asarray(time, np.int64),
            "parent": np.where(has, parent + first, -1), "gen": np.asarray(gen, np.int64),
        })
        self.size += len(parent)
        return first

    def retime(self, pids: np.ndarray, time: np.ndarray) -> None:
        """Move block panes `pids` to instant `time` (emit time too, for replayed panes)."""
        for b in self._blocks:
            if "parents_list" in b:
                continue
            inside = (pids >= b["first"]) & (pids < b["first"] + len(b["key"]))
            if inside.any():
                rel = pids[inside] - b["first"]
                b["time"][rel] = time[inside]
                b["emit"][rel] = np.where(b["emit"][rel] == NO_EMIT_TIME, NO_EMIT_TIME, time[inside])

    def _flush(self):
        if not self._rows["key"]:
            return
        first = self.size - len(self._rows["key"])
        block: dict[str, Any] = {f: np.asarray(v, dtype=bool if f == "is_last" else np.int64)
                                 for f, v in self._rows.items()}
        block["first"] = first
        block["parents_list"] = self._parents
        block["gen"] = np.asarray(self._gen, np.int64)
        self._blocks.append(block)
        self._rows = {f: [] for f in self._FIELDS}
        self._parents, self._gen = [], []

    def finish(self) -> dict:
        """All panes as arrays, with lineage as CSR (indptr, indices)."""
        self._flush()
        out = {f: np.concatenate([b[f] for b in self._blocks]) if self._blocks else np.empty(0, np.int64)
               for f in self._FIELDS + ("gen",)}
        if not self._blocks:
            out["is_last"] = out["is_last"].astype(bool)
        counts: list[int] = []
        flat: list[int] = []
        for b in self._blocks:
            if "parents_list" in b:
                counts.extend(len(p) for p in b["parents_list"])
                flat.extend(q for p in b["parents_list"] for q in p)
            else:
                has = b["parent"] >= 0
                counts.extend(has.astype(np.int64).tolist())
                flat.extend(b["parent"][has].tolist())
        out["indptr"] = np.r_[0, np.cumsum(np.asarray(counts, np.int64))].astype(np.int64)
        out["indices"] = np.asarray(flat, np.int64)
        n = len(out["key"])
        out["rsince"] = _scatter(n, self._retract_since, holds.NOT_HELD)
        out["rrelease"] = _scatter(n, self._retract_release, holds.NOT_HELD)
        return out


def _hold_columns(frame: pd.DataFrame, names: tuple[str, str], since: np.ndarray, until: np.ndarray) -> None:
    """Columns `names` (since, until) of a hold over [since, until); NULL where that is empty."""
    none = (since == holds.NOT_HELD) | (since >= until)
    frame[names[0]] = pd.arrays.IntegerArray(np.where(none, 0, since).astype(np.int64), none)
    frame[names[1]] = pd.arrays.IntegerArray(np.where(none, 0, until).astype(np.int64), none.copy())


def _scatter(n: int, values: dict[int, int], fill: int) -> np.ndarray:
    out = np.full(n, fill, np.int64)
    if values:
        out[np.fromiter(values.keys(), np.int64, len(values))] = np.fromiter(values.values(), np.int64, len(values))
    return out


def _take(acc: dict, idx: np.ndarray) -> dict:
    return {f: a[idx] for f, a in acc.items()}


def lineage_totals(agg, chunk: dict, gen: np.ndarray, indptr: np.ndarray, indices: np.ndarray) -> dict:
    """total(P) = chunk(P) merged with total(Q) for each Q in P's lineage.

    Most panes build on one pane (the window's previous one), so the lineage is mostly chains:
    their running totals take log2(chain length) rounds of pointer jumping, each one vectorised
    merge; panes that build on several (session merges) or on none are resolved level by level
    on top. Object-valued accumulators (decimals, sets, lists) merge row by row in Python, where
    the log factor would cost more than it saves: they go generation by generation."""
    if len(gen) == 0 or len(indices) == 0:
        return {f: a.copy() for f, a in chunk.items()}
    if any(a.dtype == object for a in chunk.values()):
        return lineage_by_generation(agg, chunk, gen, indptr, indices)
    ops = fieldwise_merges(agg, chunk) if len(gen) >= kernels.COMPILED_MIN_ROWS else None
    if ops is not None and _earlier_lineage(indptr, indices):
        # one compiled pass in pane order; merged in the order of lineage_by_generation
        return {f: lineage_fold(a, indptr, indices, ops[f]) for f, a in chunk.items()}
    n = len(gen)
    n_par = np.diff(indptr)
    single = n_par == 1
    parent = np.full(n, -1, np.int64)
    parent[single] = indices[indptr[:-1][single]]
    # run[P]: chunk(P) merged with the chunks of the single-parent panes above it in its chain
    run = {f: a.copy() for f, a in chunk.items()}
    up = np.full(n, -1, np.int64)
    ps = parent[single]
    up[single] = np.where(single[ps], ps, -1)
    active = np.flatnonzero(up >= 0)
    while active.size:
        above = up[active]
        merged = _merge_pairs(agg, _take(run, active), _take(run, above))
        for f in run:
            run[f][active] = merged[f]
        up[active] = up[above]
        active = active[up[active] >= 0]
    # root[P]: the first pane above P that does not have exactly one parent
    root = np.where(single, parent, np.arange(n))
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    # totals of the roots: panes without lineage are their chunk; merges wait for their sources
    total = {f: a.copy() for f, a in chunk.items()}
    pending = np.flatnonzero(n_par >= 2)
    done = n_par == 0
    while pending.size:
        cnt = n_par[pending]
        owner = np.repeat(np.arange(len(pending)), cnt)
        within = np.arange(len(owner)) - np.repeat(np.r_[0, np.cumsum(cnt)[:-1]], cnt)
        q = indices[np.repeat(indptr[pending], cnt) + within]
        dep = np.where(single[q], root[q], q)
        ready = np.minimum.reduceat(done[dep], np.r_[0, np.cumsum(cnt)[:-1]]).astype(bool)
        if not ready.any():
            raise AssertionError("lineage is not acyclic")
        r = pending[ready]
        take = ready[owner]
        slot = np.full(len(pending), -1, np.int64)
        slot[ready] = np.arange(len(r))
        o, qq, dd = slot[owner[take]], q[take], dep[take]
        sq = single[qq]
        parts = agg.concat([_take(chunk, r), _take(total, dd), _take(run, qq[sq])])
        group = np.r_[np.arange(len(r)), o, o[sq]]
        merged = agg.merge(parts, group, len(r))
        for f in total:
            total[f][r] = merged[f]
        done[r] = True
        pending = pending[~ready]
    chained = np.flatnonzero(single)
    merged = _merge_pairs(agg, _take(total, root[chained]), _take(run, chained))
    for f in total:
        total[f][chained] = merged[f]
    return total


def _earlier_lineage(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Every pane's lineage holds only panes created before it (PaneTable adds a pane after its
    lineage, so this holds unless stored panes came in another order)."""
    owner = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return bool(np.all(indices < owner))


def _merge_pairs(agg, a: dict, b: dict) -> dict:
    """Row i of a merged with row i of b."""
    m = len(next(iter(a.values())))
    both = agg.concat([a, b])
    order = np.arange(2 * m).reshape(2, m).T.ravel()  # a0, b0, a1, b1, ...: group ids come sorted
    return agg.merge(_take(both, order), np.repeat(np.arange(m), 2), m)


def lineage_by_generation(agg, chunk: dict, gen: np.ndarray, indptr: np.ndarray, indices: np.ndarray) -> dict:
    """lineage_totals, one generation (depth in the lineage) at a time."""
    total = {f: a.copy() for f, a in chunk.items()}
    if len(gen) == 0:
        return total
    n_par = np.diff(indptr)
    for g in range(1, int(gen.max()) + 1):
        panes = np.flatnonzero(gen == g)
        if len(panes) == 0:
            continue
        cnt = n_par[panes]
        par_group = np.repeat(np.arange(len(panes)), cnt)
        starts = np.repeat(indptr[panes], cnt)
        within = np.arange(len(par_group)) - np.repeat(np.r_[0, np.cumsum(cnt)[:-1]], cnt)
        par_idx = indices[starts + within]
        merged = agg.merge(agg.concat([_take(chunk, panes), _take(total, par_idx)]),
                           np.r_[np.arange(len(panes)), par_group], len(panes))
        for f in total:
            total[f][panes] = merged[f]
    return total


def pane_accumulators(plan, inputs: list[dict], first_pane: np.ndarray, panes: dict,
                      fixed: dict | None = None) -> list[dict]:
    """The accumulator of every pane, per aggregate.

    `inputs[i]` holds one accumulator row per assignment (aggregate i) and `first_pane` the pane
    that first emitted it (-1: not emitted). `fixed` maps pane ids to stored totals (panes of
    earlier micro-batches). DISCARDING panes hold their own input; accumulating panes add their
    lineage's totals."""
    n_panes = len(panes["key"])
    emitted = first_pane >= 0
    grouping = Grouping(first_pane[emitted])
    out = []
    for i, agg in enumerate(plan.aggregates):
        acc = {f: a[emitted] for f, a in inputs[i].items()}
        chunk = agg.merge(acc, grouping, n_panes)
        if fixed:
            # stored totals replace those panes' rows; they may come from batches whose value
            # column had another type (or none: all NULL), so they are concatenated, not assigned
            ids = np.fromiter(fixed.keys(), np.int64, len(fixed))
            both = agg.concat([chunk] + [fixed[pid][i] for pid in ids.tolist()])
            take = np.arange(n_panes)
            take[ids] = n_panes + np.arange(len(ids))
            chunk = _take(both, take)
        if plan.mode.accumulating:
            chunk = lineage_totals(agg, chunk, panes["gen"], panes["indptr"], panes["indices"])
        out.append(chunk)
    return out


def pane_frame(plan, panes: dict, accumulators: list[dict], key_frame: pd.DataFrame, *,
               hidden: np.ndarray | None = None, ordered: bool = True, final: str | None = None,
               hold: tuple[str, str] | None = None) -> pd.DataFrame:
    """Output rows: key columns, aggregates, pane columns and retractions, in emission order
    (unless ordered=False). `hidden` panes (stored from earlier micro-batches) are not output
    themselves but can be retracted. In retracting mode, `final` names a boolean column to add:
    whether the row is its window's final value, a pane that no later pane retracts (a pane is
    retracted exactly by the panes whose lineage holds it). `hold` names two columns, when each
    row's watermark hold starts and ends (NULL for none): a pane's from `panes["hold"]` to its
    emission, a retraction's from `panes["rsince"]` of the pane it withdraws to its emission or
    `panes["rrelease"]`, whichever is first (docs/semantics.md, 1.3; sqlflow.engine.holds)."""
    n_panes = len(panes["key"])
    cols: dict = {}
    for k in key_frame.columns:
        cols[k] = key_frame[k].iloc[panes["key"]].reset_index(drop=True)
    for agg, acc in zip(plan.aggregates, accumulators):
        cols[agg.output] = agg.extract(acc).reset_index(drop=True)
        if agg.may_overflow:
            cols[overflow_column(agg.output)] = agg.overflow(acc)
    frame = pd.DataFrame(cols, index=pd.RangeIndex(n_panes))
    global_window = panes["start"] == NEG_INF
    frame["window_start"] = pd.Series(pd.array(panes["start"], dtype="Int64")).mask(global_window)
    frame["window_end"] = pd.Series(pd.array(panes["end"], dtype="Int64")).mask(global_window)
    frame["pane_index"] = panes["index"]
    frame["pane_timing"] = TIMINGS[panes["timing"]]
    frame["is_last"] = panes["is_last"].astype(bool)
    frame["emit_time"] = pd.Series(pd.array(panes["emit"], dtype="Int64")).mask(panes["emit"] == NO_EMIT_TIME)
    values, null = output_time.column(plan.output_time, start=panes["start"], end=panes["end"], otime=panes["otime"])
    frame["output_time"] = pd.arrays.IntegerArray(values, null)
    if hold is not None:
        _hold_columns(frame, hold, panes["hold"], panes["emit"])
    visible = np.ones(n_panes, bool) if hidden is None else ~hidden
    sort_time, sort_key = panes["time"], panes["key"]
    sort_start = np.where(global_window, NEG_INF, panes["start"])
    sort_end = panes["end"]
    seq = np.arange(n_panes)
    first = np.zeros(n_panes, np.int64)  # 0: retraction, 1: new value
    keep = visible
    if plan.mode.retracting:
        frame[RETRACTION_COLUMN] = False
        first = np.ones(n_panes, np.int64)
        who = np.repeat(np.arange(n_panes), np.diff(panes["indptr"]))
        old = panes["indices"]
        if final is not None:
            retracted = np.zeros(n_panes, bool)
            retracted[old] = True
            frame[final] = ~retracted
        if len(old):
            retractions = frame.iloc[old].copy()
            retractions[RETRACTION_COLUMN] = True
            retractions["is_last"] = False
            if final is not None:
                retractions[final] = False
            retractions["emit_time"] = frame["emit_time"].to_numpy()[who]
            if hold is not None:
                until = np.minimum(panes["emit"][who], panes["rrelease"][old])
                _hold_columns(retractions, hold, panes["rsince"][old], until)
            frame = pd.concat([frame, retractions], ignore_index=True)
            sort_time = np.r_[sort_time, panes["time"][who]]
            sort_key = np.r_[sort_key, panes["key"][old]]
            sort_start = np.r_[sort_start, sort_start[old]]
            sort_end = np.r_[sort_end, sort_end[old]]
            seq = np.r_[seq, who]
            first = np.r_[first, np.zeros(len(old), np.int64)]
            keep = np.r_[visible, visible[who]]
    if not ordered and keep.all():
        return frame
    if ordered:
        order = np.lexsort((seq, sort_key, sort_end, sort_start, first, sort_time))
        order = order[keep[order]]
    else:
        order = np.flatnonzero(keep)
    return frame.iloc[order].reset_index(drop=True)
