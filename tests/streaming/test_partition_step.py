"""The first stage of a window over a live `ASCENDING PER` stream, without Spark: the ordering
operator's step in pass-through mode (udfs/ordered_stream.py, docs/streaming.md 5.5). Per
micro-batch it hands on every row not behind its partition, in its own batch, and reports W(N),
which equals the ARRIVAL replay's watermark at the batch's time (the batches as the arrival
instants, `engine.partitions.ascending_replay`)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow.engine.partitions import ascending_replay
from sqlflow.time import NEG_INF
from sqlflow.udfs.ordered_stream import ORDER_COUNTERS, OrderMeta, OrderSpec, OrderStep
from tests.conftest import examples

SPEC = OrderSpec(columns=("t", "v", "p"), time="t", partition="p", pass_through=True)


def run(batches, times, idle=None):
    """Each batch through the step: (released values, dropped (value, reason), W, counters) per batch."""
    step = OrderStep(OrderSpec(columns=SPEC.columns, time="t", partition="p", idle=idle, pass_through=True))
    meta, buffer, parts, out = OrderMeta(), None, None, []
    for rows, p in zip(batches, times):
        table = pa.table({"t": pa.array([t for _, t, _ in rows], pa.int64()), "v": [v for v, _, _ in rows],
                          "p": [k for _, _, k in rows]}) if rows else None
        meta, buffer, frames = step.step(meta, buffer, table, p=p, spark_ms=0, parts=parts)
        parts = step.parts
        released, dropped, metrics = frames
        assert buffer is None  # nothing is held
        out.append((released["v"].tolist() if len(released) else [],
                    list(zip(dropped["v"], dropped["__sqlflow_reason"])) if len(dropped) else [],
                    int(metrics["__sqlflow_m_watermark"][0]),
                    {m: int(metrics[f"__sqlflow_m_{m}"][0]) for m in ORDER_COUNTERS}))
    return out


def test_rows_pass_through_in_their_batch_and_the_report_is_the_per_partition_watermark():
    # batches at 10, 20, 30, 40: A5 B3 | A4 (behind A's 5) B1 (behind B's 3) A9 | B12 | (nothing)
    # W: min(5, 3) = 3; min(9, 3) = 3; min(9, 12) = 9; 9. A row below W passes on (the window judges it)
    batches = [[("a5", 5, "A"), ("b3", 3, "B")], [("a4", 4, "A"), ("b1", 1, "B"), ("a9", 9, "A")],
               [("b12", 12, "B")], []]
    out = run(batches, [10, 20, 30, 40])
    assert [o[0] for o in out] == [["b3", "a5"], ["a9"], ["b12"], []]
    assert [o[1] for o in out] == [[], [("a4", "behind its partition"), ("b1", "behind its partition")], [], []]
    assert [o[2] for o in out] == [3, 3, 9, 9]
    assert out[1][3]["dropped_behind_partition"] == 2 and out[1][3]["dropped_too_late"] == 0
    # with IDLE TIMEOUT 15: at 30 A (last row at 20) is still active; at 40 it is idle, B is not
    # (a row at 30): W = B's 12. Batch 3 has no rows and still moves the watermark
    assert [o[2] for o in run(batches, [10, 20, 30, 40], idle=15)] == [3, 3, 9, 12]


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.sampled_from("ABC")), max_size=5), min_size=1,
                max_size=8))
def test_the_reported_watermark_is_the_replay_of_the_batches(batches):
    """Without an idle timeout, W(N) at each batch equals the ARRIVAL replay's watermark at that
    batch's time (rows arriving at their batch's time), and the rows handed on are exactly those
    the replay does not find behind their partition."""
    times = [100 * (i + 1) for i in range(len(batches))]
    rows = [[(f"{b}-{i}", t, k) for i, (t, k) in enumerate(batch)] for b, batch in enumerate(batches)]
    out = run(rows, times)
    flat = [r for batch in rows for r in batch]
    if not flat:
        assert all(o[2] == NEG_INF for o in out)
        return
    arrival = np.array([times[b] for b, batch in enumerate(rows) for _ in batch])
    timeline, behind = ascending_replay(arrival, [t for _, t, _ in flat], [k for _, _, k in flat])
    assert [o[2] for o in out] == [timeline.at(p) for p in times]
    assert sorted(v for o in out for v in o[0]) == sorted(r[0] for r, b in zip(flat, behind) if not b)
