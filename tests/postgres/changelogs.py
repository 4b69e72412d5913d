"""Random pane changelogs as a windowed query over sessions emits them, and the current result
re-aggregated from a whole changelog: the oracle of the current-results table (pure: no Spark, no
database). Loaded by this folder's conftest (test modules cannot import each other).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sqlflow.ast import AccumulationMode
from sqlflow.columns import (EMIT_TIME, IS_LAST, IS_RETRACTION, OUTPUT_TIME, PANE_INDEX, PANE_TIMING, WINDOW_END,
                             WINDOW_START)
from sqlflow.engine.current_table import TableShape

KEYS = ("user_id",)
AGGS = ("clicks", "total")
COLUMNS = (*KEYS, *AGGS, WINDOW_START, WINDOW_END, PANE_INDEX, PANE_TIMING, IS_LAST, EMIT_TIME, OUTPUT_TIME)
USERS = ("a", "b", None)


def shape(mode: AccumulationMode) -> TableShape:
    return TableShape(KEYS, AGGS, mode)


@dataclass
class Window:
    clicks: int = 0          # ACCUMULATING: the window's value; DISCARDING: what no pane has emitted yet
    total: int = 0
    panes: int = 0           # panes emitted for these bounds
    last: tuple | None = None  # the values of its last pane (what a retraction withdraws)


def simulate(ops: list[tuple[int, int, int, int]], mode: AccumulationMode, *, global_windows: bool = False
             ) -> list[pd.DataFrame]:
    """Sessions per user as clicks arrive, one firing per step. `ops` are (step, user, choice,
    amount): a click opens a session, falls in one (growing it by `amount % 3`), or between the
    first two of its user (merging them). Each step fires a pane for every window that changed;
    when retracting, first the retraction of the window's previous pane, or of the windows a
    growth or a merge replaced. Returns one frame of panes per step, in emission order."""
    retracting = mode is AccumulationMode.ACCUMULATING_AND_RETRACTING
    discarding = mode is AccumulationMode.DISCARDING
    live: dict[tuple, Window] = {}
    by_step: dict[int, list] = {}
    for step, user, choice, amount in ops:
        by_step.setdefault(step, []).append((USERS[user % len(USERS)], choice, amount))
    frames = []
    for step in sorted(by_step):
        emit = 1000 * (step + 1)
        rows: list[tuple] = []
        changed: list[tuple] = []
        gone: list[tuple[tuple, Window]] = []

        def replace(old: tuple, new: tuple, w: Window) -> None:
            if old in changed:
                changed.remove(old)
            if w.last is not None:
                gone.append((old, w))
            live[new] = Window(w.clicks, w.total)  # DISCARDING: what no pane emitted moves along

        for user, choice, amount in by_step[step]:
            mine = sorted((w for w in live if w[0] == user), key=lambda w: (w[1] or 0, w[2] or 0))
            if global_windows:
                w = (user, None, None)
            elif not mine or choice % 3 == 0:
                start = 100 * (len(live) + len(frames) + 1) + choice % 50
                w = (user, start, start + 10)
                while w in live:
                    w = (user, w[1], w[2] + 1)
            elif choice % 3 == 1 or len(mine) < 2:
                old = mine[choice % len(mine)]
                w = (user, old[1], old[2] + amount % 3)
                while w != old and w in live:
                    w = (user, w[1], w[2] + 1)
                if w != old:
                    replace(old, w, live.pop(old))
            else:
                a, b = mine[0], mine[1]
                wa, wb = live.pop(a), live.pop(b)
                w = (user, min(a[1], b[1]), max(a[2], b[2]) + 1)
                while w in live:
                    w = (user, w[1], w[2] + 1)
                for old, state in ((a, wa), (b, wb)):
                    if old in changed:
                        changed.remove(old)
                    if state.last is not None:
                        gone.append((old, state))
                live[w] = Window(wa.clicks + wb.clicks, wa.total + wb.total)
            state = live.setdefault(w, Window())
            state.clicks += 1
            state.total += amount
            if w not in changed:
                changed.append(w)
        if retracting:
            rows += [_row(old, *state.last, state.panes - 1, emit, True) for old, state in gone]
        for w in changed:
            state = live[w]
            if retracting and state.last is not None:
                rows.append(_row(w, *state.last, state.panes - 1, emit, True))
            rows.append(_row(w, state.clicks, state.total, state.panes, emit, False))
            state.last = (state.clicks, state.total)
            state.panes += 1
            if discarding:
                state.clicks = state.total = 0
        frames.append(pd.DataFrame(rows, columns=[*COLUMNS, IS_RETRACTION]))
    return frames


def _row(w: tuple, clicks: int, total: int, index: int, emit: int, retraction: bool) -> tuple:
    end = w[2]
    return (w[0], clicks, total, w[1], end, index, "EARLY", False, emit, None if end is None else end - 1, retraction)


def current_result(changelog: pd.DataFrame, mode: AccumulationMode) -> pd.DataFrame:
    """The current result re-aggregated from the whole changelog: retracting, the windows whose
    panes outnumber their retractions (by one: never more), each with its latest pane (a window
    retracted can be emitted again, as a new session can take the bounds of one a merge replaced);
    accumulating, each window's last pane; discarding, each window's panes summed, with its last
    pane's columns. "Last" is by emit time, then pane index."""
    keys = [*KEYS, WINDOW_START, WINDOW_END]
    if changelog.empty:
        return changelog[list(COLUMNS)]
    log = changelog.assign(_sign=1 - 2 * changelog[IS_RETRACTION].astype(int))
    ordered = log.sort_values([EMIT_TIME, PANE_INDEX], kind="stable")
    if mode is AccumulationMode.ACCUMULATING_AND_RETRACTING:
        net = ordered.groupby(keys, dropna=False)["_sign"].transform("sum")
        assert net.isin([0, 1]).all(), "a changelog retracting a window more often than it emitted it"
        ordered = ordered[(net > 0) & ~ordered[IS_RETRACTION]]
    elif mode is AccumulationMode.DISCARDING:
        sums = ordered.groupby(keys, dropna=False)[list(AGGS)].transform("sum")
        ordered = ordered.assign(**{a: sums[a] for a in AGGS})
    return ordered.drop_duplicates(keys, keep="last")[list(COLUMNS)]


def normalised(frame: pd.DataFrame) -> list[tuple]:
    """A table's rows as sorted tuples (NULL as None), for comparing tables held anywhere."""
    rows = frame[list(COLUMNS)].astype(object).where(frame[list(COLUMNS)].notna(), None)
    return sorted((tuple(r) for r in rows.itertuples(index=False)), key=repr)
