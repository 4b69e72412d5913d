"""Writes clickstream.csv: a small, realistic clickstream for the sessions notebook and examples.

Eight users browse a shop between 09:00 and 11:00 UTC on 2024-03-15. Each click has an event time
`ts` (when it happened on the device) and an arrival time `arrived_at` (when it reached the
pipeline): usually a few seconds later, but phones that lose their connection deliver a burst of
clicks many minutes late. Two of those late bursts land between two sessions of their user and
merge them (the case retractions exist for). Deterministic: `python make_clickstream.py`
rewrites the same file.
"""
from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

START = datetime(2024, 3, 15, 9, 0, 0)
PAGES = ["home", "search", "product", "product", "product", "reviews", "cart", "checkout"]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
CSV = Path(__file__).with_name("clickstream.csv")


def main(path: Path = CSV) -> None:
    rng = np.random.default_rng(20240315)
    rows = []
    for user in USERS:
        t = START + timedelta(minutes=int(rng.integers(0, 20)))
        for _ in range(int(rng.integers(2, 4))):          # sessions
            for _ in range(int(rng.integers(3, 9))):      # clicks in a session
                t += timedelta(seconds=int(rng.integers(10, 150)))
                rows.append([user, str(rng.choice(PAGES)), t, t + timedelta(seconds=int(rng.integers(1, 20)))])
            t += timedelta(minutes=int(rng.integers(14, 35)))  # idle: the next session
    # Phones offline for a while: their clicks arrive in a burst when they reconnect.
    for user, start, minutes_late, n in (("carol", 0, 25, 3), ("frank", 1, 40, 2)):
        mine = [r for r in rows if r[0] == user]
        for r in mine[start:start + n]:
            r[3] = r[2] + timedelta(minutes=minutes_late, seconds=int(rng.integers(0, 10)))
    # Late clicks that bridge two sessions of their user: both sessions merge into one.
    for user in ("bob", "grace"):
        mine = sorted((r for r in rows if r[0] == user), key=lambda r: r[2])
        gaps = [(b[2] - a[2], a, b) for a, b in zip(mine, mine[1:])]
        _, a, b = max(gaps, key=lambda g: g[0])
        middle = a[2] + (b[2] - a[2]) / 2
        arrival = b[2] + timedelta(minutes=12)
        # two clicks, each within 10 minutes of the other and of a neighbouring session
        for ts in (a[2] + timedelta(minutes=8), b[2] - timedelta(minutes=8), middle):
            rows.append([user, "product", ts.replace(microsecond=0), arrival])
    rows.sort(key=lambda r: (r[3], r[2], r[0]))
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["user_id", "page", "ts", "arrived_at"])
        for user, page, ts, arrived in rows:
            out.writerow([user, page, ts.strftime("%Y-%m-%d %H:%M:%S"), arrived.strftime("%Y-%m-%d %H:%M:%S")])


if __name__ == "__main__":
    main()
