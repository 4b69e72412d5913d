"""One micro-batch of the default trigger, or of early PERIOD firings, over windows that never merge.

For REPEAT(WATERMARK) over FIXED, SLIDING, CUMULATE or GLOBAL windows, a micro-batch is simple:
rows not yet emitted are pending; a window emits its ON_TIME pane when the watermark passes its
end; a row for a window already past the watermark (within allowed lateness) makes it emit a LATE
pane at once; a window is dropped when the watermark passes end + lateness.

WATERMARK EARLY PERIOD d (SEQUENCE(REPEAT_UNTIL(PERIOD d, WATERMARK), REPEAT(WATERMARK))) adds an
early stage, while the watermark is before the window's end: the first row after a firing arms a
timer at the next multiple of d at or after its arrival, and the first micro-batch at or after
that time emits the pending rows as an EARLY pane (at the end of input, the armed timers fire at
their own times). The stage ends when the watermark passes the end, with the ON_TIME pane of what
is still pending; then the window behaves as under REPEAT(WATERMARK). The stage is not stored: a
window is in it exactly when its end is after the watermark of the batch before (`wm_prev` is
the `wm_new` of the call before, as the streaming operator passes it).

`Engine.advance` runs this step for such plans instead of the per-key loop (about 40x faster per
micro-batch); tests/engine/test_watermark_step.py checks it against the per-key loop, batch by
batch, with irregular batch times and periods shorter and longer than them.

Its state is columnar: the live windows of all keys as arrays (keys, bounds, pane bookkeeping,
the armed timer, the pending accumulator, and the last pane's total for accumulating modes).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import ast
from ..time import NEG_INF, POS_INF
from .keyloop import TOO_LATE
from .panes import EARLY, LATE, ON_TIME, RETRACTION_COLUMN, TIMING_CODE, TIMINGS
from .plan import ARRIVAL_TIME, EnginePlan
from .vectorised import schedule_shape

def applies(plan: EnginePlan) -> bool:
    """The default trigger REPEAT(WATERMARK), or WATERMARK EARLY PERIOD d (= SEQUENCE(REPEAT_UNTIL(
    PERIOD d, WATERMARK), REPEAT(WATERMARK))), over windows that never merge (FIXED, SLIDING,
    CUMULATE, GLOBAL): `WatermarkStep` computes exactly the per-key loop's panes, vectorised over
    every window (tests/engine/test_watermark_step.py)."""
    return (schedule_shape(plan.trigger) is not None
            and isinstance(plan.window, (ast.Fixed, ast.Sliding, ast.Cumulate, ast.Global)))


def _sat_add(x: np.ndarray, d: int) -> np.ndarray:
    """x + d with the infinities kept (int64 microseconds)."""
    x = np.asarray(x, np.int64)
    out = x + np.int64(d) if d else x.copy()
    inf = (x == NEG_INF) | (x == POS_INF)
    out[inf] = x[inf]
    if d > 0:
        out[(x > 0) & (out < 0)] = POS_INF
    return out


def _take(acc: dict, idx) -> dict:
    return {f: a[idx] for f, a in acc.items()}


class WatermarkStep:
    """One micro-batch of REPEAT(WATERMARK), or WATERMARK EARLY PERIOD d, over non-merging
    windows, vectorised (the module doc has the rules)."""

    def __init__(self, engine):
        plan = engine.plan
        self.plan = plan
        self.engine = engine
        self.aggs = plan.aggregates
        self.keys = list(plan.keys)
        self.lateness = plan.lateness
        self.accumulating = plan.mode.accumulating
        self.retracting = plan.mode.retracting
        shape = schedule_shape(plan.trigger)
        self.period = shape[1] if shape and shape[0] == "early_period" else None

    def empty_state(self) -> dict:
        return {"keys": pd.DataFrame({k: pd.Series([], dtype=object) for k in self.keys}),
                "start": np.empty(0, np.int64), "end": np.empty(0, np.int64),
                "next_index": np.empty(0, np.int64), "last_timing": np.empty(0, np.int64),
                "last_is_last": np.empty(0, bool), "has_pending": np.empty(0, bool),
                "timer": np.empty(0, np.int64),
                "pending": [None] * len(self.aggs), "total": [None] * len(self.aggs)}

    def _identity(self, i: int, n: int, like: dict) -> dict:
        return self.aggs[i].merge({f: a[:0] for f, a in like.items()}, np.empty(0, np.int64), n)

    def run(self, state: dict | None, rows: pd.DataFrame, *, p: int, wm_prev: int, wm_new: int,
            end_of_input: bool = False):
        st = state if state else self.empty_state()
        rows = rows.copy()
        rows[ARRIVAL_TIME] = p
        eng = self.engine
        inp = eng._prepare(rows, replay=True)
        inputs = eng._accumulators(inp, inp.at)
        too_late = _sat_add(inp.a_end, self.lateness) <= wm_prev
        drop_reason = np.where(too_late, TOO_LATE, "").astype(object)
        keep = np.flatnonzero(~too_late)

        # one key numbering for stored windows and new rows
        n_stored = len(st["start"])
        if self.keys:
            stored_keys, new_keys = st["keys"].reset_index(drop=True), inp.key_frame[self.keys].reset_index(drop=True)
            if not stored_keys.dtypes.equals(new_keys.dtypes):  # batches typed apart (NULLs only, ...)
                stored_keys, new_keys = stored_keys.astype(object), new_keys.astype(object)
            both = pd.concat([stored_keys, new_keys], ignore_index=True)
            ukey = both.groupby(self.keys, dropna=False, sort=False).ngroup().to_numpy()
        else:
            ukey = np.zeros(n_stored + len(inp.key_frame), np.int64)
            both = pd.DataFrame(index=range(len(ukey)))
        w_key = np.r_[ukey[:n_stored], ukey[n_stored:][inp.key_id[inp.a_row[keep]]]].astype(np.int64)
        w_start = np.r_[st["start"], inp.a_start[keep]].astype(np.int64)
        w_end = np.r_[st["end"], inp.a_end[keep]].astype(np.int64)
        order = np.lexsort((w_end, w_start, w_key))
        first = np.r_[True, (np.diff(w_key[order]) != 0) | (np.diff(w_start[order]) != 0)
                      | (np.diff(w_end[order]) != 0)] if len(order) else np.empty(0, bool)
        gid = np.empty(len(order), np.int64)
        gid[order] = np.cumsum(first) - 1
        n_w = int(first.sum())
        rep = np.empty(n_w, np.int64)  # a representative entry per window (stored entries come first)
        rep[gid[::-1]] = np.arange(len(gid))[::-1]
        start, end = w_start[rep], w_end[rep]
        key_row = w_key[rep]
        key_frame_row = np.empty(int(ukey.max()) + 1 if len(ukey) else 0, np.int64)
        key_frame_row[ukey[::-1]] = np.arange(len(ukey))[::-1]
        stored = rep < n_stored
        s_idx = np.where(stored, rep, 0)
        next_index = np.where(stored, st["next_index"][s_idx] if n_stored else 0, 0)
        had_pane = next_index > 0
        last_timing = np.where(stored, st["last_timing"][s_idx] if n_stored else 0, 0)
        last_is_last = np.where(stored, st["last_is_last"][s_idx] if n_stored else False, False)
        g_new = gid[n_stored:]
        has_new = np.bincount(g_new, minlength=n_w) > 0 if n_w else np.empty(0, bool)
        s_pend = st["has_pending"] if n_stored else np.empty(0, bool)
        has_pend = has_new.copy()
        has_pend[gid[:n_stored][s_pend]] = True

        # pending accumulators: new rows first, then what was stored (as the engine orders them)
        pend = []
        for i, agg in enumerate(self.aggs):
            parts, groups = [_take(inputs[i], keep)], [g_new]
            if n_stored and s_pend.any():
                parts.append(_take(st["pending"][i], np.flatnonzero(s_pend)))
                groups.append(gid[:n_stored][s_pend])
            pend.append(agg.merge(agg.concat(parts), np.concatenate(groups), n_w))

        # the PERIOD timer of the early stage (windows not yet past the watermark: the stage ends
        # when the watermark passes the end); rows arriving at a window without one arm it
        early_stage = end > wm_prev
        timer = np.full(n_w, POS_INF, np.int64)
        if self.period is not None:
            if n_stored and "timer" in st:
                timer = np.where(stored, st["timer"][s_idx], POS_INF)
            boundary = min(-((-p) // self.period) * self.period, POS_INF)
            timer[has_new & early_stage & (timer == POS_INF)] = boundary
        had_nonearly = had_pane & (last_timing != TIMING_CODE[EARLY])

        # arrivals (LATE panes of windows already past the watermark), due PERIOD timers (EARLY
        # panes), then the watermark step (ON_TIME panes)
        late = has_new & ~early_stage
        early = early_stage & has_pend & (timer <= p)
        on_time = ~late & ~early & has_pend & early_stage & (end <= wm_new)
        fired = late | early | on_time
        timing = np.where(early, TIMING_CODE[EARLY],
                          np.where(on_time & ~had_nonearly, TIMING_CODE[ON_TIME], TIMING_CODE[LATE]))
        expiry = _sat_add(end, self.lateness)
        is_last = fired & (wm_new >= expiry)
        emit = np.full(n_w, p, np.int64)
        rest = has_pend & ~fired
        if end_of_input:
            # timers after p fire at their own times (EARLY panes), then the watermark reaches
            # +inf: every window with pending input fires, at the key's last timer (or p)
            later = rest & (timer < POS_INF)
            timing[later] = TIMING_CODE[EARLY]
            emit[later] = timer[later]
            rest = rest & ~later
            if rest.any():
                key_end = np.full(int(key_row.max()) + 1, p, np.int64)
                np.maximum.at(key_end, key_row[later], timer[later])
                emit[rest] = key_end[key_row[rest]]
            timing = np.where(rest, np.where(had_nonearly, TIMING_CODE[LATE], TIMING_CODE[ON_TIME]), timing)
            is_last = is_last | rest
            fired = fired | rest | later
        fw = np.flatnonzero(fired)

        # pane values and the new totals
        values, totals = [], []
        for i, agg in enumerate(self.aggs):
            chunk = _take(pend[i], fw)
            if self.accumulating and had_pane[fw].any():
                prev = np.flatnonzero(had_pane[fw])
                total_prev = _take(st["total"][i], s_idx[fw[prev]])
                chunk = agg.merge(agg.concat([chunk, total_prev]), np.r_[np.arange(len(fw)), prev], len(fw))
            values.append(chunk)
            totals.append(chunk)

        frame = self._frame(fw, values, key_row, key_frame_row, both, start, end, next_index, timing, is_last, emit)
        if self.retracting:
            rw = np.flatnonzero(had_pane[fw])
            if len(rw):
                old = [_take(st["total"][i], s_idx[fw[rw]]) for i in range(len(self.aggs))]
                retr = self._frame(fw[rw], old, key_row, key_frame_row, both, start, end, next_index - 1,
                                   last_timing, np.zeros(n_w, bool), emit, retraction=True)
                frame = pd.concat([retr, frame], ignore_index=True)
        result = eng._result(inp, frame, drop_reason)

        # the windows that live on
        alive = ~(np.ones(n_w, bool) if end_of_input else (wm_new >= expiry))
        new_state = self.empty_state()
        live = np.flatnonzero(alive)
        pos_in_fired = np.full(n_w, -1, np.int64)
        pos_in_fired[fw] = np.arange(len(fw))
        new_state["keys"] = both.iloc[key_frame_row[key_row[live]]][self.keys].reset_index(drop=True) \
            if self.keys else pd.DataFrame(index=range(len(live)))
        new_state["start"], new_state["end"] = start[live], end[live]
        new_state["next_index"] = next_index[live] + fired[live]
        new_state["last_timing"] = np.where(fired[live], timing[live], last_timing[live])
        new_state["last_is_last"] = np.where(fired[live], is_last[live], last_is_last[live])
        new_state["has_pending"] = has_pend[live] & ~fired[live]
        # a firing, the end of the early stage or a due timer disarms the timer
        new_state["timer"] = np.where(fired | (end <= wm_new) | (timer <= p), POS_INF, timer)[live]
        for i in range(len(self.aggs)):
            new_state["pending"][i] = _take(pend[i], live)
            if self.accumulating:
                # the total of each live window's last pane: this batch's if it fired, else the
                # stored one (concatenated, not assigned: the batches' value types may differ)
                stored_prev = had_pane[live] & ~fired[live]
                now = fired[live]
                totals_of = [self._identity(i, len(live), pend[i]),
                             _take(st["total"][i], s_idx[live[stored_prev]]) if stored_prev.any() else None,
                             _take(totals[i], pos_in_fired[live[now]]) if now.any() else None]
                take = np.arange(len(live))
                take[stored_prev] = len(live) + np.arange(int(stored_prev.sum()))
                take[now] = len(live) + int(stored_prev.sum()) + np.arange(int(now.sum()))
                new_state["total"][i] = _take(self.aggs[i].concat([q for q in totals_of if q is not None]), take)
        return result, (new_state if len(live) else {})

    def _frame(self, w, values, key_row, key_frame_row, both, start, end, index, timing, is_last, emit,
               retraction=False) -> pd.DataFrame:
        cols = {}
        if self.keys:
            kf = both.iloc[key_frame_row[key_row[w]]].reset_index(drop=True)
            for k in self.keys:
                cols[k] = kf[k]
        for agg, acc in zip(self.aggs, values):
            cols[agg.output] = agg.extract(acc).reset_index(drop=True)
        frame = pd.DataFrame(cols, index=pd.RangeIndex(len(w)))
        glob = start[w] == NEG_INF
        frame["window_start"] = pd.Series(pd.array(start[w], dtype="Int64")).mask(glob)
        frame["window_end"] = pd.Series(pd.array(end[w], dtype="Int64")).mask(glob)
        frame["pane_index"] = index[w]
        frame["pane_timing"] = TIMINGS[timing[w]]
        frame["is_last"] = is_last[w].astype(bool)
        frame["emit_time"] = pd.array(emit[w], dtype="Int64")
        if self.retracting:
            frame[RETRACTION_COLUMN] = retraction
        return frame

    @staticmethod
    def windows(state: dict) -> int:
        return len(state["start"]) if state else 0

    def next_watermark(self, state: dict, watermark: int) -> int | None:
        if not state or not len(state["start"]):
            return None
        end = state["end"]
        marks = np.r_[end[end > watermark], _sat_add(end, self.lateness)]
        return int(marks.min())

    @staticmethod
    def next_timer(state: dict) -> int | None:
        """The earliest armed PERIOD timer of the live windows, or None."""
        timer = state.get("timer") if state else None
        if timer is None or not len(timer) or int(timer.min()) >= POS_INF:
            return None
        return int(timer.min())

    def keys_count(self, state: dict) -> int:
        if not state or not len(state["start"]):
            return 0
        if not self.keys:
            return 1
        return int(state["keys"].drop_duplicates().shape[0])
