"""Synthetic clickstream for benchmarks: users with bursty visits, mostly prompt arrivals, some late.

Each user has visits spread over `days`; a visit is a geometric number of clicks (mean 10)
about 30 s apart. Arrival = event time + a delay: 97% within seconds, 2.5% up to 2 minutes,
0.5% between 5 and 30 minutes (phones coming back online).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

SECOND = 1_000_000
MINUTE = 60 * SECOND
DAY = 24 * 3600 * SECOND
BASE = 1_700_000_000 * SECOND  # 2023-11-14, so times look like real timestamps


def clickstream(n_events: int, n_users: int, *, days: float = 1.0, seed: int = 0) -> pd.DataFrame:
    """Columns: user_id (int64), amount (int64), event_time, arrival_time (int64 microseconds)."""
    rng = np.random.default_rng(seed)
    clicks_per_visit = 10
    n_visits = max(1, n_events // clicks_per_visit)
    visit_user = rng.integers(0, n_users, n_visits)
    visit_start = BASE + rng.integers(0, int(days * DAY), n_visits)
    length = rng.geometric(1 / clicks_per_visit, n_visits)
    length = np.maximum(1, np.round(length * n_events / length.sum()).astype(np.int64))
    total = int(length.sum())
    visit = np.repeat(np.arange(n_visits), length)
    first = np.r_[0, np.cumsum(length)[:-1]]
    step = rng.exponential(30 * SECOND, total).astype(np.int64)
    step[first] = 0
    offset = np.cumsum(step) - np.repeat(np.cumsum(step)[first], length)
    event_time = visit_start[visit] + offset
    u = rng.random(total)
    delay = np.where(u < 0.97, rng.exponential(2 * SECOND, total),
                     np.where(u < 0.995, rng.uniform(10 * SECOND, 2 * MINUTE, total),
                              rng.uniform(5 * MINUTE, 30 * MINUTE, total))).astype(np.int64)
    frame = pd.DataFrame({
        "user_id": visit_user[visit].astype(np.int64),
        "amount": rng.integers(1, 100, total).astype(np.int64),
        "event_time": event_time,
        "arrival_time": event_time + delay,
    })
    return frame.iloc[:n_events].reset_index(drop=True)
