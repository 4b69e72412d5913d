"""Watermarks from partitions whose event times ascend (docs/semantics.md, 1.2).

`WATERMARK ts ASCENDING PER p [IDLE TIMEOUT d]` declares that event times never decrease within
a partition (each value of `p`: a device, a source partition, a file). Flink's time design draft,
"Generating Watermarks": "the user can specify that the data arrives with monotonously increasing
timestamps per source partition. The source can then auto-generate watermarks"; and "the
watermark at one specific operator at any point in time is the minimum watermark time over all
its inputs". The low-watermark article computes an importer's watermark the same way: each
server's progress is the largest data time it sent, the importer's the minimum over servers.

- a partition's watermark is its **latest event time** (the largest arrived so far);
- the source's watermark at processing time `p` is the **minimum over the partitions seen by `p`
  that are not idle**, never moving backwards (a running maximum); before the first row, -inf;
- a partition is **idle** at `p` when no row of it arrived in `(p - d, p]` (Flink's
  `withIdleness(d)`); an idle partition does not hold the watermark until its next row; when every
  partition is idle the watermark stays where it is;
- a row whose event time is below the latest event time of its partition **before its arrival
  instant** breaks the declaration: it is late (`behind_partition`).

>>> tl = ascending_per_partition(arrival=[1, 2, 3, 4], event=[10, 50, 20, 60], partition=["a", "b", "a", "b"])
>>> tl.steps()
[(1, 10), (3, 20)]
>>> ascending_per_partition([1, 2, 30], [10, 50, 60], ["a", "b", "b"], idle_timeout=10).steps()
[(1, 10), (11, 50), (30, 60)]
>>> behind_partition([1, 2, 3, 3], [10, 5, 20, 15], ["a", "a", "b", "b"]).tolist()
[False, True, False, False]
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..time import NEG_INF, POS_INF
from .watermarks import EMPTY_TIMELINE, Timeline

_I64 = np.int64


def _codes(partition) -> np.ndarray:
    """Partition values (any type, NULL one partition of its own) as integer codes 0..K-1."""
    codes, _ = pd.factorize(pd.Series(partition, dtype=object), sort=False, use_na_sentinel=False)
    return codes.astype(_I64)


def _latest_by_instant(arrival: np.ndarray, event: np.ndarray, codes: np.ndarray) -> pd.DataFrame:
    """One row per (partition, arrival instant), sorted by both: `k`, `a`, and `latest`, the
    partition's largest event time once that instant's rows have arrived."""
    frame = pd.DataFrame({"k": codes, "a": arrival, "e": event})
    per = frame.groupby(["k", "a"], sort=True)["e"].max().reset_index()
    per["latest"] = per.groupby("k")["e"].cummax()
    return per


def ascending_per_partition(arrival, event, partition, idle_timeout: int | None = None,
                            chunk: int | None = None) -> Timeline:
    """The source watermark of ascending partitions (module docstring), as steps of processing
    time: at every arrival instant, and at every instant where a partition turns idle before the
    last arrival (after the input's last arrival the end of input moves the watermark to +inf).

    Vectorised over chunks of `chunk` instants (default about the square root of the number of
    partitions): within a chunk, the partitions that receive rows form a small matrix of instants
    by partitions, and every other seen partition keeps its latest event time and only turns idle
    (at its last arrival + the timeout), so their minimum at each instant is a suffix minimum in
    the order of those deadlines. Cost: about rows x chunk + chunks x partitions x log."""
    a = np.asarray(arrival, dtype=_I64)
    e = np.asarray(event, dtype=_I64)
    if a.size == 0:
        return EMPTY_TIMELINE
    codes = _codes(partition)
    per = _latest_by_instant(a, e, codes)
    k_of, a_of, latest = (per[c].to_numpy(_I64) for c in ("k", "a", "latest"))
    n_parts = int(codes.max()) + 1
    last_at = int(a.max())
    instants = np.sort(a)
    instants = instants[np.r_[True, instants[1:] != instants[:-1]]]  # (np.unique hashes: slower here)
    timeout = POS_INF if idle_timeout is None else int(idle_timeout)
    if idle_timeout is not None:
        # a partition turns idle `idle_timeout` after an arrival unless it sends again before then
        nxt = np.r_[a_of[1:], POS_INF]
        nxt[np.r_[k_of[1:] != k_of[:-1], True]] = POS_INF
        idle_at = a_of + timeout
        turns = (idle_at < nxt) & (idle_at <= last_at)
        instants = np.union1d(instants, idle_at[turns])
    where = np.searchsorted(instants, a_of)   # the instant of each (partition, arrival instant)
    order = np.argsort(where, kind="stable")
    where, k_of, a_of, latest = where[order], k_of[order], a_of[order], latest[order]
    values = np.full(len(instants), NEG_INF, dtype=_I64)
    current = np.full(n_parts, NEG_INF, dtype=_I64)    # latest event time per partition
    deadline = np.full(n_parts, NEG_INF, dtype=_I64)   # when each turns idle (-inf: not seen yet)
    size = chunk or max(8, int(np.sqrt(n_parts)))
    for lo in range(0, len(instants), size):  # one pass per chunk of instants, not per row
        hi = min(lo + size, len(instants))
        p = instants[lo:hi]
        i0, i1 = np.searchsorted(where, [lo, hi])
        changed, local = np.unique(k_of[i0:i1], return_inverse=True)
        # partitions without rows in the chunk: constant latest, active while p < deadline
        still = deadline > NEG_INF
        still[changed] = False
        u, held = deadline[still], current[still]
        if timeout == POS_INF:  # never idle: their minimum is one number
            u, held = u[:1], held.min(keepdims=True) if held.size else held
        by_u = np.argsort(u, kind="stable")
        u, held = u[by_u], held[by_u]
        suffix = np.minimum.accumulate(held[::-1])[::-1] if held.size else held
        j = np.searchsorted(u, p, side="right")
        if len(u):
            quiet = np.where(j < len(u), suffix[np.minimum(j, len(u) - 1)], POS_INF)
        else:
            quiet = np.full(len(p), POS_INF, dtype=_I64)
        # partitions with rows in the chunk: a small matrix, filled forward (both only grow)
        lat = np.full((hi - lo + 1, len(changed)), NEG_INF, dtype=_I64)
        seen = np.full((hi - lo + 1, len(changed)), NEG_INF, dtype=_I64)
        before = deadline[changed]   # the last arrival before the chunk (+inf without a timeout)
        lat[0] = current[changed]
        seen[0] = np.where(before > NEG_INF, before if timeout == POS_INF else before - timeout, NEG_INF)
        lat[where[i0:i1] - lo + 1, local] = latest[i0:i1]
        seen[where[i0:i1] - lo + 1, local] = a_of[i0:i1]
        np.maximum.accumulate(lat, axis=0, out=lat)
        np.maximum.accumulate(seen, axis=0, out=seen)
        lat, seen = lat[1:], seen[1:]
        active = seen > NEG_INF
        if timeout != POS_INF:
            active &= seen > (p[:, None] - timeout)
        busy = np.where(active, lat, POS_INF).min(axis=1) if len(changed) else np.full(len(p), POS_INF, _I64)
        both = np.minimum(quiet, busy)
        values[lo:hi] = np.where(both < POS_INF, both, NEG_INF)  # none active: no say (the running max holds)
        if len(changed):
            current[changed] = lat[-1]
            last = seen[-1]
            deadline[changed] = np.where(last > NEG_INF, POS_INF if timeout == POS_INF else last + timeout, NEG_INF)
    values = np.maximum.accumulate(values)  # never backwards; all-idle instants keep the last value
    steps = Timeline.from_steps(instants, values)
    return Timeline(steps.times, steps.values, last_at)


_NULL = "\0null"  # the partition of NULL values


def _values(partition) -> np.ndarray:
    """Partition values as an object array, NULL as a value of its own."""
    values = np.asarray(partition, dtype=object)
    return np.where(pd.isna(values), _NULL, values)


class PartitionLatest:
    """Each partition's latest event time as of each arrival instant: what it has promised.
    Small enough to ship to the executors (one row per partition and arrival instant)."""

    def __init__(self, arrival, event, partition) -> None:
        values = _values(partition)
        codes, self.partitions = pd.factorize(values, sort=False)
        per = _latest_by_instant(np.asarray(arrival, dtype=_I64), np.asarray(event, dtype=_I64),
                                 codes.astype(_I64))
        self.table = per[["a", "k", "latest"]].sort_values("a", kind="stable").reset_index(drop=True)

    def before(self, arrival, partition) -> np.ndarray:
        """For each (arrival, partition), the partition's latest event time among rows arrived
        strictly before (-inf if none)."""
        asked = pd.DataFrame({"a": np.asarray(arrival, dtype=_I64),
                              "k": pd.Index(self.partitions).get_indexer(_values(partition)).astype(_I64),
                              "i": np.arange(len(arrival))}).sort_values("a", kind="stable")
        found = pd.merge_asof(asked, self.table, on="a", by="k", allow_exact_matches=False, direction="backward")
        out = np.full(len(arrival), NEG_INF, dtype=_I64)
        got = found["latest"].notna().to_numpy()
        out[found["i"].to_numpy()[got]] = found["latest"].to_numpy()[got].astype(_I64)
        return out


def behind_partition(arrival, event, partition) -> np.ndarray:
    """Which rows are older than the latest event time of their partition before their arrival
    instant (rows arriving together are judged against the earlier instants only)."""
    e = np.asarray(event, dtype=_I64)
    return e < PartitionLatest(arrival, e, partition).before(arrival, partition)


def ascending_replay(arrival, event, partition, idle_timeout: int | None = None
                     ) -> tuple[Timeline, np.ndarray]:
    """The watermark of a replayed ASCENDING PER source and which rows are behind their
    partition: such a row is dropped as it arrives, so it neither moves the watermark nor keeps
    its partition from turning idle.

    >>> tl, behind = ascending_replay([1, 2, 9], [10, 5, 12], ["a", "a", "a"], idle_timeout=4)
    >>> tl.steps(), behind.tolist()
    ([(1, 10), (9, 12)], [False, True, False])
    """
    a, e = np.asarray(arrival, dtype=_I64), np.asarray(event, dtype=_I64)
    behind = behind_partition(a, e, partition)
    keep = ~behind
    timeline = ascending_per_partition(a[keep], e[keep], np.asarray(partition, dtype=object)[keep], idle_timeout)
    return Timeline(timeline.times, timeline.values, max(timeline.end, int(a.max()) if a.size else NEG_INF)), behind
