"""The first stage of a window over a live `ASCENDING PER` stream, without Spark: the ordering
operator's step in pass-through mode (udfs/ordered_stream.py, docs/streaming.md 5.5). Per
micro-batch it hands on every row not behind its partition, in its own batch, and reports W(N),
which equals the ARRIVAL replay's watermark at the batch's time (the batches as the arrival
instants, `engine.partitions.ascending_replay`). Over a UNION ALL of it and a `DELAY OF` source
(`SourceRule`), W(N) is the minimum of the two sources' own watermarks."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow.engine.partitions import ascending_replay
from sqlflow.engine.watermarks import bounded_delay
from sqlflow.time import NEG_INF
from sqlflow.udfs.ordered_stream import ORDER_COUNTERS, OrderMeta, OrderSpec, OrderStep, SourceRule
from tests.conftest import examples

SPEC = OrderSpec(columns=("t", "v", "p"), time="t", partition="p", pass_through=True)


def run(batches, times, idle=None, sources=()):
    """Each batch through the step: (released values, dropped (value, reason), W, counters) per
    batch. With `sources` (their `SourceRule`s) a row is (value, time, partition, source)."""
    step = OrderStep(OrderSpec(columns=(*SPEC.columns, "s"), time="t", partition="p", idle=idle, pass_through=True,
                               sources=sources, source="s"))
    meta, buffer, parts, out = OrderMeta(), None, None, []
    for rows, p in zip(batches, times):
        table = pa.table({"t": pa.array([r[1] for r in rows], pa.int64()), "v": [r[0] for r in rows],
                          "p": [r[2] for r in rows], "s": pa.array([r[3] if sources else 0 for r in rows], pa.int64())}
                         ) if rows else None
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


SECOND = 1_000_000
#: per batch, one second apart: devices (ASCENDING PER, A fast, B lagging; A5 behind A's 25) and
#: gateways (DELAY OF 5s), event times in seconds (tests/streaming/test_partition_union.py's data)
MIXED = [[("A", 1), ("B", 0), ("G", 3)], [("A", 12), ("G", 14)], [("A", 25), ("B", 2), ("G", 27)],
         [("B", 8), ("A", 5), ("G", 30)], [("B", 15), ("G", 35)], [("A", 31), ("B", 33), ("G", 6)]]


#: event second 0 (Spark's rule knows no watermark at or below the epoch)
BASE = 1_700_000_000 * SECOND


def mixed_rows(batches):
    return [[(f"{k}{t}", BASE + t * SECOND, k if k != "G" else "", int(k == "G")) for k, t in batch] for batch in batches]


def test_a_union_with_a_delay_source_steps_to_the_minimum_of_both_watermarks():
    """W(N) = min(the devices' (min latest over the devices not idle, never back), the gateways'
    (their max event time of the batches before N - 5s)), seconds:

        batch  devices' latest  devices' W  gateways' max before  their W  W(N)
        0      A1 B0            0           -                     -inf     -inf
        1      A12 B0           0           3                     -2       -2
        2      A25 B2           2           14                    9        2    (B holds)
        3      A25 B8 (A5 behind) 8         27                    22       8
        4      A25 B15          15          30                    25       15
        5      A31 B33          31          35                    30       30   (the gateways hold)

    With IDLE TIMEOUT 1ms a device without a row in the batch is idle: the devices' W is 0, 12
    (B idle), 12, 12 (A's only row is behind: A idle), 15, 31, and W(N) -inf, -2, 9, 12, 15, 30.
    Every row but A5 is handed on in its batch (G6, below W, too: the window judges it)."""
    times = [(b + 1) * SECOND for b in range(len(MIXED))]
    rules = (SourceRule(), SourceRule(delay=5 * SECOND))
    out = run(mixed_rows(MIXED), times, sources=rules)
    assert [o[2] for o in out] == [NEG_INF] + [BASE + s * SECOND for s in (-2, 2, 8, 15, 30)]
    assert [o[1] for o in out] == [[], [], [], [("A5", "behind its partition")], [], []]
    assert sorted(v for o in out for v in o[0]) == sorted(f"{k}{t}" for b in MIXED for k, t in b if (k, t) != ("A", 5))
    idle = run(mixed_rows(MIXED), times, sources=(SourceRule(idle=1_000), rules[1]))
    assert [o[2] for o in idle] == [NEG_INF] + [BASE + s * SECOND for s in (-2, 9, 12, 15, 30)]


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.sampled_from("ABGH")), max_size=5), min_size=1,
                max_size=8), st.one_of(st.none(), st.integers(0, 10)))
def test_the_union_watermark_is_the_minimum_of_the_sources_rules(batches, delay):
    """Source 0 (partitions A, B) is ASCENDING PER; source 1 (G, H) DELAY OF `delay` seconds, or
    ASCENDING PER too when None. W(N) = min(the ARRIVAL replay of source 0 at p(N), source 1's:
    its replay at p(N) under ASCENDING PER, at p(N-1) (its batches before N) under DELAY OF),
    whatever the batches (times in whole ms)."""
    times = [100 * (i + 1) for i in range(len(batches))]
    ms = 1_000
    rows = [[(f"{b}-{i}", BASE + t * ms, k if k in "AB" or delay is None else "", int(k in "GH"))
             for i, (t, k) in enumerate(batch)] for b, batch in enumerate(batches)]
    second = SourceRule() if delay is None else SourceRule(delay=delay * ms)
    out = run(rows, times, sources=(SourceRule(), second))

    def of(source):
        return [(times[b], r) for b, batch in enumerate(rows) for r in batch if r[3] == source]

    def ascending(got):
        return ascending_replay([a for a, _ in got], [r[1] for _, r in got], [r[2] for _, r in got])[0]

    first, other = of(0), of(1)
    first_wm = ascending(first) if first else None
    other_wm = (None if not other else ascending(other) if delay is None
                else bounded_delay([a for a, _ in other], [r[1] for _, r in other], delay * ms))
    lag = 0 if delay is None else 100
    expected = [min(first_wm.at(p) if first_wm else NEG_INF, other_wm.at(p - lag) if other_wm else NEG_INF)
                for p in times]
    assert [o[2] for o in out] == expected
