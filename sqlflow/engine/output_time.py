"""Output timestamps: the event time each pane carries (column `output_time`, docs/semantics.md, 8).

END OF WINDOW (the default) and START OF WINDOW come from the pane's window. EARLIEST and LATEST
come from the pane's **timely new elements**: the elements the pane emits first (its own input,
in every accumulation mode, as in Beam, whose holds are released at each firing) that arrived
not behind the input watermark and whose window had not passed the watermark at an earlier
instant while they waited. A pane without such elements carries its window's END OF WINDOW (so a
LATE pane always does). That is what makes a pane that is not LATE never late downstream: its
timely elements held the stage's output watermark at their event time until it was emitted.

Every path works the same way: per assignment, its event time and whether it is timely; per
pane, the minimum or maximum over the timely assignments it first emitted (`pane_times`);
then the policy turns that and the window into the column (`column`). A stream keeps, per live
window, that minimum or maximum of its pending input (`NONE` while there is none).

>>> from sqlflow import ast
>>> E = ast.OutputTime.EARLIEST
>>> t = pane_times(E, 2, first_pane=np.array([0, 0, 1, 1]), et=np.array([5, 3, 9, 8]),
...                timely=np.array([True, True, False, True]))
>>> t.tolist()
[3, 8]
>>> values, null = column(E, start=np.array([0, 0]), end=np.array([10, 10]), otime=np.array([3, NONE[E]]))
>>> values.tolist(), null.tolist()
([3, 9], [False, False])
>>> column(ast.OutputTime.END_OF_WINDOW, start=np.array([NEG_INF]), end=np.array([POS_INF]),
...        otime=np.array([NEG_INF]))[1].tolist()
[True]
"""
from __future__ import annotations

import numpy as np

from .. import ast
from ..time import NEG_INF, POS_INF

_I64 = np.int64
EARLIEST, LATEST = ast.OutputTime.EARLIEST, ast.OutputTime.LATEST

#: "no timely element": the neutral value of the policy's combination (MIN's +inf, MAX's -inf);
#: END OF WINDOW and START OF WINDOW keep nothing per element and use -inf
NONE = {EARLIEST: POS_INF, LATEST: NEG_INF, ast.OutputTime.END_OF_WINDOW: NEG_INF,
        ast.OutputTime.START_OF_WINDOW: NEG_INF}


def of_elements(policy: ast.OutputTime) -> bool:
    return policy.of_elements


def combine_at(policy: ast.OutputTime, into: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """into[rows] = combination of into[rows] and values, in place (repeated rows fold)."""
    if policy is EARLIEST:
        np.minimum.at(into, rows, values)
    elif policy is LATEST:
        np.maximum.at(into, rows, values)


def combine(policy: ast.OutputTime, values) -> int:
    """The combination of some times (NONE for none)."""
    values = [int(v) for v in values]
    if not values or not policy.of_elements:
        return NONE[policy]
    return min(values) if policy is EARLIEST else max(values)


def pane_times(policy: ast.OutputTime, n_panes: int, *, first_pane: np.ndarray, et: np.ndarray,
               timely: np.ndarray) -> np.ndarray:
    """Per pane: the combination of the event times `et` of the timely assignments it first
    emitted (`first_pane[a]`, -1 for none), NONE where it has none."""
    out = np.full(n_panes, NONE[policy], _I64)
    if policy.of_elements:
        sel = (first_pane >= 0) & timely
        combine_at(policy, out, first_pane[sel], et[sel])
    return out


def column(policy: ast.OutputTime, *, start: np.ndarray, end: np.ndarray, otime: np.ndarray):
    """(values, NULL mask) of the output_time column of panes with windows [start, end) and
    per-pane combinations `otime` (`pane_times`). A GLOBAL window (start -inf) has no bounds:
    its END and START OF WINDOW are NULL."""
    start, end = np.asarray(start, _I64), np.asarray(end, _I64)
    glob = start == NEG_INF
    last_instant = np.where(end == NEG_INF, NEG_INF, end - 1)  # Beam's maxTimestamp
    if policy is ast.OutputTime.START_OF_WINDOW:
        return np.where(glob, 0, start), glob
    if policy is ast.OutputTime.END_OF_WINDOW:
        return np.where(glob, 0, last_instant), glob
    otime = np.asarray(otime, _I64)
    found = otime != NONE[policy]
    return np.where(found, otime, np.where(glob, 0, last_instant)), ~found & glob
