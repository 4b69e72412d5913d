"""The engine: the Dataflow semantics of docs/semantics.md, run key by key over instants.

Input is a pandas DataFrame of rows (many keys) with the engine columns of `plan.py`; output is
one row per pane (and per retraction) plus the rows that were dropped. The work splits in three:

1. vectorised preparation: window assignment, sorting by key and arrival, instants;
2. per key, the event loop walks instants (arrivals, processing-time timers, watermark advances):
   it merges windows, runs trigger state machines, decides panes, lateness and garbage collection,
   and records for every (row, window) assignment the pane that first emits it;
3. vectorised aggregation: each pane's new input is one group of accumulators; accumulating
   panes add the totals of the panes they supersede (their lineage), generation by generation.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import ast
from ..errors import SqlflowExecutionError
from ..time import NEG_INF, POS_INF, saturating_add
from . import vectorised
from .panes import (EARLY, LATE, NO_EMIT_TIME, ON_TIME, PANE_COLUMNS, RETRACTION_COLUMN,  # noqa: F401
                    TIMING_CODE, PaneTable, assemble)
from .sessions import final_sessions
from .plan import ARRIVAL_TIME, EVENT_TIME, GAP, EnginePlan, when_column
from .triggers import Context
from .watermarks import EMPTY_TIMELINE, Timeline
from .windows import window_fn

#: reasons a (row, window) assignment is dropped
TOO_LATE = "too late"
CLOSED = "closed window"
NULL_EVENT_TIME = "null event time"
BAD_GAP = "null or non-positive session gap"

_ARRIVALS, _TIMERS, _WATERMARK = 0, 1, 2


class _Window:
    """The state of one live window of one key."""

    __slots__ = ("start", "end", "st", "pending", "lineage", "next_index", "had_nonearly",
                 "closed", "count", "expected", "timer", "alive")

    def __init__(self, start, end, st):
        self.start, self.end, self.st = start, end, st
        self.pending: list[int] = []  # assignments not yet emitted
        self.lineage: list[int] = []  # panes this window's total builds on (its last pane, or merged sources')
        self.next_index = 0
        self.had_nonearly = False
        self.closed = False
        self.count = 0
        self.expected = 0
        self.timer = None
        self.alive = True


@dataclass
class EngineResult:
    """Panes (sorted as they were emitted), dropped input rows, and counters."""

    panes: pd.DataFrame
    dropped: pd.DataFrame
    metrics: dict = field(default_factory=dict)


class Engine:
    """Runs one EnginePlan over batches of rows."""

    def __init__(self, plan: EnginePlan):
        self.plan = plan
        self.trigger = plan.compiled_trigger()
        self.wfn = window_fn(plan.window, plan.custom_windows)
        self.retracting = plan.mode.retracting
        self.accumulating = plan.mode.accumulating
        self.lateness = plan.lateness

    # ------------------------------------------------------------------ public

    def run(self, rows: pd.DataFrame, *, timeline: Timeline | None = None, replay: bool = False,
            p_end: int | None = None, reference: bool = False, ordered: bool = True) -> EngineResult:
        """Run the whole input to its end.

        replay=False: bounded data without arrival times (rows arrive in event-time order, no
        processing time, watermark -inf until the end). replay=True: rows[ARRIVAL_TIME] gives
        arrival times and `timeline` the watermark; p_end is when the input ends (default: the
        last arrival or timeline step; give it explicitly when a batch is one part of a bigger
        input). reference=True forces the per-key loop (the definition) for every key.
        ordered=False skips sorting the panes into emission order (Spark does not keep it anyway).
        """
        rows = rows.reset_index(drop=True)
        n = len(rows)
        et = rows[EVENT_TIME].to_numpy()
        null_et = pd.isna(rows[EVENT_TIME]).to_numpy()
        et = np.where(null_et, 0, et).astype(np.int64)
        if replay:
            if ARRIVAL_TIME not in rows:
                raise SqlflowExecutionError("replay needs an arrival-time column", clause="WATERMARK")
            null_at = pd.isna(rows[ARRIVAL_TIME]).to_numpy()
            at = np.where(null_at, 0, rows[ARRIVAL_TIME].to_numpy()).astype(np.int64)
            null_et = null_et | null_at
        else:
            at = et
        # bounded data without arrival times has no watermark until the end of input
        timeline = timeline if (timeline is not None and replay) else EMPTY_TIMELINE

        dropped_rows: list[np.ndarray] = []
        dropped_reason: list[str] = []
        valid = ~null_et
        if null_et.any():
            dropped_rows.append(np.flatnonzero(null_et))
            dropped_reason.append(NULL_EVENT_TIME)
        gap = None
        if self.plan.per_row_gap:
            g = pd.to_numeric(rows[GAP], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            bad = valid & ~(g > 0)
            if bad.any():
                dropped_rows.append(np.flatnonzero(bad))
                dropped_reason.append(BAD_GAP)
            valid &= ~bad
            gap = np.where(valid, np.nan_to_num(g, nan=1.0), 1).astype(np.int64)

        keys = list(self.plan.keys)
        if keys:
            key_id, key_index = _factorize_keys(rows, keys)
        else:
            key_id, key_index = np.zeros(n, np.int64), np.zeros(1 if n else 0, np.int64)

        vrows = np.flatnonzero(valid) if not valid.all() else np.arange(n)
        a_row, a_start, a_end = self.wfn.assign(et[vrows], None if gap is None else gap[vrows])
        a_row = vrows[a_row]
        a_key, a_at = key_id[a_row], at[a_row]
        n_assign = len(a_row)
        if p_end is None:
            p_end = max(int(at[valid].max()) if valid.any() else NEG_INF, timeline.last_time)

        table = PaneTable()
        first_pane = np.full(n_assign, -1, np.int64)
        drop_reason = np.full(n_assign, "", dtype=object)
        todo = np.ones(n_assign, bool)  # assignments left for the per-key loop
        if not reference:
            todo = self._vectorised(a_key, a_at, a_start, a_end, timeline, replay, p_end,
                                    table, first_pane, drop_reason)
        if todo.any():
            sub = np.flatnonzero(todo)
            sub = sub[np.lexsort((a_start[sub], et[a_row[sub]], a_at[sub], a_key[sub]))]
            when = np.zeros((n_assign, self.plan.n_when), dtype=bool)
            for i in range(self.plan.n_when):
                col = rows[when_column(i)].to_numpy(dtype=object)[a_row[sub]]
                when[sub, i] = [bool(v) if v is not None and v == v else False for v in col]
            expected = (self._expected_counts(a_key, a_start, a_end, self.wfn.merging)
                        if self.plan.uses_percentile else None)
            keys_sub = a_key[sub]
            bounds = np.flatnonzero(np.r_[True, keys_sub[1:] != keys_sub[:-1], True])
            for b in range(len(bounds) - 1):
                ids = sub[bounds[b]:bounds[b + 1]]
                self._run_key(table, int(a_key[ids[0]]), ids, a_start, a_end, a_at, when, expected,
                              first_pane, drop_reason, timeline, replay, p_end)

        order_seq = at if replay else np.zeros(n, np.int64)
        panes = assemble(self.plan, rows, table.finish(), a_row, first_pane, et, order_seq, key_index,
                         ordered=ordered)
        for reason in (TOO_LATE, CLOSED):
            if (drop_reason == reason).any():
                dropped_rows.append(np.empty(0, np.int64))
                dropped_reason.append(reason)
        dropped = _dropped_frame(dropped_rows, dropped_reason, a_row, a_start, a_end, drop_reason)
        retraction = panes[RETRACTION_COLUMN] if RETRACTION_COLUMN in panes else pd.Series(False, index=panes.index)
        metrics = {
            "input_rows": n,
            "panes": int((~retraction).sum()),
            "retractions": int(retraction.sum()),
            "dropped_null_event_time": int(null_et.sum()),
            "dropped_bad_gap": int(sum(len(r) for r, why in zip(dropped_rows, dropped_reason) if why == BAD_GAP)),
            "dropped_too_late": int((drop_reason == TOO_LATE).sum()),
            "dropped_closed_window": int((drop_reason == CLOSED).sum()),
        }
        return EngineResult(panes, dropped, metrics)

    def _vectorised(self, a_key, a_at, a_start, a_end, timeline, replay, p_end, table, first_pane,
                    drop_reason) -> np.ndarray:
        """Run the vectorised path that fits this plan; return the assignments it left over."""
        n = len(a_key)
        trigger, fn = self.plan.trigger, self.plan.window
        merging = self.wfn.merging
        custom = isinstance(fn, ast.CustomWindow)
        static = not self.plan.per_row_gap
        if not replay and vectorised.collapsible(trigger) and not custom:
            first_pane[:] = vectorised.collapse(a_key, a_start, a_end, merging, table, p_end)
            return np.zeros(n, bool)
        shape = vectorised.schedule_shape(trigger)
        if replay and shape is not None and not custom and static:
            too_late = np.zeros(n, bool)
            left = vectorised.watermark_schedule(
                a_key=a_key, a_at=a_at, a_start=a_start, a_end=a_end, merging=merging,
                timeline=timeline, lateness=self.lateness, shape=shape, p_end=p_end, table=table,
                first_pane=first_pane, too_late=too_late)
            drop_reason[too_late & ~left] = TOO_LATE
            return left
        return np.ones(n, bool)

    # ------------------------------------------------------------------ per key

    def _run_key(self, table: PaneTable, key, ids, a_start, a_end, a_at, when, expected, first_pane, drop_reason,
                 timeline: Timeline, replay: bool, p_end: int):
        trig = self.trigger
        lateness = self.lateness
        merging = self.wfn.merging
        heap: list = []
        seq = iter(range(1 << 62))
        live: dict = {}  # non-merging: (start, end) -> _Window
        sessions: list[_Window] = []  # merging: live windows sorted by start
        has_wm = len(timeline.times) > 0

        def w_before(p):
            return timeline.before(p) if has_wm else NEG_INF

        def w_at(p):
            return timeline.at(p) if has_wm else NEG_INF

        def schedule_watermark(w, p):
            # the instants at which the watermark crosses the window's end and its expiry
            if not has_wm:
                return
            for x in (w.end, saturating_add(w.end, lateness)):
                t = timeline.first_reaching(x)
                if p <= t < POS_INF:
                    heapq.heappush(heap, (t, _WATERMARK, next(seq), w))

        def schedule_timer(w):
            t = trig.timer(w.st)
            if t is not None and (w.timer is None or t < w.timer):
                w.timer = t
                heapq.heappush(heap, (t, _TIMERS, next(seq), w))

        def emit(w, p, phase, wm_cur, wm_prev, wm_new, finished):
            if w.end <= wm_cur:
                timing = ON_TIME if (phase == _WATERMARK and wm_prev < w.end <= wm_new
                                     and not w.had_nonearly) else LATE
                w.had_nonearly = True
            else:
                timing = EARLY
            is_last = finished or wm_new >= saturating_add(w.end, lateness)
            pid = table.add(key, w.start, w.end, w.next_index, TIMING_CODE[timing], is_last,
                            p if replay else NO_EMIT_TIME, p, w.lineage)
            for a in w.pending:
                first_pane[a] = pid
            w.pending = []
            w.lineage = [pid]
            w.next_index += 1

        def evaluate(w, p, phase, wm_cur, wm_prev, wm_new):
            if not w.alive or w.closed:
                return
            ctx = Context(p if replay else None, wm_cur, w.end, w.count, w.expected)
            if trig.step(w.st, ctx):
                finished = trig.finished(w.st)
                if w.pending:
                    emit(w, p, phase, wm_cur, wm_prev, wm_new, finished)
                if finished:
                    w.closed = True
            schedule_timer(w)

        def expire(w, p, wm_prev, wm_new):
            if w.pending and not w.closed:
                emit(w, p, _WATERMARK, wm_new, wm_prev, wm_new, True)
            w.alive = False
            if merging:
                sessions.remove(w)
            else:
                live.pop((w.start, w.end), None)

        # -------------------------------------------------------------- arrivals

        def arrive_fixed(i, j, p, wm_prev):
            touched = []
            for a in ids[i:j].tolist():
                s, e = int(a_start[a]), int(a_end[a])
                if saturating_add(e, lateness) <= wm_prev:
                    drop_reason[a] = TOO_LATE
                    continue
                w = live.get((s, e))
                if w is None:
                    w = _Window(s, e, trig.new())
                    if expected is not None:
                        w.expected = expected[a]
                    live[(s, e)] = w
                    schedule_watermark(w, p)
                if w.closed:
                    drop_reason[a] = CLOSED
                    continue
                w.pending.append(a)
                w.count += 1
                touched.append((w, a))
            return _group_touched(touched)

        def arrive_merging(i, j, p, wm_prev):
            news = []
            for a in ids[i:j].tolist():
                s, e = int(a_start[a]), int(a_end[a])
                if saturating_add(e, lateness) <= wm_prev:
                    drop_reason[a] = TOO_LATE
                else:
                    news.append((s, e, a))
            if not news:
                return []
            by_bounds: dict = {}
            for s, e, a in news:
                by_bounds.setdefault((s, e), []).append(a)
            existing = {(w.start, w.end): w for w in sessions}
            groups = self.wfn.merge(sorted(set(existing) | set(by_bounds)))
            grouped = {b for _, sources in groups for b in sources}
            groups = list(groups) + [(b, [b]) for b in by_bounds if b not in grouped]
            touched = []
            for (ms, me), sources in groups:
                sources = list(dict.fromkeys(tuple(b) for b in sources))
                new_as = [a for b in sources if b in by_bounds for a in by_bounds[b]]
                if not new_as:
                    continue
                olds = [existing[b] for b in sources if b in existing]
                if olds and all(w.closed for w in olds):
                    for a in new_as:
                        drop_reason[a] = CLOSED
                    continue
                if len(olds) == 1 and (olds[0].start, olds[0].end) == (ms, me):
                    w = olds[0]
                else:
                    w = _Window(ms, me, trig.merge([o.st for o in olds]) if olds else trig.new())
                    olds.sort(key=lambda o: o.start)
                    for o in olds:
                        w.pending.extend(o.pending)
                        w.lineage.extend(o.lineage)
                        w.next_index = max(w.next_index, o.next_index)
                        w.had_nonearly = w.had_nonearly or o.had_nonearly
                        w.count += o.count
                        o.alive = False
                        sessions.remove(o)
                    w.closed = trig.finished(w.st)
                    sessions.append(w)
                    schedule_watermark(w, p)
                    schedule_timer(w)
                if expected is not None:
                    w.expected = max(w.expected, max(int(expected[a]) for a in new_as))
                w.pending.extend(new_as)
                w.count += len(new_as)
                touched.append((w, new_as))
            sessions.sort(key=lambda w: w.start)
            return touched

        # -------------------------------------------------------------- the loop

        i, hi = 0, len(ids)
        at_ = a_at[ids]
        last_timer = NEG_INF  # the end of input comes after the last processing-time timer that fired
        while True:
            p_arr = int(at_[i]) if i < hi else POS_INF
            p_heap = heap[0][0] if heap else POS_INF
            p = min(p_arr, p_heap)
            if p == POS_INF:
                break
            wm_prev, wm_new = w_before(p), w_at(p)
            if p_arr == p:
                j = i + 1
                while j < hi and at_[j] == p:
                    j += 1
                touched = (arrive_merging if merging else arrive_fixed)(i, j, p, wm_prev)
                for w, assigned in sorted(touched, key=lambda t: t[0].start):
                    if not w.alive:
                        continue
                    flags = tuple(when[assigned].any(axis=0)) if when.shape[1] else ()
                    trig.on_elements(w.st, Context(p if replay else None, wm_prev, w.end, w.count, w.expected),
                                     len(assigned), flags)
                    evaluate(w, p, _ARRIVALS, wm_prev, wm_prev, wm_new)
                i = j
            due = []
            while heap and heap[0][0] == p and heap[0][1] == _TIMERS:
                due.append(heapq.heappop(heap)[3])
            for w in sorted({id(w): w for w in due}.values(), key=lambda w: w.start):
                if w.timer is not None and w.timer <= p:
                    w.timer = None
                armed = trig.timer(w.st) if w.alive else None
                if armed is not None and armed <= p:
                    last_timer = p
                    evaluate(w, p, _TIMERS, wm_prev, wm_prev, wm_new)
                elif w.alive:
                    schedule_timer(w)
            crossing = []
            while heap and heap[0][0] == p:
                crossing.append(heapq.heappop(heap)[3])
            for w in sorted({id(w): w for w in crossing if w.alive}.values(), key=lambda w: w.start):
                if w.alive:
                    evaluate(w, p, _WATERMARK, wm_new, wm_prev, wm_new)
                    if w.alive and wm_new >= saturating_add(w.end, lateness):
                        expire(w, p, wm_prev, wm_new)

        # -------------------------------------------------------------- end of input
        p = max(p_end, last_timer)
        wm_prev = w_at(p)
        remaining = sorted((sessions if merging else list(live.values())), key=lambda w: w.start)
        for w in remaining:
            if w.alive:
                evaluate(w, p, _WATERMARK, POS_INF, wm_prev, POS_INF)
                if w.alive:
                    expire(w, p, wm_prev, POS_INF)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _expected_counts(a_key, a_start, a_end, merging) -> np.ndarray:
        """Per assignment: how many elements its eventual window holds (percentile triggers)."""
        if merging:
            sid = final_sessions(a_key, a_start, a_end)[0]
        else:
            sid = pd.DataFrame({"k": a_key, "s": a_start, "e": a_end}).groupby(["k", "s", "e"]).ngroup().to_numpy()
        return np.bincount(sid)[sid] if len(sid) else np.empty(0, np.int64)


def _group_touched(touched):
    """[(window, assignment)] -> [(window, [assignments])] keeping first-seen order."""
    out: dict = {}
    for w, a in touched:
        out.setdefault(id(w), (w, []))[1].append(a)
    return list(out.values())


def _factorize_keys(rows: pd.DataFrame, keys: list[str]):
    """Key id per row, numbered in key order (so output order does not depend on input order;
    NULL keys are a key of their own, as in GROUP BY, and come last), and a row index per key id."""
    try:
        if len(keys) == 1:
            codes, _ = pd.factorize(rows[keys[0]], sort=True, use_na_sentinel=False)
        else:
            codes = rows.groupby(keys, dropna=False, sort=True).ngroup().to_numpy()
    except TypeError:  # unorderable values (mixed types, nested values): first appearance
        codes = rows.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    codes = np.asarray(codes, np.int64)
    first = np.full(codes.max() + 1 if len(codes) else 0, -1, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return codes, first


def _dropped_frame(dropped_rows, reasons, a_row, a_start, a_end, drop_reason) -> pd.DataFrame:
    parts = []
    for rows_, why in zip(dropped_rows, reasons):
        if why in (TOO_LATE, CLOSED):
            sel = drop_reason == why
            parts.append(pd.DataFrame({"row": a_row[sel], "reason": why,
                                       "window_start": a_start[sel], "window_end": a_end[sel]}))
        else:
            parts.append(pd.DataFrame({"row": rows_, "reason": why, "window_start": pd.NA, "window_end": pd.NA}))
    if not parts:
        return pd.DataFrame({"row": pd.Series([], dtype=np.int64), "reason": pd.Series([], dtype=object),
                             "window_start": pd.Series([], dtype="Int64"), "window_end": pd.Series([], dtype="Int64")})
    out = pd.concat(parts, ignore_index=True)
    out["window_start"] = out["window_start"].astype("Int64")
    out["window_end"] = out["window_end"].astype("Int64")
    return out.sort_values(["row", "window_start"], na_position="first").reset_index(drop=True)
