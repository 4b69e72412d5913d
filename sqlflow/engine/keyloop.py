"""The per-key event loop: the definition of the semantics in docs/semantics.md.

For one key it walks instants in processing-time order. At each instant: arrivals (window
assignment, session merging, lateness), then processing-time timers, then the watermark advance
(watermark triggers, garbage collection). Triggers are evaluated where the rules say; a firing
emits a pane when the window holds unemitted input, or (EMIT ... ON TIME ALWAYS) it is the
window's ON_TIME firing, or (EMIT ... CLOSING ALWAYS) it closes the window; an expiry emits a
last pane of what is pending, or (CLOSING ALWAYS) always. The options never add a second pane at
an instant where the window already emitted one: with CLOSING ALWAYS that pane is then marked
last. Panes go to a shared PaneTable; each
(row, window) assignment records the pane that first emits it.

The loop can start from stored windows (streaming state) and can stop after an instant instead
of running to the end of input.
"""
from __future__ import annotations

import heapq
import itertools

import numpy as np

from ..columns import CLOSED, EARLY, LATE, ON_TIME, TOO_LATE
from ..time import NEG_INF, POS_INF, saturating_add
from .panes import NO_EMIT_TIME, TIMING_CODE, PaneTable
from .triggers import Context

ARRIVALS, TIMERS, WATERMARK = 0, 1, 2


class Window:
    """The state of one live window of one key."""

    __slots__ = ("start", "end", "st", "pending", "lineage", "next_index", "had_nonearly",
                 "closed", "count", "expected", "timer", "alive", "emitted_at", "last_pane")

    def __init__(self, start, end, st):
        self.start, self.end, self.st = start, end, st
        self.pending: list[int] = []  # assignments not yet emitted
        self.lineage: list[int] = []  # panes its total builds on: its last pane, or merged sources'
        self.next_index = 0
        self.had_nonearly = False  # an ON_TIME or LATE pane was emitted (by it or a source)
        self.closed = False  # its trigger finished
        self.count = 0
        self.expected = 0
        self.timer = None
        self.alive = True
        self.emitted_at = None  # the instant of its last pane (EMIT ... ALWAYS: one pane per instant)
        self.last_pane = -1  # ... and its id


class KeyLoop:
    """Runs the semantics for the assignments of one key."""

    def __init__(self, engine, table: PaneTable, key: int, *, a_start, a_end, when, expected,
                 first_pane, drop_reason, timeline, replay: bool, clamp=None, stranded=None):
        self.trig = engine.trigger
        self.wfn = engine.wfn
        self.merging = engine.wfn.merging
        self.lateness = engine.lateness
        self.on_time_always = engine.plan.windowing.on_time_always
        self.closing_always = engine.plan.windowing.closing_always
        self.reopen_on_merge = engine.plan.windowing.reopen_on_merge
        self.table, self.key = table, key
        self.a_start, self.a_end, self.when, self.expected = a_start, a_end, when, expected
        self.first_pane, self.drop_reason = first_pane, drop_reason
        # assignments still pending after the instant the watermark passed their window's end:
        # they no longer count for EARLIEST / LATEST (output_time.py)
        self.stranded = stranded
        self.timeline = timeline
        self.has_wm = len(timeline.times) > 0
        self.replay = replay
        self.clamp = clamp  # sorted instants at which processing-time timers may fire (micro-batches)
        self.heap: list = []
        self.seq = itertools.count()
        self.live: dict = {}  # non-merging windows: (start, end) -> Window
        self.sessions: list[Window] = []  # merging windows, sorted by start
        self.last_timer = NEG_INF

    # ------------------------------------------------------------------ state

    def windows(self) -> list[Window]:
        ws = self.sessions if self.merging else list(self.live.values())
        return sorted((w for w in ws if w.alive), key=lambda w: (w.start, w.end))

    def load(self, window: Window, p: int) -> None:
        """Add a stored window; its timers and watermark events from `p` on are scheduled."""
        if self.merging:
            self.sessions.append(window)
            self.sessions.sort(key=lambda w: w.start)
        else:
            self.live[(window.start, window.end)] = window
        window.timer = None
        self._schedule_watermark(window, p)
        self._schedule_timer(window, p)

    # ------------------------------------------------------------------ scheduling

    def _w_before(self, p):
        return self.timeline.before(p) if self.has_wm else NEG_INF

    def _w_at(self, p):
        return self.timeline.at(p) if self.has_wm else NEG_INF

    def _schedule_watermark(self, w: Window, p: int) -> None:
        """The instants at which the watermark crosses the window's end and its expiry."""
        if not self.has_wm:
            return
        for x in (w.end, saturating_add(w.end, self.lateness)):
            t = self.timeline.first_reaching(x)
            if p <= t < POS_INF:
                heapq.heappush(self.heap, (t, WATERMARK, next(self.seq), w))

    def _schedule_timer(self, w: Window, now=NEG_INF) -> None:
        t = self.trig.timer(w.st)
        if t is None:
            return
        if self.clamp is not None:  # micro-batches: a timer fires at the first batch at or after it
            i = int(np.searchsorted(self.clamp, max(t, now)))
            if i < len(self.clamp):
                t = int(self.clamp[i])
        t = max(t, now)
        if w.timer is None or t < w.timer:
            w.timer = t
            heapq.heappush(self.heap, (t, TIMERS, next(self.seq), w))

    # ------------------------------------------------------------------ panes

    def _emit(self, w: Window, p, phase, wm_cur, wm_prev, wm_new, finished) -> None:
        if w.end <= wm_cur:
            timing = ON_TIME if (phase == WATERMARK and wm_prev < w.end <= wm_new
                                 and not w.had_nonearly) else LATE
            w.had_nonearly = True
        else:
            timing = EARLY
        is_last = finished or wm_new >= saturating_add(w.end, self.lateness)
        pid = self.table.add(self.key, w.start, w.end, w.next_index, TIMING_CODE[timing], is_last,
                             p if self.replay else NO_EMIT_TIME, p, w.lineage)
        fp = self.first_pane
        for a in w.pending:
            fp[a] = pid
        w.pending = []
        w.lineage = [pid]
        w.next_index += 1
        w.emitted_at, w.last_pane = p, pid

    def _evaluate(self, w: Window, p, phase, wm_cur, wm_prev, wm_new) -> None:
        if not w.alive or w.closed:
            return
        trig = self.trig
        ctx = Context(p if self.replay else None, wm_cur, w.end, w.count, w.expected)
        if trig.step(w.st, ctx):
            finished = trig.finished(w.st)
            if w.pending or (w.emitted_at != p and (
                    (finished and self.closing_always) or (
                        self.on_time_always and phase == WATERMARK and wm_prev < w.end <= wm_new
                        and w.end <= wm_cur and not w.had_nonearly))):
                self._emit(w, p, phase, wm_cur, wm_prev, wm_new, finished)
            elif finished and self.closing_always and w.emitted_at == p:
                self.table.mark_last(w.last_pane)  # this instant's pane was the window's last
            if finished:
                w.closed = True
        self._schedule_timer(w, p)

    def _expire(self, w: Window, p, wm_prev, wm_new) -> None:
        if not w.closed and (w.pending or (self.closing_always and w.emitted_at != p)):
            self._emit(w, p, WATERMARK, wm_new, wm_prev, wm_new, True)
        elif not w.closed and self.closing_always:
            self.table.mark_last(w.last_pane)  # this instant's pane was the window's last
        w.alive = False
        if self.merging:
            self.sessions.remove(w)
        else:
            self.live.pop((w.start, w.end), None)

    # ------------------------------------------------------------------ arrivals

    def _arrive_fixed(self, ids, p, wm_prev):
        lateness, live, trig = self.lateness, self.live, self.trig
        a_start, a_end, drop = self.a_start, self.a_end, self.drop_reason
        touched: dict = {}
        for a in ids:
            s, e = int(a_start[a]), int(a_end[a])
            if saturating_add(e, lateness) <= wm_prev:
                drop[a] = TOO_LATE
                continue
            w = live.get((s, e))
            if w is None:
                w = Window(s, e, trig.new())
                if self.expected is not None:
                    w.expected = int(self.expected[a])
                live[(s, e)] = w
                self._schedule_watermark(w, p)
            if w.closed:
                drop[a] = CLOSED
                continue
            w.pending.append(a)
            w.count += 1
            touched.setdefault(id(w), (w, []))[1].append(a)
        return list(touched.values())

    def _arrive_merging(self, ids, p, wm_prev):
        lateness, trig = self.lateness, self.trig
        by_bounds: dict = {}
        for a in ids:
            s, e = int(self.a_start[a]), int(self.a_end[a])
            if saturating_add(e, lateness) <= wm_prev:
                self.drop_reason[a] = TOO_LATE
            else:
                by_bounds.setdefault((s, e), []).append(a)
        if not by_bounds:
            return []
        existing = {(w.start, w.end): w for w in self.sessions}
        groups = self.wfn.merge(sorted(set(existing) | set(by_bounds)))
        grouped = {tuple(b) for _, sources in groups for b in sources}
        groups = list(groups) + [(b, [b]) for b in by_bounds if b not in grouped]
        touched = []
        for (ms, me), sources in groups:
            sources = list(dict.fromkeys(tuple(b) for b in sources))
            new_as = [a for b in sources if b in by_bounds for a in by_bounds[b]]
            if not new_as:
                continue
            olds = [existing[b] for b in sources if b in existing]
            reopened = False
            if olds and all(w.closed for w in olds):
                # Beam's AfterWatermark.onMerge (EMIT ... REOPEN ON MERGE): a merge into a session
                # whose end the watermark has not passed reopens it, with a fresh trigger
                reopened = self.reopen_on_merge and len(olds) < len(sources) and me > wm_prev
                if not reopened:
                    for a in new_as:
                        self.drop_reason[a] = CLOSED
                    continue
            if len(olds) == 1 and (olds[0].start, olds[0].end) == (ms, me):
                w = olds[0]
            else:
                # a merge: the new window's state comes from the windows that existed before
                state = trig.new() if reopened or not olds else trig.merge([o.st for o in olds])
                w = Window(ms, me, state)
                olds.sort(key=lambda o: o.start)
                for o in olds:
                    w.pending.extend(o.pending)
                    w.lineage.extend(o.lineage)
                    w.next_index = max(w.next_index, o.next_index)
                    w.had_nonearly = w.had_nonearly or o.had_nonearly
                    w.count += o.count
                    w.expected = max(w.expected, o.expected)
                    o.alive = False
                    self.sessions.remove(o)
                w.closed = trig.finished(w.st)
                self.sessions.append(w)
                self._schedule_watermark(w, p)
                self._schedule_timer(w, p)
            if self.expected is not None:
                w.expected = max(w.expected, max(int(self.expected[a]) for a in new_as))
            w.pending.extend(new_as)
            w.count += len(new_as)
            touched.append((w, new_as))
        self.sessions.sort(key=lambda w: w.start)
        return touched

    # ------------------------------------------------------------------ the loop

    def run(self, ids: np.ndarray, at: np.ndarray, *, until: int | None = None, p_end: int | None = None) -> None:
        """Process the arrivals `ids` (sorted by arrival time `at`) and every timer and watermark
        event, up to and including instant `until` (default: all of them). Then, if `p_end` is
        given, end the input: the watermark reaches +inf and every window is expired."""
        trig, heap = self.trig, self.heap
        i, hi = 0, len(ids)
        arrive = self._arrive_merging if self.merging else self._arrive_fixed
        limit = POS_INF if until is None else until
        while True:
            p_arr = int(at[i]) if i < hi else POS_INF
            p_heap = heap[0][0] if heap else POS_INF
            p = min(p_arr, p_heap)
            if p == POS_INF or p > limit:
                break
            wm_prev, wm_new = self._w_before(p), self._w_at(p)
            if p_arr == p:
                j = i + 1
                while j < hi and at[j] == p:
                    j += 1
                touched = arrive(ids[i:j].tolist(), p, wm_prev)
                for w, assigned in sorted(touched, key=lambda t: (t[0].start, t[0].end)):
                    if not w.alive:
                        continue
                    self._hold_retractions(w, p, wm_prev)
                    flags = tuple(self.when[assigned].any(axis=0)) if self.when.shape[1] else ()
                    ctx = Context(p if self.replay else None, wm_prev, w.end, w.count, w.expected)
                    trig.on_elements(w.st, ctx, len(assigned), flags)
                    self._evaluate(w, p, ARRIVALS, wm_prev, wm_prev, wm_new)
                i = j
            due = []
            while heap and heap[0][0] == p and heap[0][1] == TIMERS:
                due.append(heapq.heappop(heap)[3])
            for w in sorted({id(w): w for w in due}.values(), key=lambda w: (w.start, w.end)):
                if w.timer is not None and w.timer <= p:
                    w.timer = None
                armed = trig.timer(w.st) if w.alive else None
                if armed is not None and armed <= p:
                    self.last_timer = p
                    self._evaluate(w, p, TIMERS, wm_prev, wm_prev, wm_new)
                elif w.alive:
                    self._schedule_timer(w, p)
            crossing = []
            while heap and heap[0][0] == p:
                crossing.append(heapq.heappop(heap)[3])
            for w in sorted({id(w): w for w in crossing if w.alive}.values(), key=lambda w: (w.start, w.end)):
                if w.alive:
                    self._evaluate(w, p, WATERMARK, wm_new, wm_prev, wm_new)
                    if w.alive and wm_new >= saturating_add(w.end, self.lateness):
                        self._expire(w, p, wm_prev, wm_new)
                    if w.alive and w.pending and wm_prev < w.end <= wm_new:
                        if self.stranded is not None:
                            self.stranded[w.pending] = True
                        for pid in w.lineage:  # its retractions hold nothing more (docs/semantics.md, 1.3)
                            self.table.release_retraction(pid, p)
        if p_end is not None:
            self.end(max(p_end, self.last_timer))

    def _hold_retractions(self, w: Window, p: int, wm_prev: int) -> None:
        """`w` took new input at p: the retractions of the panes it supersedes are certain, and
        hold the output watermark from p while the watermark has not passed its end."""
        for pid in w.lineage:
            self.table.hold_retraction(pid, p)
            if w.end <= wm_prev:
                self.table.release_retraction(pid, p)

    def end(self, p: int) -> None:
        """End of input at instant p: the watermark reaches +inf; every window fires and expires."""
        wm_prev = self._w_at(p)
        for w in self.windows():
            if w.alive:
                self._evaluate(w, p, WATERMARK, POS_INF, wm_prev, POS_INF)
                if w.alive:
                    self._expire(w, p, wm_prev, POS_INF)
