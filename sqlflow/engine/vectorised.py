"""Vectorised paths of the engine for the common shapes, over many keys at once.

They compute exactly what the per-key loop in `keyloop.py` computes (the property tests in
tests/engine/test_properties.py compare them with it on random inputs), but in closed form.
Which one runs a plan, if any, is `paths.path_for`'s answer:

- `collapse`: bounded data whose trigger cannot fire before the end of input (it has no COUNT,
  WHEN or percentile part). Every window emits one ON_TIME pane at the end: a group-by.
- `watermark_schedule`: replayed data with the default trigger REPEAT(WATERMARK), or
  WATERMARK EARLY PERIOD d (= SEQUENCE(REPEAT_UNTIL(PERIOD d, WATERMARK), REPEAT(WATERMARK))),
  over non-merging windows, or sessions with a static gap whose arrived part is always one window
  (no element ever bridges two windows). Each element's pane
  time is then a function of its arrival, the window end over time and the watermark timeline:

    before the first watermark event of the window (PERIOD early panes only)
        f = ceil_d(arrival), or the first watermark event if that comes first;
    afterwards (and always, for the default trigger)
        f = the next watermark event at or after the arrival: the arrival itself if the window
            is already past the watermark then (a late pane), else the watermark crossing of the
            window's end before the next arrival, else the end of input.

  Sessions that do not fit are returned to the caller for the per-key loop. A final session's
  elements interact with no other element of its key, so that is exact, but for one thing: the
  end of input of a key comes after its last processing-time timer, in either part. The schedule
  returns each key's end of input as its part sees it (`KeyEnds`); the caller runs the per-key
  loop to the later of the two and moves the schedule's end-of-input panes to the loop's, if later.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..columns import EARLY, LATE, ON_TIME
from ..time import NEG_INF, POS_INF, saturating_add
from .kernels import lex_order, order_by, segment_cummax, segment_cummin
from .panes import NO_EMIT_TIME, TIMING_CODE, PaneTable
from .sessions import final_sessions
from .trigger_columns import ceil_to

_BOUNDARY, _LATE_ARRIVAL, _CROSSING, _END = 0, 1, 2, 3


def factorize_windows(key, start, end) -> np.ndarray:
    """Dense id per distinct (key, start, end)."""
    if len(key) == 0:
        return np.empty(0, np.int64)
    s_code, s_uni = pd.factorize(start)
    e_code, e_uni = pd.factorize(end)
    n_k = int(key.max()) + 1
    if n_k * len(s_uni) * len(e_uni) < (1 << 62):
        return pd.factorize((key * len(s_uni) + s_code) * len(e_uni) + e_code)[0].astype(np.int64)
    frame = pd.DataFrame({"k": key, "s": start, "e": end})
    return frame.groupby(["k", "s", "e"], sort=False).ngroup().to_numpy()


def collapse(a_key, a_start, a_end, merging: bool, table: PaneTable, p_end: int) -> np.ndarray:
    """One ON_TIME, last pane per window (or final session). Returns the pane of each assignment."""
    if len(a_key) == 0:
        return np.empty(0, np.int64)
    if merging:
        group, g_start, g_end = final_sessions(a_key, a_start, a_end)
        g_key = np.zeros(len(g_start), np.int64)
        g_key[group] = a_key
    else:
        group = factorize_windows(a_key, a_start, a_end)
        n_g = int(group.max()) + 1
        g_key, g_start, g_end = (np.zeros(n_g, np.int64) for _ in range(3))
        g_key[group], g_start[group], g_end[group] = a_key, a_start, a_end
    n_g = len(g_start)
    first = table.add_block(
        key=g_key, start=g_start, end=g_end, index=np.zeros(n_g, np.int64),
        timing=np.full(n_g, TIMING_CODE[ON_TIME]), is_last=np.ones(n_g, bool),
        emit=np.full(n_g, NO_EMIT_TIME), time=np.full(n_g, p_end), parent=np.full(n_g, -1),
        gen=np.zeros(n_g, np.int64))
    return group + first


class KeyEnds:
    """Where the schedule ends each key's input: `time[key]` (NEG_INF when no processing-time
    timer fired; the input then ends at p_end), and its end-of-input panes (`panes`, of `pane_key`)."""

    def __init__(self, keys: np.ndarray, time: np.ndarray, panes: np.ndarray, pane_key: np.ndarray):
        self._time = dict(zip(keys.tolist(), time.tolist()))
        self.panes, self.pane_key = panes, pane_key

    def time(self, key: int) -> int:
        return self._time.get(key, NEG_INF)


NO_ENDS = KeyEnds(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))


def watermark_schedule(*, a_key, a_at, a_start, a_end, merging: bool, timeline, lateness: int,
                       shape, p_end: int, table: PaneTable, first_pane: np.ndarray,
                       too_late: np.ndarray) -> tuple[np.ndarray, KeyEnds]:
    """Fill panes for the assignments this path can handle (see module doc).

    Writes `first_pane` and `too_late` for them; returns a mask of the assignments left for the
    per-key loop (every assignment of the sessions that do not fit), and the keys' ends of input."""
    n = len(a_key)
    left = np.zeros(n, bool)
    if n == 0:
        return left, NO_ENDS
    w_before = timeline.before_many(a_at)
    late = w_before >= saturating_add(a_end, lateness)
    keep = np.flatnonzero(~late)
    group = np.full(n, -1, np.int64)
    if merging:
        group[keep] = final_sessions(a_key[keep], a_start[keep], a_end[keep])[0]
    else:
        group[keep] = factorize_windows(a_key[keep], a_start[keep], a_end[keep])
    inst = _instants(a_key, a_at, a_start, a_end, keep, group, merging, w_before)
    if merging:
        bad = _unfit_sessions(inst, a_start, a_end, timeline, lateness)
        if bad.any():
            left[keep] = bad[group[keep]]
            inst = _without(inst, bad)
    too_late[:] = late  # a too-late element joins no session: the same drop in either part
    if not inst.n:
        return left, NO_ENDS
    panes, ends = _schedule(inst, timeline, lateness, shape, p_end, table)
    first_pane[inst.idx] = panes
    return left, ends


@dataclass(frozen=True)
class _Instants:
    """Arrival instants of every group (window, or final session), ordered by group and time.
    One entry per instant (a group's rows arrived at one processing time), but `idx` and `of`,
    which are per kept row."""

    n: int                      # number of instants
    idx: np.ndarray             # the kept rows, ordered by group and arrival
    of: np.ndarray              # each of those rows' instant
    group: np.ndarray
    at: np.ndarray              # arrival time
    start: np.ndarray           # the group's window (for sessions, the span arrived so far)
    end: np.ndarray
    w_before: np.ndarray        # the watermark just before the instant
    key: np.ndarray
    new_group: np.ndarray       # the first instant of its group
    next_at: np.ndarray         # the group's next arrival (POS_INF after its last)
    last_of_group: np.ndarray   # the group's last instant
    first_of_group: np.ndarray  # the group's first instant


def _instants(a_key, a_at, a_start, a_end, keep, group, merging, w_before) -> _Instants:
    idx = keep[order_by(group[keep], a_at[keep])]  # ties (one instant of a group) in any order
    g, a = group[idx], a_at[idx]
    new_inst = np.r_[True, (g[1:] != g[:-1]) | (a[1:] != a[:-1])] if len(idx) else np.empty(0, bool)
    inst_of = np.cumsum(new_inst) - 1
    firsts = np.flatnonzero(new_inst)
    n_inst = len(firsts)
    ig, ia = g[firsts], a[firsts]
    new_group = np.r_[True, ig[1:] != ig[:-1]] if n_inst else np.empty(0, bool)
    last_in_group = np.r_[ig[1:] != ig[:-1], True] if n_inst else np.empty(0, bool)
    start = np.minimum.reduceat(a_start[idx], firsts) if n_inst else np.empty(0, np.int64)
    end = np.maximum.reduceat(a_end[idx], firsts) if n_inst else np.empty(0, np.int64)
    if merging and n_inst:
        # the session so far is the span of everything arrived (sessions that fit, see below)
        start = segment_cummin(start, new_group)
        end = segment_cummax(end, new_group)
    return _Instants(
        n=n_inst, idx=idx, of=inst_of, group=ig, at=ia, start=start, end=end,
        w_before=w_before[idx[firsts]] if n_inst else ia,
        key=a_key[idx[firsts]] if n_inst else np.empty(0, np.int64),
        new_group=new_group, next_at=np.where(last_in_group, POS_INF, np.r_[ia[1:], POS_INF]) if n_inst else ia,
        last_of_group=np.flatnonzero(last_in_group)[np.cumsum(new_group) - 1] if n_inst else ia,
        first_of_group=np.flatnonzero(new_group)[np.cumsum(new_group) - 1] if n_inst else ia,
    )


def _without(inst: _Instants, groups: np.ndarray) -> _Instants:
    """`inst` without the groups marked in `groups` (a mask over group ids)."""
    keep_inst = ~groups[inst.group]
    keep_a = keep_inst[inst.of]
    renumber = np.cumsum(keep_inst) - 1
    sub = {f: getattr(inst, f)[keep_inst] for f in ("group", "at", "start", "end", "w_before", "key",
                                                    "new_group", "next_at")}
    n = len(sub["group"])
    last_in_group = np.r_[sub["new_group"][1:], True] if n else sub["new_group"]
    return _Instants(
        n=n, idx=inst.idx[keep_a], of=renumber[inst.of[keep_a]], **sub,
        last_of_group=np.flatnonzero(last_in_group)[np.cumsum(sub["new_group"]) - 1] if n else sub["at"],
        first_of_group=np.flatnonzero(sub["new_group"])[np.cumsum(sub["new_group"]) - 1] if n else sub["at"],
    )


def _unfit_sessions(inst: _Instants, a_start, a_end, timeline, lateness) -> np.ndarray:
    """Mask over groups: the sessions that the closed form cannot follow, those whose arrived part
    is not always a single window (a later element bridges two windows), or that are
    garbage-collected before their next element arrives (the element opens a new session)."""
    bad = np.zeros(int(inst.group.max()) + 1 if inst.n else 0, bool)
    if inst.n == 0:
        return bad
    # only a session whose elements span a gap or more can ever be split in two (any two elements
    # less than a gap apart overlap): most sessions are shorter
    gap = int(a_end[inst.idx[0]] - a_start[inst.idx[0]])  # static: per-row gaps do not come here
    last = inst.last_of_group[inst.new_group]
    wide = np.zeros(len(bad), bool)
    wide[inst.group[last][inst.end[last] - inst.start[last] >= 2 * gap]] = True
    sel = np.flatnonzero(wide[inst.group[inst.of]])
    if sel.size:
        rank = (np.arange(inst.n) - inst.first_of_group)[inst.of[sel]]  # arrival instant within the session
        g, t = inst.group[inst.of[sel]], a_start[inst.idx[sel]]
        # and only one with an element arriving after a later one (in event time)
        t_max = segment_cummax(t, np.r_[True, g[1:] != g[:-1]])
        disordered = np.zeros(len(bad), bool)
        disordered[g[t < t_max]] = True
        keep = disordered[g]
        if keep.any():
            bad[_bridged_sessions(g[keep], t[keep], rank[keep], gap)] = True
    gc = timeline.first_reaching_many(saturating_add(inst.end, lateness))
    bad[inst.group[(gc < inst.next_at) & (inst.next_at < POS_INF)]] = True
    return bad


def _bridged_sessions(group, t, rank, gap) -> np.ndarray:
    """Sessions (static gap) whose arrived elements are not always connected.

    The elements come in arrival order within each session (`group` in runs, `rank`: the arrival
    instant within the session). Two elements are connected when their times are less than `gap`
    apart. By induction, the arrived part is one span [lo, hi] of connected elements after every
    instant unless some instant breaks it: an instant's new elements left of lo must chain to lo
    (each less than `gap` from the next one, in time order, the last from lo), those right of hi
    chain to hi likewise, and those inside the span join it. A session's first instant chains
    from its earliest element. O(n) after ordering each instant's elements by time.
    """
    n = len(group)
    if n == 0:
        return np.empty(0, np.int64)
    g, tt = group, t
    new_g = np.r_[True, g[1:] != g[:-1]]
    new_i = new_g | np.r_[True, rank[1:] != rank[:-1]]
    inst = np.cumsum(new_i) - 1
    if (~new_i[1:] & (tt[1:] < tt[:-1])).any():  # an instant's elements in time order
        tt = tt[lex_order(inst, tt)]
    last_i = np.r_[new_i[1:], True]
    first_of = np.flatnonzero(new_i)
    last_of = np.flatnonzero(last_i)
    # the span before each instant: min and max time over the session's earlier instants
    run_min = segment_cummin(tt, new_g)
    run_max = segment_cummax(tt, new_g)
    before = np.r_[0, last_of[:-1]]
    opens = new_g[first_of]
    lo = np.where(opens, tt[first_of], run_min[before])[inst]
    hi = np.where(opens, tt[first_of], run_max[before])[inst]
    nxt = np.where(last_i, lo, np.minimum(np.r_[tt[1:], 0], lo))  # next link of a left element
    prv = np.where(new_i, hi, np.maximum(np.r_[0, tt[:-1]], hi))  # previous link of a right element
    broken = ((tt < lo) & (nxt - tt >= gap)) | ((tt > hi) & (tt - prv >= gap))
    return np.unique(g[broken])


def _schedule(inst: _Instants, timeline, lateness, shape, p_end, table: PaneTable) -> tuple[np.ndarray, KeyEnds]:
    """Pane of each assignment (in inst.idx order), and the keys' ends of input."""
    n = inst.n
    pos = np.arange(n)
    # watermark events per instant: a late arrival, or the crossing of the end before the next arrival
    is_late = inst.w_before >= inst.end
    crossing = timeline.first_reaching_many(inst.end)
    is_cross = ~is_late & (crossing < inst.next_at)
    has_event = is_late | is_cross
    ev_time = np.where(is_late, inst.at, crossing)
    ev_kind = np.where(is_late, _LATE_ARRIVAL, _CROSSING)
    # the next event at or after each instant, within its group
    nxt = np.minimum.accumulate(np.where(has_event, pos, n)[::-1])[::-1]
    found = nxt <= inst.last_of_group
    nxt_c = np.minimum(nxt, n - 1)
    f = np.where(found, ev_time[nxt_c], POS_INF)
    kind = np.where(found, ev_kind[nxt_c], _END)

    if shape[0] == "early_period":
        d, o = shape[1]
        j1 = nxt[inst.first_of_group]  # the group's first watermark event ends the early stage
        has_j1 = j1 <= inst.last_of_group
        j1c = np.minimum(j1, n - 1)
        t1 = np.where(has_j1, ev_time[j1c], POS_INF)
        t1_cross = has_j1 & (ev_kind[j1c] == _CROSSING)
        early = ~has_j1 | (pos < j1) | ((pos == j1) & t1_cross)
        boundary = ceil_to(inst.at, d, o)
        at_boundary = (boundary < t1) | ((boundary == t1) & t1_cross)
        f = np.where(early, np.where(at_boundary, boundary, t1), f)
        kind = np.where(early, np.where(at_boundary, _BOUNDARY, np.where(t1_cross, _CROSSING, _LATE_ARRIVAL)),
                        kind)

    # panes: runs of equal (group, f) along the instants
    new_pane = inst.new_group | np.r_[True, f[1:] != f[:-1]]
    pane_of = np.cumsum(new_pane) - 1
    pf = np.flatnonzero(new_pane)
    plast = np.r_[pf[1:], n] - 1
    n_p = len(pf)
    p_new_group = inst.new_group[pf]
    p_group_first = np.flatnonzero(p_new_group)[np.cumsum(p_new_group) - 1]
    p_index = np.arange(n_p) - p_group_first
    p_kind, p_f, p_key = kind[pf], f[pf], inst.key[pf]
    p_start, p_stop = inst.start[plast], inst.end[plast]
    # the end of input of a key comes after its last fired processing-time boundary
    by_key = pd.Series(np.where(p_kind == _BOUNDARY, p_f, NEG_INF)).groupby(p_key)
    key_end = by_key.transform("max").to_numpy()
    at_end = p_kind == _END
    p_time = np.where(at_end, np.maximum(key_end, p_end), p_f)
    # ON_TIME: the first pane of a window that is not an early boundary pane, if the watermark caused it
    nonearly = (p_kind != _BOUNDARY).astype(np.int64)
    count = np.cumsum(nonearly)
    count -= (count - nonearly)[p_group_first]
    on_time = (nonearly == 1) & (count == 1) & (p_kind != _LATE_ARRIVAL)
    timing = np.where(p_kind == _BOUNDARY, TIMING_CODE[EARLY],
                      np.where(on_time, TIMING_CODE[ON_TIME], TIMING_CODE[LATE]))
    is_last = at_end | (timeline.at_many(np.where(at_end, NEG_INF, p_f)) >= saturating_add(p_stop, lateness))
    parent = np.where(p_new_group, -1, np.arange(n_p) - 1)
    first = table.add_block(key=p_key, start=p_start, end=p_stop, index=p_index, timing=timing,
                            is_last=is_last, emit=p_time, time=p_time, parent=parent, gen=p_index)
    maxima = by_key.max()
    ends = KeyEnds(maxima.index.to_numpy(np.int64), maxima.to_numpy(np.int64),
                   first + np.flatnonzero(at_end), p_key[at_end])
    return first + pane_of[inst.of], ends
