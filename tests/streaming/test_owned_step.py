"""The owned-sink executor's micro-batch, driven without Spark: each batch's rows split into hash
buckets, each bucket advanced by `udfs.batch_step.BatchStep` from its state of the batch before
(written and read back as a parquet row, as the driver keeps it), the watermark computed by the
driver's rule (`batch_watermark`: max event time of the batches before, minus the delay).

On random queries (windows, triggers, accumulation modes, lateness, delays; sessions merging with
retractions) and random micro-batch splits, its panes equal:
- `Engine.advance` over the same micro-batches, one engine for every key (what the
  transformWithState operator computes; tests/streaming/test_equivalence.py checks that operator
  against it on Spark), and
- the TIMELINE replay of the stream's own watermark log (`Engine.run` with every row arriving at
  its batch's time, the watermark stepping at the batch times, timers firing at them).
Where the rows combine exactly (FIXED windows, a watermark-only trigger, COUNT/SUM/MIN/MAX), the
same holds with each batch's rows replaced by their partial aggregates per key and window, as
Spark computes them before the step (`sqlflow/spark/streaming/owned.py`), drop counts included.
"""
from __future__ import annotations

import io
import tempfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.columns import (ARRIVAL_TIME, BUCKET, DATA, EVENT_TIME, FINISH, KIND, LATEST, METRICS, PANE, STATE,
                             WEIGHT, metric_column, part_column, pane_columns, state_meta_column)
from sqlflow.engine import COMBINING, STREAM, path_for
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import MINUTE, NEG_INF, POS_INF, SECOND
from sqlflow.udfs.batch_step import (BUCKET_LAYOUT, BatchSpec, BatchStep, StateFiles, batch_watermark, driver_batch,
                                     output_schema, state_columns)
from sqlflow.udfs.micro_batch_combine import batch_partials
from sqlflow.udfs.streaming import StreamSpec

from .harness import canonical
from tests.conftest import examples

D = ast.Duration
AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"),
        Aggregate("count", "v", "nv"))
MODES = st.sampled_from(list(ast.AccumulationMode))
W = ast.Watermark()
WINDOWS = st.sampled_from([ast.Fixed(D(MINUTE)), ast.Fixed(D(MINUTE), D(20 * SECOND)),
                           ast.Sliding(D(2 * MINUTE), D(MINUTE)), ast.Sessions(D(90 * SECOND)),
                           ast.Sessions(D(20 * SECOND)), ast.Global()])
TRIGGERS = st.sampled_from([
    None,
    ast.WatermarkEarlyLate(early=ast.Period(D(30 * SECOND))),
    ast.WatermarkEarlyLate(early=ast.Period(D(30 * SECOND)), late=W),
    ast.WatermarkEarlyLate(early=ast.Period(D(20 * SECOND)), late=ast.Count(1)),
    ast.Sequence((ast.RepeatUntil(ast.Period(D(MINUTE)), W), ast.Repeat(W))),
    ast.Repeat(ast.Count(2)),
    ast.Repeat(ast.Delay(D(15 * SECOND))),
    ast.Sequence((ast.Count(1), ast.Repeat(ast.Delay(D(10 * SECOND))))),
])
LATENESS = st.sampled_from([0, 30 * SECOND, 10 * MINUTE])
DELAYS = st.sampled_from([0, 1500, 10 * SECOND, 45 * SECOND + 500])
SETTINGS = settings(max_examples=examples(60))


@st.composite
def streams(draw):
    """(rows with their batch number, batch times): keys k0..k4 and NULL, event times drifting
    forward about 30 s a batch with some rows minutes behind, values with NULLs."""
    seed = draw(st.integers(0, 2**32 - 1))
    n_batches = draw(st.integers(1, 7))
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    batch = np.sort(rng.integers(0, n_batches, n))
    base = 1_700_000_000 * SECOND
    et = base + batch * 30 * SECOND + rng.integers(-3 * MINUTE, 40 * SECOND, n) + rng.integers(0, 1000, n) * 1000
    keys = np.array(["k0", "k1", "k2", "k3", "k4", None], dtype=object)
    rows = pd.DataFrame({
        "k": pd.Series(keys[rng.integers(0, 3 if rng.random() < 0.5 else 6, n)], dtype=object),
        EVENT_TIME: et.astype(np.int64),
        "v": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(-3, 10, n).astype(object)), dtype="Int64"),
        "batch": batch,
    })
    times = base + 10 * SECOND + np.cumsum(rng.integers(1, 40, n_batches)) * SECOND
    return rows, times.astype(np.int64), draw(st.booleans())


def plan_of(window, trigger, mode, lateness) -> EnginePlan:
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode))
    return EnginePlan(w, AGGS, keys=("k",))


def combined(rows: pd.DataFrame, plan: EnginePlan) -> tuple[pd.DataFrame, EnginePlan]:
    """The rows' partial aggregates per key and FIXED window, as owned.py has Spark compute them."""
    fn = plan.window
    et = rows[EVENT_TIME]
    start = et - (et - fn.offset.micros) % fn.size.micros
    parts = {"k": rows["k"], "_s": start, EVENT_TIME: et, LATEST: et}
    out_aggs = []
    for j, agg in enumerate(plan.aggregates):
        parts[part_column(j)] = 1 if agg.column is None else rows[agg.column]
        out_aggs.append(Aggregate(COMBINING[agg.kind], part_column(j), agg.output, agg.ignore_nulls))
    frame = pd.DataFrame(parts)
    how = {EVENT_TIME: "min", LATEST: "max"}
    for j, agg in enumerate(plan.aggregates):
        how[part_column(j)] = {"count_star": "count", "count": "count", "sum": "sum", "min": "min", "max": "max"}[agg.kind]
    g = frame.groupby(["k", "_s"], dropna=False, sort=False)
    out = g.agg(how)
    out[WEIGHT] = g.size()
    for j, agg in enumerate(plan.aggregates):  # a group of NULLs only: SUM, MIN, MAX are NULL
        if agg.kind in ("sum", "min", "max"):
            some = g[part_column(j)].count() > 0
            out[part_column(j)] = pd.array(np.where(some, out[part_column(j)], None), dtype="Int64")
        else:
            out[part_column(j)] = out[part_column(j)].astype(np.int64)
    out = out.reset_index().drop(columns="_s")
    return out, EnginePlan(plan.windowing, tuple(out_aggs), keys=plan.keys)


def owned_run(plan: EnginePlan, rows, times, delay: int, finish: bool, *, buckets: int, combine: bool = False):
    """The owned executor's batches: (panes, watermark log [(p, W)], too-late drops)."""
    run_plan = combined(rows.iloc[:0], plan)[1] if combine else plan
    columns = ["k", EVENT_TIME, *[part_column(j) for j in range(len(plan.aggregates))], WEIGHT] if combine \
        else ["k", EVENT_TIME, "v"]
    spec = StreamSpec(run_plan, tuple(c for c in columns), weight=WEIGHT if combine else None)
    types = {"k": pa.string(), "total": pa.int64(), "n": pa.int64(), "top": pa.int64(), "nv": pa.int64()}
    step = BatchStep(spec, output_schema(spec, types))
    states: dict[int, pa.Table] = {}
    seen, wm_prev, log, panes, dropped, finished = None, NEG_INF, [], [], 0, False
    for i, p in enumerate(times.tolist()):
        wm = batch_watermark(seen, delay)
        last = finish and i == len(times) - 1
        batch = rows[rows["batch"] == i].drop(columns="batch")
        if combine:
            batch = combined(batch, plan)[0]
        bucket = pd.util.hash_array(batch["k"].to_numpy(dtype=object)) % buckets if len(batch) else np.empty(0, int)
        for b in sorted(set(bucket.tolist()) | set(states)):
            part = pa.Table.from_pandas(batch[bucket == b][[*columns, *([LATEST] if combine else [])]],
                                        preserve_index=False)
            out = step.run(b, part, states.get(b), p=p, wm_prev=wm_prev, wm_new=wm, finish=last, finished=finished)
            kind = out[KIND].to_numpy()
            panes.append(out.filter(pa.array(kind == PANE)).to_pandas())
            dropped += int(out.filter(pa.array(kind == METRICS))[metric_column("dropped_too_late")][0].as_py() or 0)
            state = out.filter(pa.array(kind == STATE)).select(state_columns())
            buffer = io.BytesIO()  # as the driver keeps it: a parquet row per bucket
            pq.write_table(state, buffer)
            states[b] = pq.read_table(io.BytesIO(buffer.getvalue()))
        tops = [t[state_meta_column("seen")][0].as_py() for t in states.values()]
        tops = [t for t in tops if t is not None]
        seen = max(tops) if tops else None
        log.append((p, wm))
        wm_prev, finished = wm, finished or last
    frame = pd.concat(panes, ignore_index=True) if panes else pd.DataFrame()
    cols = ["k", *[a.output for a in plan.aggregates], *pane_columns(plan.mode.retracting)]
    frame = frame[cols] if len(frame) else pd.DataFrame({c: [] for c in cols})
    return canonical(frame), log, dropped


def driver_run(plan: EnginePlan, rows, times, delay: int, finish: bool, *, buckets: int, combine: bool = False):
    """The driver-local step's batches (owned.py's `_driver_step` without Spark): each batch's
    rows as the executor collects them (bucket and kind columns; the finishing batch with one
    FINISH marker row per bucket), combined by pyarrow where they combine
    (`batch_partials`), every bucket stepped by `driver_batch` from its state file of the batch
    before, writing its new one (state versions in a temporary directory, as under a checkpoint).
    Returns (panes, watermark log, too-late drops), as `owned_run`."""
    run_plan = combined(rows.iloc[:0], plan)[1] if combine else plan
    columns = ["k", EVENT_TIME, *[part_column(j) for j in range(len(plan.aggregates))], WEIGHT] if combine \
        else ["k", EVENT_TIME, "v"]
    spec = StreamSpec(run_plan, tuple(columns), weight=WEIGHT if combine else None)
    types = {"k": pa.string(), "total": pa.int64(), "n": pa.int64(), "top": pa.int64(), "nv": pa.int64()}
    schema = output_schema(spec, types)
    seen, wm_prev, log, panes, dropped, finished = None, NEG_INF, [], [], 0, False
    with tempfile.TemporaryDirectory() as where:
        before = None
        for i, p in enumerate(times.tolist()):
            wm = POS_INF if finished else max(wm_prev, batch_watermark(seen, delay))
            batch = rows[rows["batch"] == i].drop(columns="batch")
            keys = batch["k"].to_numpy(dtype=object)
            table = pa.table({"k": pa.array(keys, pa.string()), EVENT_TIME: pa.array(batch[EVENT_TIME], pa.int64()),
                              "v": pa.array(batch["v"], pa.int64()),
                              BUCKET: pa.array(pd.util.hash_array(keys) % buckets if len(batch) else [], pa.int32()),
                              KIND: pa.array([DATA] * len(batch), pa.int32())})
            if finish and i == len(times) - 1:
                markers = pa.table({"k": pa.nulls(buckets, pa.string()), EVENT_TIME: pa.nulls(buckets, pa.int64()),
                                    "v": pa.nulls(buckets, pa.int64()), BUCKET: pa.array(range(buckets), pa.int32()),
                                    KIND: pa.array([FINISH] * buckets, pa.int32())})
                table = pa.concat_tables([table, markers])
            if combine:
                table = batch_partials(table, plan)
            files = StateFiles(before, BUCKET_LAYOUT, f"{where}/v={i}")
            step = BatchStep(spec, schema, BatchSpec(p, wm_prev, wm, finished=finished, files=files))
            out = driver_batch(step, table, buckets)
            kind = out[KIND].to_numpy()
            panes.append(out.filter(pa.array(kind == PANE)).to_pandas())
            dropped += int(pc.sum(out[metric_column("dropped_too_late")]).as_py() or 0)
            state = out.filter(pa.array(kind == STATE))
            top = pc.max(state[state_meta_column("seen")]).as_py()
            seen = top if seen is None else (seen if top is None else max(seen, top))
            finished = finished or bool(pc.any(state[state_meta_column("finished")]).as_py())
            log.append((p, wm))
            wm_prev, before = wm, f"{where}/v={i}"
    frame = pd.concat(panes, ignore_index=True) if panes else pd.DataFrame()
    cols = ["k", *[a.output for a in plan.aggregates], *pane_columns(plan.mode.retracting)]
    frame = frame[cols] if len(frame) else pd.DataFrame({c: [] for c in cols})
    return canonical(frame), log, dropped


def advance_oracle(plan, rows, log, finish):
    engine = Engine(plan)
    state, prev, out, dropped = {}, NEG_INF, [], 0
    for i, (p, wm) in enumerate(log):
        batch = rows[rows["batch"] == i].drop(columns="batch").reset_index(drop=True)
        result, state = engine.advance(state, batch, p=p, wm_prev=prev, wm_new=wm,
                                       end_of_input=finish and i == len(log) - 1)
        out.append(result.panes)
        dropped += result.metrics["dropped_too_late"]
        prev = wm
    return canonical(pd.concat(out, ignore_index=True)), dropped


def replay_oracle(plan, rows, log):
    """TIMELINE replay of the log: rows arrive at their batch's time (the input ends with the last)."""
    times = np.array([p for p, _ in log], np.int64)
    arrived = rows.assign(**{ARRIVAL_TIME: times[rows["batch"].to_numpy()]}).drop(columns="batch")
    steps = Timeline.from_steps(times, np.array([w for _, w in log], np.int64))
    result = Engine(plan).run(arrived.reset_index(drop=True), timeline=steps, replay=True, p_end=int(times[-1]),
                              timer_instants=times)
    return canonical(result.panes), result.metrics["dropped_too_late"]


def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b[a.columns].reset_index(drop=True), check_dtype=False)


@SETTINGS
@given(streams(), WINDOWS, TRIGGERS, MODES, LATENESS, DELAYS, st.sampled_from([1, 3]))
def test_owned_batches_equal_advance_and_the_timeline_replay(stream, window, trigger, mode, lateness, delay, buckets):
    """The distributed step's batches and the driver-local step's (all buckets in one process,
    state files) give the same panes, watermark log and drops: `Engine.advance`'s and the
    TIMELINE replay's."""
    rows, times, finish = stream
    plan = plan_of(window, trigger, mode, lateness)
    panes, log, dropped = owned_run(plan, rows, times, delay, finish, buckets=buckets)
    local, local_log, local_dropped = driver_run(plan, rows, times, delay, finish, buckets=buckets)
    same(local, panes)
    assert (local_log, local_dropped) == (log, dropped)
    expected, engine_dropped = advance_oracle(plan, rows, log, finish)
    same(panes, expected)
    assert dropped == engine_dropped
    if finish:
        replayed, replay_dropped = replay_oracle(plan, rows, log)
        same(panes, replayed)
        assert dropped == replay_dropped


@SETTINGS
@given(streams(), st.sampled_from([ast.Sessions(D(90 * SECOND)), ast.Sessions(D(20 * SECOND))]),
       st.sampled_from([ast.WatermarkEarlyLate(early=ast.Period(D(30 * SECOND)), late=W),
                        ast.Sequence((ast.RepeatUntil(ast.Period(D(MINUTE)), W), ast.Repeat(W))), None]),
       LATENESS, DELAYS)
def test_owned_sessions_merging_with_retractions(stream, window, trigger, lateness, delay):
    """Merging sessions with retractions: the distributed step, the driver-local step,
    `Engine.advance` and the TIMELINE replay agree."""
    rows, times, _ = stream
    plan = plan_of(window, trigger, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, lateness)
    panes, log, dropped = owned_run(plan, rows, times, delay, True, buckets=2)
    local, local_log, local_dropped = driver_run(plan, rows, times, delay, True, buckets=2)
    same(local, panes)
    assert (local_log, local_dropped) == (log, dropped)
    expected, engine_dropped = advance_oracle(plan, rows, log, True)
    same(panes, expected)
    replayed, replay_dropped = replay_oracle(plan, rows, log)
    same(panes, replayed)
    assert dropped == engine_dropped == replay_dropped


def test_the_watermark_log_is_sparks_rule():
    """W(N) = max event time of the batches before N, minus the delay, in whole milliseconds."""
    rows = pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [10 * SECOND + 999, 70 * SECOND, 40 * SECOND],
                         "v": pd.array([1, 2, 3], dtype="Int64"), "batch": [0, 1, 1]})
    plan = plan_of(ast.Fixed(D(MINUTE)), None, ast.AccumulationMode.DISCARDING, 0)
    panes, log, _ = owned_run(plan, rows, np.array([100, 200, 300], np.int64) * SECOND, 5 * SECOND, True, buckets=1)
    assert log == [(100 * SECOND, NEG_INF), (200 * SECOND, 5 * SECOND), (300 * SECOND, 65 * SECOND)]
    assert panes[["k", "total", "window_start", "pane_timing", "emit_time"]].values.tolist() == [
        ["a", 1, 0, "ON_TIME", 300 * SECOND], ["b", 3, 0, "ON_TIME", 300 * SECOND],
        ["a", 2, 60 * SECOND, "ON_TIME", 300 * SECOND]]


@SETTINGS
@given(streams(), st.sampled_from([ast.Fixed(D(MINUTE)), ast.Fixed(D(MINUTE), D(20 * SECOND))]),
       st.sampled_from([None, ast.WatermarkEarlyLate(early=ast.Period(D(30 * SECOND)))]), MODES, LATENESS, DELAYS)
def test_the_driver_steps_pyarrow_partials_equal_sparks(stream, window, trigger, mode, lateness, delay):
    """Where the rows combine, the distributed step over Spark's partials (here `combined`, as
    `partials_sql` computes them) and the driver-local step over pyarrow's (`batch_partials`, the
    finish markers among them) give `Engine.advance`'s panes and drops over the rows."""
    rows, times, finish = stream
    plan = plan_of(window, trigger, mode, lateness)
    assert path_for(plan, input=STREAM, operator="combine", types={"k": "string", "v": "bigint"}).name == "combined"
    panes, log, dropped = driver_run(plan, rows, times, delay, finish, buckets=2, combine=True)
    theirs, their_log, their_dropped = owned_run(plan, rows, times, delay, finish, buckets=2, combine=True)
    same(panes, theirs)
    assert (log, dropped) == (their_log, their_dropped)
    expected, engine_dropped = advance_oracle(plan, rows, log, finish)
    same(panes, expected)
    assert dropped == engine_dropped
