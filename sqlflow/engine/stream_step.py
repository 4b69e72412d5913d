"""One micro-batch of a stream, for any trigger, window function and accumulation mode, vectorised
over every window of every key of a bucket.

`Engine.advance` defines a micro-batch as one instant of the per-key loop (`keyloop.py`): rows
arrive (judged against `wm_prev`), processing-time timers due by `p` fire, the watermark steps to
`wm_new`; at the end of input, later timers fire at their own times and then the watermark
reaches +inf. Every window is a state machine that only its own key's arrivals touch, so each of
these phases is one vectorised step over all windows that see it:

1. arrivals: window assignment, drops (too late, closed window), sessions merged by a vectorised
   interval union per key (`_merge_sessions`), the trigger's on_elements and one evaluation for
   every window that received elements;
2. timers: one evaluation of every window whose armed timer is due by `p`;
3. watermark: one evaluation of every window whose end or expiry the watermark crosses, then the
   expiry of those past end + lateness (a final pane of what is pending);
4. end of input only: rounds of timer evaluations, each window at its own next timer, until
   none is armed; then, at its key's last timer (or `p`), every window fires at +inf and expires.

Triggers run as columns (`trigger_columns.py`, `trigger_composites.py`), windows as a table (`window_table.py`). A firing
emits a pane when the window holds unemitted input (or EMIT ... ALWAYS asks for it, as in the
loop): its pending accumulator (empty: the aggregates' identity), plus (accumulating modes) the
totals of its lineage, which retracting mode also emits as retraction rows. Panes come
out in the order the per-key loop gives them (docs/semantics.md, 4).

tests/engine/test_stream_step.py checks panes, drops, counters and the state's summary against the
per-key loop, batch by batch with the state pickled in between, on random triggers, windows,
accumulation modes, lateness and micro-batch splits.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..columns import CLOSED, DROP_CODE, EARLY, LATE, ON_TIME, RETRACTION_COLUMN, TOO_LATE
from ..errors import SqlflowExecutionError
from ..time import NEG_INF, POS_INF, saturating_add
from .aggregates import overflow_column
from . import output_time
from .kernels import order_by, segment_cummax
from .keys import factorize_keys
from .panes import TIMING_CODE, TIMINGS
from .prepared import accumulators, engine_result, prepare, when_truth
from .trigger_columns import NO_TIMER, Context
from .trigger_composites import columns_of
from .vectorised import factorize_windows
from .window_table import WindowTable, identity, replace_rows, take

_I64 = np.int64
_EARLY, _ON_TIME, _LATE = TIMING_CODE[EARLY], TIMING_CODE[ON_TIME], TIMING_CODE[LATE]


class StreamStep:
    """`Engine.advance` for one bucket, vectorised (see the module doc)."""

    def __init__(self, engine):
        plan = engine.plan
        self.engine, self.plan = engine, plan
        self.aggs = plan.aggregates
        self.keys = list(plan.keys)
        self.lateness = plan.lateness
        self.accumulating = plan.mode.accumulating
        self.retracting = plan.mode.retracting
        self.merging = engine.wfn.merging
        self.on_time_always = plan.windowing.on_time_always
        self.closing_always = plan.windowing.closing_always
        self.trig = columns_of(engine.trigger)
        self.policy = plan.output_time
        self.no_time = output_time.NONE[self.policy]

    def run(self, state, rows: pd.DataFrame, *, p: int, wm_prev: int, wm_new: int, end_of_input: bool = False,
            ordered: bool = True):
        if state and "windows" not in state:
            raise SqlflowExecutionError(
                "the stored streaming state was written by another version of sqlflow's engine",
                hint="start the query from a new checkpoint (docs/streaming.md, 10)")
        table = WindowTable.from_state(state, self.trig, self.aggs, self.keys, lineage=self.accumulating,
                                       no_time=self.no_time)
        batch = _Batch(self, table, int(p), int(wm_prev), int(wm_new))
        result = batch.run(rows, end_of_input, ordered)
        table.keep(np.flatnonzero(batch.alive))
        return result, table.to_state()

    # ------------------------------------------------------------------ what the operator asks

    def summary(self, state: dict, watermark: int):
        """(keys, live windows, next processing-time timer, next watermark value that matters)."""
        if not state:
            return 0, 0, None, None
        c = state["windows"]
        n = len(c["start"])
        t = self.trig.timer(state["trigger"], np.arange(n))
        proc = int(t.min()) if n and t.min() < NO_TIMER else None
        end = c["end"]
        marks = np.r_[end[(end > watermark) & ~c["closed"]], saturating_add(end, self.lateness)]
        keys = len(state["keys"]) if self.keys else 1
        return keys, n, proc, int(marks.min())

    def held(self, state: dict) -> int:
        """The smallest output_time at which the retractions this state will emit hold the stage's
        output watermark now (docs/semantics.md, 1.3: pending in a window that has new input, not
        released); POS_INF for none. A pane's own hold is left out: at END OF WINDOW it is never
        below the watermark."""
        if not state or not self.retracting or state.get("lineage") is None:
            return POS_INF
        lc = state["lineage"][0]
        if not len(lc["owner"]):
            return POS_INF
        active = state["windows"]["has_pending"][lc["owner"]] & (lc.get("released", 0) == 0)
        return int(lc["output_time"][active].min()) if active.any() else POS_INF


class _Batch:
    """The work of one `StreamStep.run`: the table, the instant, and the panes emitted so far."""

    def __init__(self, step: StreamStep, table: WindowTable, p, wm_prev, wm_new):
        self.step, self.W, self.trig = step, table, step.trig
        self.aggs = step.aggs
        self.p, self.wm_prev, self.wm_new = p, wm_prev, wm_new
        self.alive = np.ones(table.n, bool)
        self.emitted_at = np.full(table.n, NEG_INF, _I64)  # instant of each window's last pane in this batch
        self.pane_at = np.full((table.n, 2), -1, _I64)  # ... and where it is: (record, position)
        self.records: list[dict] = []
        self.seq = 0

    # ------------------------------------------------------------------ the instant

    def run(self, rows: pd.DataFrame, end_of_input: bool, ordered: bool):
        eng, W, p = self.step.engine, self.W, self.p
        inp = prepare(eng.plan, eng.wfn, rows, replay=False)  # every row arrives at p
        inp.at = np.full(len(inp.et), p, _I64)
        self.inputs = accumulators(eng.plan, inp, inp.at)
        n_a = len(inp.a_row)
        key_ids = W.add_keys(inp.key_frame)
        a_key = key_ids[inp.a_key] if n_a else np.empty(0, _I64)
        too_late = saturating_add(inp.a_end, self.step.lateness) <= self.wm_prev
        drop_reason = np.where(too_late, DROP_CODE[TOO_LATE], 0).astype(np.int8)
        kept = np.flatnonzero(~too_late)
        if len(kept):
            when = when_truth(eng.plan, inp, kept)[kept]
            et = inp.et[inp.a_row[kept]]
            closed = self._arrive(kept, a_key[kept], inp.a_start[kept], inp.a_end[kept], when, et)
            drop_reason[kept[closed]] = DROP_CODE[CLOSED]
        self._timers()
        self._watermark()
        if end_of_input:
            self._end()
        frame = self._frame(ordered)
        return engine_result(inp, frame, drop_reason)

    def _arrive(self, kept, k, s, e, when, et) -> np.ndarray:
        """Step 1 for the assignments `kept` (key ids k, bounds s, e, event times et); returns which
        of them were dropped for a closed window."""
        W, c = self.W, self.W.cols
        n_stored = W.n
        if self.step.merging:
            target, src, dst = self._merge_sessions(k, s, e)
        else:
            target = self._find_windows(k, s, e)
            src = dst = np.empty(0, _I64)
        closed = target < 0
        ok = np.flatnonzero(~closed)
        tgt = target[ok]
        touched = np.unique(tgt)
        # the pending input of every touched window: the new elements, then what was pending in
        # the window (or, for a merged window, in its sources, by start)
        own = touched[touched < n_stored]
        own = own[c["has_pending"][own]]
        src = np.r_[own, src].astype(_I64)
        dst = np.r_[own, dst].astype(_I64)
        if len(src):
            by_start = np.argsort(c["start"][src], kind="stable")
            src, dst = src[by_start], dst[by_start]
        pos = np.full(W.n, -1, _I64)
        pos[touched] = np.arange(len(touched))
        group = np.r_[pos[tgt], pos[dst]]
        for i, agg in enumerate(self.aggs):
            parts = [take(self.inputs[i], kept[ok])]
            if len(src):
                parts.append(take(W.pending[i], src))
            merged = agg.merge(agg.concat(parts), group, len(touched))
            W.pending[i] = replace_rows(agg, W.pending[i], touched, merged)
        if self.step.policy.of_elements:  # the output-time combination of the timely pending input
            pt = c["pending_time"]
            if len(src):
                output_time.combine_at(self.step.policy, pt, dst, pt[src])
            timely = et[ok] >= self.wm_prev
            output_time.combine_at(self.step.policy, pt, tgt[timely], et[ok][timely])
        n_new = np.bincount(tgt, minlength=W.n)
        c["count"] += n_new
        c["has_pending"][touched] = True
        self._release(touched[c["end"][touched] <= self.wm_prev])
        flags = np.zeros((W.n, when.shape[1]), bool)
        for j in range(when.shape[1]):
            flags[:, j] = np.bincount(tgt, weights=when[ok, j], minlength=W.n) > 0
        ctx = Context(now=self.p, watermark=self.wm_prev, end=c["end"], arrived=c["count"], n=n_new, when=flags)
        self.trig.on_elements(W.T, touched, ctx)
        self._evaluate(touched, ctx, on_watermark=False, wm_cur=self.wm_prev, time=self.p)
        return closed

    def _find_windows(self, k, s, e) -> np.ndarray:
        """Non-merging windows: the row of each assignment's window, new windows added; -1 for a
        closed one."""
        W = self.W
        n_stored = W.n
        gid = factorize_windows(np.r_[W.cols["key"], k], np.r_[W.cols["start"], s], np.r_[W.cols["end"], e])
        tgt = gid[n_stored:]  # stored windows are distinct: ids 0 .. n_stored - 1, in order
        n_ids = int(gid.max()) + 1
        if n_ids > n_stored:
            first = np.full(n_ids, -1, _I64)
            first[tgt[::-1]] = np.arange(len(tgt))[::-1]
            new = first[n_stored:]
            self._append(k[new], s[new], e[new])
        return np.where(W.cols["closed"][tgt], -1, tgt)

    def _merge_sessions(self, k, s, e):
        """Merging windows: the union of each key's live windows with its new ones. Returns the row
        of each assignment's (merged) window, -1 where every window it merges with is closed, and
        the (source, merged) rows of windows merged away."""
        W, c = self.W, self.W.cols
        n_stored = W.n
        has_new = np.zeros(len(W.keys), bool)
        has_new[k] = True
        rel = np.flatnonzero(has_new[c["key"]])
        nr = len(rel)
        ik, is_, ie = np.r_[c["key"][rel], k], np.r_[c["start"][rel], s], np.r_[c["end"][rel], e]
        order = order_by(ik, is_)
        sk, ss, se = ik[order], is_[order], ie[order]
        new_key = np.r_[True, sk[1:] != sk[:-1]]
        run_end = segment_cummax(se, new_key)
        brk = new_key.copy()
        brk[1:] |= ss[1:] >= run_end[:-1]  # windows that only touch do not merge
        firsts = np.flatnonzero(brk)
        gid = np.empty(len(order), _I64)
        gid[order] = np.cumsum(brk) - 1
        n_g = len(firsts)
        g_key, g_start, g_end = sk[firsts], ss[firsts], np.maximum.reduceat(se, firsts)
        og, ng = gid[:nr], gid[nr:]
        n_old = np.bincount(og, minlength=n_g)
        arriving = np.bincount(ng, minlength=n_g) > 0
        all_closed = arriving & (n_old > 0) & (np.bincount(og[c["closed"][rel]], minlength=n_g) == n_old)
        one = np.zeros(n_g, _I64)
        one[og] = rel
        same = (arriving & ~all_closed & (n_old == 1) & (c["start"][one] == g_start)
                & (c["end"][one] == g_end)) if n_stored else np.zeros(n_g, bool)
        make = np.flatnonzero(arriving & ~all_closed & ~same)
        new_rows = self._append(g_key[make], g_start[make], g_end[make])
        row_of = np.full(n_g, -1, _I64)
        row_of[same] = one[same]
        row_of[make] = new_rows
        # windows merged into a new one: trigger states, bookkeeping, lineage; they are gone
        merged_away = row_of[og] >= n_stored
        src = rel[merged_away]
        dst = row_of[og[merged_away]]
        if len(src):
            dsts, grp = np.unique(dst, return_inverse=True)
            self.trig.merge(W.T, dsts, src, grp.reshape(-1), np.ones(len(src), bool))
            np.maximum.at(c["next_index"], dst, c["next_index"][src])
            np.logical_or.at(c["had_nonearly"], dst, c["had_nonearly"][src])
            np.add.at(c["count"], dst, c["count"][src])
            c["closed"][dsts] = self.trig.finished(W.T, dsts)
            if W.lineage is not None and W.lineage.m:
                moved = np.full(W.n, -1, _I64)
                moved[src] = dst
                owner = W.lineage.cols["owner"]
                W.lineage.cols["owner"] = np.where(moved[owner] >= 0, moved[owner], owner)
            self.alive[src] = False
        with_pending = c["has_pending"][src]
        return row_of[ng], src[with_pending], dst[with_pending]

    def _append(self, key, start, end) -> np.ndarray:
        rows = self.W.append(key, start, end, self.inputs)
        self.alive = np.r_[self.alive, np.ones(len(rows), bool)]
        self.emitted_at = np.r_[self.emitted_at, np.full(len(rows), NEG_INF, _I64)]
        self.pane_at = np.r_[self.pane_at, np.full((len(rows), 2), -1, _I64)]
        return rows

    def _timers(self) -> None:
        """Step 2: windows whose timer is due by p."""
        live = np.flatnonzero(self.alive)
        due = live[self.trig.timer(self.W.T, live) <= self.p]
        if len(due):
            c = self.W.cols
            ctx = Context(now=self.p, watermark=self.wm_prev, end=c["end"], arrived=c["count"])
            self._evaluate(due, ctx, on_watermark=False, wm_cur=self.wm_prev, time=self.p)

    def _watermark(self) -> None:
        """Step 3: windows whose end or expiry the watermark crosses; then the expired ones go."""
        c, lateness = self.W.cols, self.step.lateness
        live = np.flatnonzero(self.alive)
        end = c["end"][live]
        expiry = saturating_add(end, lateness)
        lo, hi = self.wm_prev, self.wm_new
        crossing = live[((lo < end) & (end <= hi)) | ((lo < expiry) & (expiry <= hi))]
        if not len(crossing):
            return
        ctx = Context(now=self.p, watermark=hi, end=c["end"], arrived=c["count"])
        self._evaluate(crossing, ctx, on_watermark=True, wm_cur=hi, time=self.p)
        gone = crossing[hi >= saturating_add(c["end"][crossing], lateness)]
        self._expire(gone, wm_prev=lo, wm_new=hi, time=self.p)
        # input still pending once the watermark passed its window's end no longer counts for
        # EARLIEST / LATEST (output_time.py)
        passed = crossing[self.alive[crossing] & (lo < c["end"][crossing]) & (c["end"][crossing] <= hi)]
        c["pending_time"][passed] = self.step.no_time
        self._release(passed[c["has_pending"][passed]])

    def _release(self, rows) -> None:
        """The retractions pending in windows `rows` hold nothing more (docs/semantics.md, 1.3)."""
        L = self.W.lineage
        if L is not None and L.m and len(rows):
            mine = np.zeros(self.W.n, bool)
            mine[rows] = True
            L.cols["released"][mine[L.cols["owner"]]] = 1

    def _end(self) -> None:
        """Step 4: the end of input."""
        c = self.W.cols
        last = np.full(len(self.W.keys), self.p, _I64)  # each key's end of input
        fired_at = np.full(self.W.n, self.p, _I64)
        while True:
            live = np.flatnonzero(self.alive & ~c["closed"])
            t = self.trig.timer(self.W.T, live)
            armed = (t < NO_TIMER) & (t > fired_at[live])
            if not armed.any():
                break
            rows, t = live[armed], t[armed]
            fired_at[rows] = t
            np.maximum.at(last, c["key"][rows], t)
            now = np.zeros(self.W.n, _I64)
            now[rows] = t
            ctx = Context(now=now, watermark=self.wm_new, end=c["end"], arrived=c["count"])
            self._evaluate(rows, ctx, on_watermark=False, wm_cur=self.wm_new, time=t, wm_prev=self.wm_new)
        live = np.flatnonzero(self.alive)
        at = last[c["key"][live]]
        now = np.zeros(self.W.n, _I64)
        now[live] = at
        ctx = Context(now=now, watermark=POS_INF, end=c["end"], arrived=c["count"])
        self._evaluate(live, ctx, on_watermark=True, wm_cur=POS_INF, time=at, wm_prev=self.wm_new, wm_new=POS_INF)
        self._expire(live, wm_prev=self.wm_new, wm_new=POS_INF, time=at)

    # ------------------------------------------------------------------ firing and panes

    def _evaluate(self, rows, ctx, *, on_watermark: bool, wm_cur: int, time, wm_prev=None, wm_new=None) -> None:
        """One trigger evaluation of windows `rows` (time: scalar, or one per row); a firing emits
        a pane of a window holding unemitted input (or, with EMIT ... ALWAYS, its ON_TIME or closing
        firing); a finished trigger closes the window."""
        c = self.W.cols
        live = ~c["closed"][rows]
        rows = rows[live]
        if not isinstance(time, (int, np.integer)):
            time = np.asarray(time)[live]
        fired = self.trig.step(self.W.T, rows, ctx)
        hit = rows[fired]
        finished = self.trig.finished(self.W.T, hit)
        wm_prev = self.wm_prev if wm_prev is None else wm_prev
        wm_new = self.wm_new if wm_new is None else wm_new
        emit = c["has_pending"][hit]
        if self.step.closing_always or self.step.on_time_always:  # one pane per instant
            fresh = self.emitted_at[hit] != (time if isinstance(time, (int, np.integer)) else time[fired])
            if self.step.closing_always:
                emit = emit | (finished & fresh)
                self._mark_last(hit[finished & ~emit])  # this instant's pane was the window's last
            if self.step.on_time_always and on_watermark:
                end = c["end"][hit]
                emit = emit | (fresh & (wm_prev < end) & (end <= wm_new) & (end <= wm_cur) & ~c["had_nonearly"][hit])
        t = time if isinstance(time, (int, np.integer)) else time[fired][emit]
        self._emit(hit[emit], finished[emit], on_watermark=on_watermark, wm_cur=wm_cur, time=t,
                   wm_prev=wm_prev, wm_new=wm_new)
        c["closed"][hit[finished]] = True

    def _expire(self, rows, *, wm_prev, wm_new, time) -> None:
        c = self.W.cols
        last = c["has_pending"][rows] & ~c["closed"][rows]
        if self.step.closing_always:
            at = time if isinstance(time, (int, np.integer)) else np.asarray(time)
            fresh = self.emitted_at[rows] != at
            self._mark_last(rows[~last & ~c["closed"][rows] & ~fresh])
            last |= ~c["closed"][rows] & fresh
        t = time if isinstance(time, (int, np.integer)) else np.asarray(time)[last]
        self._emit(rows[last], np.ones(int(last.sum()), bool), on_watermark=True, wm_cur=wm_new, time=t,
                   wm_prev=wm_prev, wm_new=wm_new)
        self.alive[rows] = False

    def _emit(self, rows, finished, *, on_watermark, wm_cur, wm_prev, wm_new, time) -> None:
        k = len(rows)
        if not k:
            return
        W, c, aggs = self.W, self.W.cols, self.aggs
        empty = rows[~c["has_pending"][rows]]
        if len(empty):  # EMIT ... ALWAYS: a pane without new input adds nothing
            for i, agg in enumerate(aggs):
                W.pending[i] = replace_rows(agg, W.pending[i], empty, identity(agg, W.pending[i], len(empty)))
        end = c["end"][rows]
        nonearly = end <= wm_cur
        on_time = nonearly & on_watermark & (wm_prev < end) & (end <= wm_new) & ~c["had_nonearly"][rows]
        timing = np.where(nonearly, np.where(on_time, _ON_TIME, _LATE), _EARLY)
        c["had_nonearly"][rows] |= nonearly
        is_last = finished | (wm_new >= saturating_add(end, self.step.lateness))
        values_t, null_t = output_time.column(self.step.policy, start=c["start"][rows], end=end,
                                              otime=c["pending_time"][rows])
        otime = np.where(null_t, self.step.no_time, values_t)
        time = np.broadcast_to(np.asarray(time, _I64), (k,))
        self.emitted_at[rows] = time
        seq = self.seq + np.arange(k)
        self.seq += k
        values = [take(W.pending[i], rows) for i in range(len(aggs))]
        if W.lineage is not None:
            L = W.lineage
            pos = np.full(W.n, -1, _I64)
            pos[rows] = np.arange(k)
            of = pos[L.cols["owner"]]
            lin = np.flatnonzero(of >= 0)
            if len(lin):
                old = [take(L.totals[i], lin) for i in range(len(aggs))]
                group = np.r_[np.arange(k), of[lin]]
                values = [agg.merge(agg.concat([v, o]), group, k) for agg, v, o in zip(aggs, values, old)]
                if self.step.retracting:
                    self._record(c["key"][L.cols["owner"][lin]], L.cols["start"][lin], L.cols["end"][lin],
                                 L.cols["index"][lin], L.cols["timing"][lin], np.zeros(len(lin), bool),
                                 time[of[lin]], seq[of[lin]], old, L.cols["output_time"][lin], retraction=True)
                L.keep(np.flatnonzero(of < 0))
            L.add(aggs, rows, c["start"][rows], end, c["next_index"][rows], timing, otime, values)
        self._record(c["key"][rows], c["start"][rows], end, c["next_index"][rows], timing, is_last, time, seq,
                     values, otime, retraction=False)
        self.pane_at[rows, 0] = len(self.records) - 1
        self.pane_at[rows, 1] = np.arange(k)
        c["next_index"][rows] += 1
        c["has_pending"][rows] = False
        c["pending_time"][rows] = self.step.no_time

    def _mark_last(self, rows) -> None:
        """The panes these windows emitted at this instant are their last (EMIT ... CLOSING ALWAYS)."""
        at = self.pane_at[rows]
        for rec in np.unique(at[:, 0]).tolist():
            self.records[rec]["is_last"][at[at[:, 0] == rec, 1]] = True

    def _record(self, key, start, end, index, timing, is_last, time, seq, values, otime, *, retraction: bool):
        self.records.append({"key": key, "start": start, "end": end, "index": index, "timing": timing,
                             "is_last": is_last, "time": np.array(time), "seq": seq, "otime": otime,
                             "first": np.full(len(key), 0 if retraction else 1, _I64), "values": values})

    def _frame(self, ordered: bool) -> pd.DataFrame:
        """The panes (and retractions) of this batch in emission order (docs/semantics.md, 4)."""
        step, W = self.step, self.W
        recs = self.records
        cat = {f: np.concatenate([r[f] for r in recs]) if recs else np.empty(0, _I64)
               for f in ("key", "start", "end", "index", "timing", "is_last", "time", "seq", "first", "otime")}
        n = len(cat["key"])
        if recs:
            values = [agg.concat([r["values"][i] for r in recs]) for i, agg in enumerate(self.aggs)]
        else:
            values = [identity(agg, self.inputs[i], 0) for i, agg in enumerate(self.aggs)]
        if n > 1 and ordered:
            rank = np.zeros(n, _I64)
            if step.keys:
                used, inverse = np.unique(cat["key"], return_inverse=True)
                codes, _ = factorize_keys(W.keys.iloc[used].reset_index(drop=True), step.keys)
                rank = codes[inverse.reshape(-1)]
            order = np.lexsort((cat["seq"], rank, cat["end"], cat["start"], cat["first"], cat["time"]))
            cat = {f: a[order] for f, a in cat.items()}
            values = [take(v, order) for v in values]
        cols = {}
        if step.keys:
            kf = W.keys.iloc[cat["key"]]
            for k in step.keys:
                cols[k] = kf[k].array  # keeps nullable integers exact (to_numpy would make them float)
        for agg, acc in zip(self.aggs, values):
            cols[agg.output] = agg.extract(acc).array
            if agg.may_overflow:
                cols[overflow_column(agg.output)] = agg.overflow(acc)
        glob = cat["start"] == NEG_INF
        cols["window_start"] = pd.arrays.IntegerArray(cat["start"].astype(_I64), glob)
        cols["window_end"] = pd.arrays.IntegerArray(cat["end"].astype(_I64), glob.copy())
        cols["pane_index"] = cat["index"].astype(_I64)
        cols["pane_timing"] = TIMINGS[cat["timing"]]
        cols["is_last"] = cat["is_last"].astype(bool)
        cols["emit_time"] = pd.arrays.IntegerArray(cat["time"].astype(_I64), np.zeros(n, bool))
        values_t, null_t = output_time.column(step.policy, start=cat["start"], end=cat["end"],
                                              otime=cat["otime"].astype(_I64))
        cols["output_time"] = pd.arrays.IntegerArray(values_t, null_t)
        if step.retracting:
            cols[RETRACTION_COLUMN] = cat["first"] == 0
        return pd.DataFrame(cols, index=pd.RangeIndex(n))
