"""The engine: the Dataflow semantics of docs/semantics.md over batches of many keys.

Input is a pandas DataFrame of rows with the engine columns of `plan.py`; output is one row per
pane (and per retraction) plus the rows that were dropped. The work splits in three:

1. vectorised preparation: drops of unusable rows, key ids, window assignment (`prepared.py`,
   which also gathers the result);
2. the panes: a vectorised path when one fits the plan (`vectorised.py`), else the per-key event
   loop (`keyloop.py`, the definition), which records for every (row, window) assignment the
   pane that first emits it;
3. vectorised aggregation and output (`panes.py`).

`run` processes a whole bounded or recorded input; `advance` processes one micro-batch of a
stream from the state the previous one left (`state.py`).
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..columns import ARRIVAL_TIME, TOO_LATE
from ..errors import SqlflowExecutionError
from ..time import NEG_INF, POS_INF, saturating_add
from . import holds, output_time, stream_step, vectorised
from .keyloop import KeyLoop, Window
from .keys import key_columns, key_tuples, sortable_key
from .panes import PaneTable, pane_accumulators, pane_frame
from .paths import BOUNDED, REPLAY, STREAM, path_for, schedule_shape
from .plan import EnginePlan, check_durations
from .prepared import EngineResult, Input, accumulators, engine_result, prepare, when_truth
from .sessions import final_sessions
from .state import EngineState, PaneRef, WindowState, next_timers
from .triggers import copy_state
from .watermarks import EMPTY_TIMELINE, Timeline
from .windows import window_fn


def _no_raw_overflow(method):
    """An int64 overflow left anywhere (a value beyond int64 microseconds in the input, a sum of
    integers beyond bigint) is reported as a sqlflow error, not as Python's OverflowError."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except OverflowError as e:
            raise SqlflowExecutionError(
                f"a value does not fit in 64 bits ({e}): times are int64 microseconds (about 292,000 "
                "years either side of 1970) and integer sums are bigint") from e
    return wrapper


class Engine:
    """Runs one EnginePlan over batches of rows."""

    def __init__(self, plan: EnginePlan):
        check_durations(plan.windowing)
        self.plan = plan
        self.trigger = plan.compiled_trigger()
        self.wfn = window_fn(plan.window, plan.custom_windows)
        self.lateness = plan.lateness
        self._stream = stream_step.StreamStep(self) if path_for(plan, input=STREAM).name == "micro-batch" else None

    # ------------------------------------------------------------------ bounded and replayed input

    @_no_raw_overflow
    def run(self, rows: pd.DataFrame, *, timeline: Timeline | None = None, replay: bool = False,
            p_end: int | None = None, reference: bool = False, ordered: bool = True,
            timer_instants: np.ndarray | None = None, final: str | None = None,
            hold: tuple[str, str] | None = None) -> EngineResult:
        """Run a whole input to its end.

        replay=False: bounded data without arrival times (rows arrive in event-time order, no
        processing time, watermark -inf until the end). replay=True: rows[ARRIVAL_TIME] gives
        arrival times and `timeline` the watermark; `p_end` is when the input ends (default: the
        last arrival or timeline step; give it when this batch is one part of a bigger input).
        reference=True forces the per-key loop (the definition) for every key. ordered=False
        skips sorting panes into emission order. `timer_instants` makes processing-time timers
        fire at the first of these instants at or after their time, as micro-batches do.
        `final` (retracting mode): add a column of that name telling which rows are final values
        (`pane_frame`). `hold` (replay): add two columns of these names, when each row's watermark hold
        starts and ends (NULL: not held; docs/semantics.md, 1.3), for the stage's output watermark.
        """
        # bounded data without arrival times has no watermark until the end of input
        timeline = timeline if (timeline is not None and replay) else EMPTY_TIMELINE
        inp = prepare(self.plan, self.wfn, rows, replay=replay)
        valid = ~(inp.null_et | inp.null_at | inp.bad_gap)
        if p_end is None:
            p_end = max(int(inp.at[valid].max()) if valid.any() else NEG_INF, timeline.last_time)
        a_key, a_at = inp.a_key, inp.a_at
        n_assign = len(inp.a_row)
        table = PaneTable()
        first_pane = np.full(n_assign, -1, np.int64)
        drop_reason = np.full(n_assign, "", dtype=object)
        stranded = np.zeros(n_assign, bool)
        todo = np.ones(n_assign, bool)
        ends = vectorised.NO_ENDS
        if not reference and timer_instants is None:
            todo, ends = self._vectorised(inp, timeline, replay, p_end, table, first_pane, drop_reason)
        if todo.any():
            sub = np.flatnonzero(todo)
            sub = sub[np.lexsort((inp.a_start[sub], inp.et[inp.a_row[sub]], a_at[sub], a_key[sub]))]
            when = when_truth(self.plan, inp, sub)
            expected = (self._expected_counts(a_key, inp.a_start, inp.a_end)
                        if self.plan.uses_percentile else None)
            clamp = None if timer_instants is None else np.unique(np.asarray(timer_instants, np.int64))
            keys_sub = a_key[sub]
            bounds = np.flatnonzero(np.r_[True, keys_sub[1:] != keys_sub[:-1], True])
            later: dict = {}
            for b in range(len(bounds) - 1):
                ids = sub[bounds[b]:bounds[b + 1]]
                key = int(a_key[ids[0]])
                loop = KeyLoop(self, table, key, a_start=inp.a_start, a_end=inp.a_end,
                               when=when, expected=expected, first_pane=first_pane,
                               drop_reason=drop_reason, timeline=timeline, replay=replay, clamp=clamp,
                               stranded=stranded)
                # the key's input ends after its last timer, wherever its windows ran
                own_end = max(p_end, ends.time(key))
                loop.run(ids, a_at[ids], p_end=own_end)
                if loop.last_timer > own_end:
                    later[key] = loop.last_timer
            if later:
                moved = np.isin(ends.pane_key, list(later))
                table.retime(ends.panes[moved], np.array([later[k] for k in ends.pane_key[moved].tolist()], np.int64))
        panes = table.finish()
        a_et = inp.et[inp.a_row]
        timely = ~stranded & (a_et >= timeline.before_many(a_at)) if replay else ~stranded
        panes["otime"] = output_time.pane_times(self.plan.output_time, len(panes["key"]), first_pane=first_pane,
                                                et=a_et, timely=timely)
        if hold is not None and replay:
            panes["hold"] = holds.pane_holds(len(panes["key"]), first_pane=first_pane, arrival=a_at, timely=timely)
            panes["rsince"], panes["rrelease"] = holds.retraction_holds(panes, first_pane=first_pane, arrival=a_at)
        order_seq = inp.at if replay else np.zeros(len(inp.at), np.int64)
        inputs = accumulators(self.plan, inp, order_seq)
        accs = pane_accumulators(self.plan, inputs, first_pane, panes)
        frame = pane_frame(self.plan, panes, accs, inp.key_frame, ordered=ordered, final=final,
                           hold=hold if replay else None)
        return engine_result(inp, frame, drop_reason)

    def _vectorised(self, inp: Input, timeline, replay, p_end, table, first_pane, drop_reason):
        """Run the vectorised path that fits this plan; return the assignments it left over and
        where it ended each key's input (`vectorised.KeyEnds`)."""
        n = len(inp.a_row)
        merging = self.wfn.merging
        path = path_for(self.plan, input=REPLAY if replay else BOUNDED).name
        if path == "collapse":
            first_pane[:] = vectorised.collapse(inp.a_key, inp.a_start, inp.a_end, merging, table, p_end)
            return np.zeros(n, bool), vectorised.NO_ENDS
        if path == "schedule":
            too_late = np.zeros(n, bool)
            left, ends = vectorised.watermark_schedule(
                a_key=inp.a_key, a_at=inp.a_at, a_start=inp.a_start, a_end=inp.a_end, merging=merging,
                timeline=timeline, lateness=self.lateness, shape=schedule_shape(self.plan.windowing),
                p_end=p_end, table=table, first_pane=first_pane, too_late=too_late)
            drop_reason[too_late] = TOO_LATE
            return left, ends
        return np.ones(n, bool), vectorised.NO_ENDS

    # ------------------------------------------------------------------ streaming

    @_no_raw_overflow
    def advance(self, state: EngineState | None, rows: pd.DataFrame, *, p: int, wm_prev: int, wm_new: int,
                end_of_input: bool = False, ordered: bool = True,
                reference: bool = False) -> tuple[EngineResult, EngineState]:
        """One micro-batch at processing time `p`: `rows` arrive (all at p), processing-time
        timers due by p fire (a timer fires at the first micro-batch at or after its time), then
        the watermark advances from `wm_prev` to `wm_new`. With end_of_input, the watermark then
        reaches +inf and every window is emitted and expired.

        Returns the panes and the new state; keys with nothing to do keep their state untouched.
        Every plan but custom merging window functions runs the vectorised step over all windows
        at once (`stream_step.py`, columnar state); reference=True forces the per-key loop.
        """
        if self._stream is not None and not reference:
            return self._stream.run(state or None, rows, p=p, wm_prev=wm_prev, wm_new=wm_new,
                                    end_of_input=end_of_input, ordered=ordered)
        state = dict(state or {})
        rows = rows.copy()
        rows[ARRIVAL_TIME] = p
        keys = list(self.plan.keys)
        row_keys = key_tuples(rows, keys)
        due = [k for k, ws in state.items()
               if end_of_input or self._due(ws, p, wm_prev, wm_new)]
        all_keys = list(dict.fromkeys(list(dict.fromkeys(row_keys)) + due))
        try:
            all_keys.sort(key=sortable_key)
        except TypeError:
            pass
        key_pos = {k: i for i, k in enumerate(all_keys)}
        key_frame = key_columns(all_keys, keys, rows) if keys else pd.DataFrame(index=range(len(all_keys)))
        inp = prepare(self.plan, self.wfn, rows, replay=True, key_id=np.fromiter((key_pos[k] for k in row_keys), np.int64,
                                                                    len(row_keys)), key_frame=key_frame)
        # W is wm_prev before this instant and wm_new after its watermark step
        timeline = Timeline.from_steps([p - 1, p], [wm_prev, wm_new])
        n_new = len(inp.a_row)
        table = PaneTable()
        # stored pending input becomes pseudo assignments after the new ones
        pseudo_acc: list[list] = [[] for _ in self.plan.aggregates]
        pseudo_start: list[int] = []
        pseudo_end: list[int] = []
        pseudo_time: list[int] = []  # their output-time combination (output_time.py)
        fixed: dict = {}
        fixed_time: dict = {}
        hidden: list[int] = []
        loops: dict = {}
        windows_of: dict = {}
        for k in all_keys:
            kid = key_pos[k]
            ws = []
            for s in state.get(k, ()):
                w = Window(s.start, s.end, copy_state(s.trigger))  # the caller's state stays as it was
                w.next_index, w.had_nonearly, w.closed, w.count = s.next_index, s.had_nonearly, s.closed, s.count
                for ref in s.lineage:
                    pid = table.add(kid, ref.start, ref.end, ref.index, ref.timing, ref.is_last, p, p, ())
                    fixed[pid] = ref.total
                    fixed_time[pid] = ref.output_time
                    hidden.append(pid)
                    w.lineage.append(pid)
                if s.pending is not None:
                    w.pending.append(n_new + len(pseudo_start))
                    pseudo_start.append(s.start)
                    pseudo_end.append(s.end)
                    pseudo_time.append(s.pending_time)
                    for i, acc in enumerate(s.pending):
                        pseudo_acc[i].append(acc)
                ws.append(w)
            windows_of[kid] = ws
        n_assign = n_new + len(pseudo_start)
        first_pane = np.full(n_assign, -1, np.int64)
        drop_reason = np.full(n_assign, "", dtype=object)
        stranded = np.zeros(n_assign, bool)
        policy = self.plan.output_time
        a_et = np.r_[inp.et[inp.a_row], np.asarray(pseudo_time, np.int64)]
        a_timely = np.r_[a_et[:n_new] >= wm_prev, a_et[n_new:] != output_time.NONE[policy]]
        a_start = np.r_[inp.a_start, np.asarray(pseudo_start, np.int64)]
        a_end = np.r_[inp.a_end, np.asarray(pseudo_end, np.int64)]
        a_key = inp.a_key
        order = np.lexsort((inp.a_start, inp.et[inp.a_row], a_key))
        when = np.zeros((n_assign, self.plan.n_when), dtype=bool)
        when[:n_new] = when_truth(self.plan, inp, np.arange(n_new))[:n_new] if n_new else when[:0]
        bounds = {}
        ks = a_key[order]
        cuts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1], True]) if len(ks) else np.array([0])
        for b in range(len(cuts) - 1):
            bounds[int(ks[cuts[b]])] = order[cuts[b]:cuts[b + 1]]
        empty = np.empty(0, np.int64)
        for k in all_keys:
            kid = key_pos[k]
            loop = KeyLoop(self, table, kid, a_start=a_start, a_end=a_end, when=when, expected=None,
                           first_pane=first_pane, drop_reason=drop_reason, timeline=timeline, replay=True,
                           clamp=np.asarray([p], np.int64), stranded=stranded)
            for w in windows_of[kid]:
                loop.load(w, p)
            ids = bounds.get(kid, empty)
            loop.run(ids, np.full(len(ids), p, np.int64), until=p)
            if end_of_input:  # later timers fire at their own times, then the watermark reaches +inf
                loop.run(empty, empty, p_end=p)
            loops[kid] = loop
        panes = table.finish()
        a_timely &= ~stranded
        panes["otime"] = output_time.pane_times(policy, len(panes["key"]), first_pane=first_pane, et=a_et,
                                                timely=a_timely)
        for pid, t in fixed_time.items():
            panes["otime"][pid] = t
        inputs = accumulators(self.plan, inp, inp.at)
        for i, agg in enumerate(self.plan.aggregates):
            if pseudo_acc[i]:
                inputs[i] = agg.concat([inputs[i], *pseudo_acc[i]])
        accs = pane_accumulators(self.plan, inputs, first_pane, panes, fixed)
        hidden_mask = np.zeros(len(panes["key"]), bool)
        hidden_mask[hidden] = True
        frame = pane_frame(self.plan, panes, accs, key_frame, hidden=hidden_mask, ordered=ordered)
        # the new state of every key that ran
        new_state = {k: v for k, v in state.items() if k not in key_pos}
        live = {k: loops[key_pos[k]].windows() for k in all_keys}
        pending = self._pending_accumulators([w for ws in live.values() for w in ws], inputs)
        values, null = output_time.column(policy, start=panes["start"], end=panes["end"], otime=panes["otime"])
        pane_time = np.where(null, output_time.NONE[policy], values)
        for k, ws in live.items():
            if ws:
                new_state[k] = [self._snapshot(w, panes, accs, pending, pane_time,
                                               output_time.combine(policy, a_et[[a for a in w.pending if a_timely[a]]]))
                                for w in ws]
        result = engine_result(inp, frame, drop_reason[:n_new])
        return result, new_state

    def state_summary(self, state, watermark: int):
        """(keys, live windows, next processing-time timer, next watermark value that matters) of a
        state `advance` returned: what a streaming operator needs to know when to call again."""
        if not state:
            return 0, 0, None, None
        if self._stream is not None and "windows" in state:
            return self._stream.summary(state, watermark)
        windows = [w for ws in state.values() for w in ws]
        proc, mark = next_timers(windows, self.trigger, self.lateness, watermark) if windows else (None, None)
        return len(state), len(windows), proc, mark

    def held(self, state) -> int:
        """The smallest output_time at which a state `advance` returned holds the stage's output
        watermark (`StreamStep.held`; POS_INF: nothing held). The output watermark after a
        micro-batch is then the running maximum of min(its watermark, this over every bucket)."""
        if not state:
            return POS_INF
        if self._stream is None or "windows" not in state:
            raise SqlflowExecutionError("the output watermark of a stream is computed by the vectorised "
                                        "micro-batch step only (not for custom merging window functions)")
        return self._stream.held(state)

    def _due(self, windows: list[WindowState], p, wm_prev, wm_new) -> bool:
        """A stored key must run at this instant: a timer is due, or the watermark crosses one of
        its windows' ends or expiries."""
        for w in windows:
            t = self.trigger.timer(w.trigger)
            if t is not None and t <= p:
                return True
            if wm_prev < w.end <= wm_new or wm_prev < saturating_add(w.end, self.lateness) <= wm_new:
                return True
        return False

    def _pending_accumulators(self, windows: list[Window], inputs: list[dict]) -> dict:
        """id(window) -> its unemitted input as one accumulator per aggregate: one merge for all.

        The input merges in assignment order, as a pane's does (`pane_accumulators`): elements equal
        in event and arrival time (one batch) then keep their row order whether the pane that
        emits them comes in this batch or a later one (collect_list and first/last see it)."""
        with_pending = [w for w in windows if w.pending]
        if not with_pending:
            return {}
        ids = np.fromiter((a for w in with_pending for a in sorted(w.pending)), np.int64)
        group = np.repeat(np.arange(len(with_pending)), [len(w.pending) for w in with_pending])
        merged = [agg.merge({f: a[f][ids] for f in a}, group, len(with_pending))
                  for agg, a in zip(self.plan.aggregates, inputs)]
        return {id(w): tuple({f: m[f][i:i + 1] for f in m} for m in merged) for i, w in enumerate(with_pending)}

    def _snapshot(self, w: Window, panes: dict, accs: list[dict], pending: dict, pane_time: np.ndarray,
                  pending_time: int) -> WindowState:
        keep_lineage = self.plan.mode.accumulating  # discarding panes never build on earlier ones
        lineage = [] if not keep_lineage else [
            PaneRef(int(panes["start"][q]), int(panes["end"][q]), int(panes["index"][q]),
                    int(panes["timing"][q]), bool(panes["is_last"][q]),
                    tuple({f: a[f][q:q + 1] for f in a} for a in accs), int(pane_time[q]))
            for q in w.lineage]
        return WindowState(w.start, w.end, w.st, w.next_index, w.had_nonearly, w.closed, w.count,
                           lineage, pending.get(id(w)), pending_time)

    def _expected_counts(self, a_key, a_start, a_end) -> np.ndarray:
        """Per assignment: how many elements its eventual window holds (percentile triggers)."""
        if self.wfn.merging:
            sid = final_sessions(a_key, a_start, a_end)[0]
        else:
            sid = vectorised.factorize_windows(a_key, a_start, a_end)
        return np.bincount(sid)[sid] if len(sid) else np.empty(0, np.int64)


