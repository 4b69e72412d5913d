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

from ..errors import SqlflowExecutionError
from ..time import NEG_INF, POS_INF, saturating_add
from .plan import ARRIVAL_TIME, EVENT_TIME, GAP, EnginePlan, when_column
from .triggers import Context
from .watermarks import EMPTY_TIMELINE, Timeline
from .windows import window_fn

EARLY, ON_TIME, LATE = "EARLY", "ON_TIME", "LATE"

#: pane columns added to every result, in output order
PANE_COLUMNS = ("window_start", "window_end", "pane_index", "pane_timing", "is_last", "emit_time")
RETRACTION_COLUMN = "is_retraction"

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
            p_end: int | None = None) -> EngineResult:
        """Run the whole input to its end.

        replay=False: bounded data without arrival times (rows arrive in event-time order, no
        processing time, watermark -inf until the end). replay=True: rows[ARRIVAL_TIME] gives
        arrival times and `timeline` the watermark; p_end is when the input ends (default: the
        last arrival or timeline step).
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
            null_et |= null_at
        else:
            at = et
        timeline = timeline if timeline is not None else EMPTY_TIMELINE

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
            gap = np.where(valid, g, 1).astype(np.int64)

        keys = list(self.plan.keys)
        if keys:
            key_id, key_index = _factorize_keys(rows, keys)
        else:
            key_id, key_index = np.zeros(n, np.int64), np.zeros(1 if n else 0, np.int64)

        vrows = np.flatnonzero(valid)
        a_row, a_start, a_end = self.wfn.assign(et[vrows], None if gap is None else gap[vrows])
        a_row = vrows[a_row]
        order = np.lexsort((a_start, et[a_row], at[a_row], key_id[a_row]))
        a_row, a_start, a_end = a_row[order], a_start[order], a_end[order]
        n_assign = len(a_row)

        when = np.zeros((n_assign, self.plan.n_when), dtype=bool)
        for i in range(self.plan.n_when):
            col = rows[when_column(i)].to_numpy(dtype=object)
            when[:, i] = [bool(v) if v is not None and v == v else False for v in col[a_row]]

        expected = self._expected_counts(key_id, a_row, a_start, a_end) if self.plan.uses_percentile else None

        if p_end is None:
            p_end = max(int(at[valid].max()) if valid.any() else NEG_INF, timeline.last_time)
        self._out = _PaneLog()
        first_pane = np.full(n_assign, -1, np.int64)
        drop_reason = np.full(n_assign, "", dtype=object)

        a_key = key_id[a_row]
        a_at = at[a_row]
        bounds = np.flatnonzero(np.r_[True, a_key[1:] != a_key[:-1], True]) if n_assign else np.array([0])
        for b in range(len(bounds) - 1):
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            self._run_key(int(a_key[lo]), lo, hi, a_start, a_end, a_at, when, expected,
                          first_pane, drop_reason, timeline, replay, p_end)

        panes = self._assemble(rows, a_row, et, at, first_pane, key_index, keys, replay)
        late = drop_reason != ""
        for reason in (TOO_LATE, CLOSED):
            sel = drop_reason == reason
            if sel.any():
                dropped_rows.append(a_row[sel])
                dropped_reason.append(reason)
        dropped = _dropped_frame(dropped_rows, dropped_reason, a_row, a_start, a_end, drop_reason)
        metrics = {
            "input_rows": n,
            "panes": int((~panes[RETRACTION_COLUMN]).sum()) if RETRACTION_COLUMN in panes else len(panes),
            "retractions": int(panes[RETRACTION_COLUMN].sum()) if RETRACTION_COLUMN in panes else 0,
            "dropped_null_event_time": int(null_et.sum()),
            "dropped_bad_gap": int(sum(len(r) for r, why in zip(dropped_rows, dropped_reason) if why == BAD_GAP)),
            "dropped_too_late": int((drop_reason[late] == TOO_LATE).sum()),
            "dropped_closed_window": int((drop_reason[late] == CLOSED).sum()),
        }
        return EngineResult(panes, dropped, metrics)

    # ------------------------------------------------------------------ per key

    def _run_key(self, key, lo, hi, a_start, a_end, a_at, when, expected, first_pane, drop_reason,
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
            pid = self._out.add(key, w.start, w.end, w.next_index, timing, is_last,
                                p if replay else None, p, w.lineage)
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
            for a in range(i, j):
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
            for a in range(i, j):
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

        i = lo
        last_p = NEG_INF
        while True:
            p_arr = int(a_at[i]) if i < hi else POS_INF
            p_heap = heap[0][0] if heap else POS_INF
            p = min(p_arr, p_heap)
            if p == POS_INF:
                break
            last_p = p
            wm_prev, wm_new = w_before(p), w_at(p)
            if p_arr == p:
                j = i + 1
                while j < hi and a_at[j] == p:
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
        p = max(p_end, last_p)
        wm_prev = w_at(p)
        remaining = sorted((sessions if merging else list(live.values())), key=lambda w: w.start)
        for w in remaining:
            if w.alive:
                evaluate(w, p, _WATERMARK, POS_INF, wm_prev, POS_INF)
                if w.alive:
                    expire(w, p, wm_prev, POS_INF)

    # ------------------------------------------------------------------ helpers

    def _expected_counts(self, key_id, a_row, a_start, a_end) -> np.ndarray:
        """Per assignment: how many elements its (eventual) window holds, for percentile triggers."""
        k = key_id[a_row]
        if not self.wfn.merging:
            frame = pd.DataFrame({"k": k, "s": a_start, "e": a_end})
            return frame.groupby(["k", "s", "e"])["k"].transform("size").to_numpy()
        # final sessions: sort by key and start, a new session begins where start >= running max end
        order = np.lexsort((a_start, k))
        ks, s, e = k[order], a_start[order], a_end[order]
        out = np.empty(len(order), np.int64)
        if len(order):
            new_key = np.r_[True, ks[1:] != ks[:-1]]
            run_end = pd.Series(e).groupby(np.cumsum(new_key)).cummax().to_numpy()
            new_session = new_key | np.r_[True, s[1:] >= run_end[:-1]]
            sid = np.cumsum(new_session)
            sizes = np.bincount(sid)
            out[order] = sizes[sid]
        return out

    def _assemble(self, rows, a_row, et, at, first_pane, key_index, keys, replay) -> pd.DataFrame:
        log = self._out
        n_panes = len(log.key)
        emitted = first_pane >= 0
        aggs = self.plan.aggregates
        cols: dict = {}
        if keys:
            take = key_index[np.asarray(log.key, np.int64)] if n_panes else np.empty(0, np.int64)
            for k in keys:
                cols[k] = rows[k].iloc[take].reset_index(drop=True)
        values: dict = {}
        if n_panes:
            src = rows.iloc[a_row[emitted]].reset_index(drop=True)
            order_et = et[a_row[emitted]]
            order_seq = at[a_row[emitted]] if replay else np.zeros(int(emitted.sum()), np.int64)
            chunk_group = first_pane[emitted]
            parents = log.parents
            gen = np.asarray(log.gen, np.int64)
            for agg in aggs:
                acc = agg.create(src, order_et, order_seq)
                chunk = agg.merge(acc, chunk_group, n_panes)
                if self.accumulating:
                    total = _lineage_totals(agg, chunk, parents, gen, n_panes)
                else:
                    total = chunk
                values[agg.output] = agg.extract(total)
        else:
            for agg in aggs:
                values[agg.output] = agg.extract(agg.merge(agg.create(rows.iloc[:0], np.empty(0, np.int64),
                                                                      np.empty(0, np.int64)), np.empty(0, np.int64), 0))
        frame = pd.DataFrame(cols)
        for name, v in values.items():
            frame[name] = v.reset_index(drop=True) if n_panes else v
        frame["window_start"] = pd.array(log.start, dtype="Int64")
        frame["window_end"] = pd.array(log.end, dtype="Int64")
        frame["pane_index"] = np.asarray(log.index, np.int64)
        frame["pane_timing"] = np.asarray(log.timing, dtype=object)
        frame["is_last"] = np.asarray(log.is_last, bool)
        frame["emit_time"] = pd.array(log.emit, dtype="Int64")
        global_window = frame["window_start"] == NEG_INF
        frame.loc[global_window, ["window_start", "window_end"]] = pd.NA
        frame["__time"] = np.asarray(log.time, np.int64)
        frame["__key"] = np.asarray(log.key, np.int64)
        frame["__seq"] = np.arange(n_panes)
        if self.retracting:
            frame[RETRACTION_COLUMN] = False
            retract_of = [(pid, parent) for pid, ps in enumerate(log.parents) for parent in ps]
            if retract_of:
                who = np.asarray([r[0] for r in retract_of], np.int64)
                old = np.asarray([r[1] for r in retract_of], np.int64)
                retractions = frame.iloc[old].copy()
                retractions[RETRACTION_COLUMN] = True
                retractions["is_last"] = False
                retractions["emit_time"] = frame["emit_time"].to_numpy()[who]
                retractions["__time"] = frame["__time"].to_numpy()[who]
                retractions["__seq"] = frame["__seq"].to_numpy()[who]
                frame = pd.concat([frame, retractions], ignore_index=True)
            frame["__retraction_first"] = ~frame[RETRACTION_COLUMN]
            frame = frame.sort_values(["__time", "__retraction_first", "window_start", "__key", "__seq"],
                                      kind="stable", na_position="first")
            frame = frame.drop(columns=["__retraction_first"])
        else:
            frame = frame.sort_values(["__time", "window_start", "__key", "__seq"], kind="stable",
                                      na_position="first")
        frame = frame.drop(columns=["__time", "__key", "__seq"]).reset_index(drop=True)
        return frame


class _PaneLog:
    """Panes as parallel lists (cheap to append in the per-key loop)."""

    def __init__(self):
        self.key, self.start, self.end, self.index = [], [], [], []
        self.timing, self.is_last, self.emit, self.time = [], [], [], []
        self.parents, self.gen = [], []

    def add(self, key, start, end, index, timing, is_last, emit, time, parents) -> int:
        pid = len(self.key)
        self.key.append(key)
        self.start.append(start)
        self.end.append(end)
        self.index.append(index)
        self.timing.append(timing)
        self.is_last.append(is_last)
        self.emit.append(emit)
        self.time.append(time)
        self.parents.append(list(parents))
        self.gen.append(1 + max((self.gen[q] for q in parents), default=-1))
        return pid


def _group_touched(touched):
    """[(window, assignment)] -> [(window, [assignments])] keeping first-seen order."""
    out: dict = {}
    for w, a in touched:
        out.setdefault(id(w), (w, []))[1].append(a)
    return list(out.values())


def _take(acc: dict, idx: np.ndarray) -> dict:
    return {f: a[idx] for f, a in acc.items()}


def _concat(parts: list[dict]) -> dict:
    return {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}


def _lineage_totals(agg, chunk: dict, parents: list, gen: np.ndarray, n_panes: int) -> dict:
    """total(P) = chunk(P) merged with total(Q) for each Q P supersedes, one generation at a time."""
    total = {f: a.copy() for f, a in chunk.items()}
    for g in range(1, int(gen.max()) + 1 if n_panes else 0):
        panes = np.flatnonzero(gen == g)
        src_pane = [panes]
        src_group = [np.arange(len(panes))]
        par_idx, par_group = [], []
        for gi, pid in enumerate(panes.tolist()):
            for q in parents[pid]:
                par_idx.append(q)
                par_group.append(gi)
        parts = [_take(chunk, panes), _take(total, np.asarray(par_idx, np.int64))]
        groups = np.concatenate([src_group[0], np.asarray(par_group, np.int64)])
        merged = agg.merge(_concat(parts), groups, len(panes))
        for f in total:
            total[f][panes] = merged[f]
    return total


def _factorize_keys(rows: pd.DataFrame, keys: list[str]):
    """Key id per row (NULL keys are a key of their own, as in GROUP BY), and a row index per key id."""
    if len(keys) == 1:
        codes, uniques = pd.factorize(rows[keys[0]], use_na_sentinel=False)
    else:
        codes = rows.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    codes = np.asarray(codes, np.int64)
    first = np.full(codes.max() + 1 if len(codes) else 0, -1, np.int64)
    idx = np.arange(len(codes))[::-1]
    first[codes[::-1]] = idx
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
