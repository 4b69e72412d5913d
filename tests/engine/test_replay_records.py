"""The replay timeline from each partition's records equals the timeline from every row.

`sqlflow.udfs.records.PartitionRecords` keeps, per input partition, the rows that can set the
watermark; the driver builds the timeline from their union (sqlflow/spark/timeline.py). Random
rows, cut into random partitions, with many ties in arrival and event time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow.engine import watermarks
from sqlflow.udfs.records import PartitionRecords
from tests.conftest import examples


def _union(at, et, cuts, kind):
    parts = np.split(np.arange(len(at)), cuts)
    out = pd.concat([pd.concat(PartitionRecords(kind)(iter([pd.DataFrame({"et": et[p], "at": at[p]})])))
                     for p in parts], ignore_index=True)
    records, summary = out[~out["summary"]], out[out["summary"]]
    return records["at"].to_numpy(np.int64), records["et"].to_numpy(np.int64), summary


rows = st.lists(st.tuples(st.integers(0, 40), st.integers(-20, 60)), min_size=1, max_size=120)


@settings(max_examples=examples(300))
@given(rows, st.lists(st.integers(0, 120), max_size=6), st.integers(0, 7))
def test_records_give_the_same_timeline(pairs, cuts, delay):
    at = np.array([p[0] for p in pairs], np.int64)
    et = np.array([p[1] for p in pairs], np.int64)
    cuts = sorted(c for c in cuts if c <= len(at))
    for kind, build in (("delay", lambda a, e: watermarks.bounded_delay(a, e, delay)),
                        ("perfect", watermarks.perfect)):
        r_at, r_et, summary = _union(at, et, cuts, kind)
        if kind == "perfect":  # as timeline.replay: the first arrival is an instant of its own
            r_at, r_et = np.r_[r_at, summary["et"].min()], np.r_[r_et, np.iinfo(np.int64).max]
        full, pruned = build(at, et), build(r_at, r_et)
        assert pruned.steps() == full.steps(), kind
        assert int(summary["n"].sum()) == len(at)
        assert int(summary["at"].max()) == int(at.max())


def test_records_are_few_for_nearly_ordered_arrivals():
    # events every 100 ms, arriving 0-5 s late: about one row in 5 raises the maximum
    rng = np.random.default_rng(7)
    et = np.arange(100_000, dtype=np.int64) * 100_000
    at = et + rng.integers(0, 5_000_000, len(et))
    r_at, r_et, _ = _union(at, et, [50_000], "delay")
    assert len(r_at) < len(at) // 4
    assert watermarks.bounded_delay(r_at, r_et, 0).steps() == watermarks.bounded_delay(at, et, 0).steps()
