"""Vectorised sessionization: the final sessions of many keys at once.

Windows of one key that overlap (start < running end) belong to one session; windows that only
touch (start == end of the previous) do not.

>>> import numpy as np
>>> sid, s, e = final_sessions(np.array([0, 0, 0, 1]), np.array([0, 5, 20, 3]), np.array([10, 15, 30, 13]))
>>> sid.tolist(), s.tolist(), e.tolist()
([0, 0, 1, 2], [0, 20, 3], [15, 30, 13])
>>> final_sessions(np.array([0, 0]), np.array([0, 10]), np.array([10, 20]))[0].tolist()
[0, 1]
"""
from __future__ import annotations

import numpy as np

from .kernels import order_by, segment_cummax


def final_sessions(key: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Session id per input window (ids numbered by key, then start), and each session's bounds."""
    n = len(key)
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    order = order_by(key, start)  # ties in any order: they give the same sessions
    k, s, e = key[order], start[order], end[order]
    new_key = np.r_[True, k[1:] != k[:-1]]
    run_end = segment_cummax(e, new_key)
    new_session = new_key.copy()
    new_session[1:] |= s[1:] >= run_end[:-1]
    sid_sorted = np.cumsum(new_session) - 1
    sid = np.empty(n, np.int64)
    sid[order] = sid_sorted
    firsts = np.flatnonzero(new_session)
    s_start = s[firsts]
    s_end = np.maximum.reduceat(e, firsts)
    return sid, s_start, s_end
