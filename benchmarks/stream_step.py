"""The streaming operator's engine work alone (no Spark): one bucket's micro-batch steps.

    python benchmarks/stream_step.py [--rows 2000000] [--batches 10] [--buckets 8] [--reference-rows 200000]

The events of benchmarks/events.py, sorted by arrival and cut into --batches micro-batches as the
streaming benchmarks feed them; each batch's rows go to --buckets hash buckets of the key, and
every bucket runs `Engine.advance` once per batch, as `udfs/streaming.py` does: rows arrive at the
batch's time (its last arrival), judged against the watermark of the batch before; the watermark
is the largest event time of the batches so far minus the delay; the state is pickled and
unpickled between batches (the operator keeps it as one blob per bucket). The timed part is the
engine calls and the (un)pickling, per batch and bucket; the rows/s are over all buckets, on one
core. Cases:

- card: SESSIONS(GAP 30m), SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK)),
  ACCUMULATING AND RETRACTING, 10 s delay (the README's first query);
- fixed: FIXED(SIZE 1m), WATERMARK EARLY PERIOD 1s LATE WATERMARK, ALLOWED LATENESS 1m,
  ACCUMULATING (benchmarks/compare.py's scenario 3);
- f3: FIXED(SIZE 1m), the default trigger, a 30-minute delay (benchmarks/flink_compare.py's f3:
  each window stays live ~31 minutes of event time, so the blobs are the largest here).

Each case runs the vectorised step (`stream_step.py`, what `Engine.advance` runs) on all rows,
and the per-key reference loop and the vectorised step on the first --reference-rows rows. Also
reported: the largest pickled state of a bucket and its bytes per live window, and (`state_memory`)
the state of one bucket holding --memory-keys keys with a live session each. Results:
benchmarks/results/stream_step.json.
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import events as ev  # noqa: E402
import provenance  # noqa: E402

from sqlflow import ast  # noqa: E402
from sqlflow.engine.aggregates import Aggregate  # noqa: E402
from sqlflow.columns import EVENT_TIME  # noqa: E402
from sqlflow.engine.plan import EnginePlan  # noqa: E402
from sqlflow.engine.runner import Engine  # noqa: E402
from sqlflow.time import MINUTE, NEG_INF, SECOND  # noqa: E402

D = ast.Duration
W = ast.Watermark()
AGGS = (Aggregate("count_star", None, "clicks"), Aggregate("sum", "amount", "total"))
CARD = ast.Sequence((ast.RepeatUntil(ast.Period(D(MINUTE)), W), ast.Repeat(W)))
DELAY = 10 * SECOND
#: name: window, trigger, allowed lateness, accumulation, watermark delay
CASES = {
    "card": (ast.Sessions(D(30 * MINUTE)), CARD, None, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, DELAY),
    "fixed": (ast.Fixed(D(MINUTE)), ast.WatermarkEarlyLate(early=ast.Period(D(SECOND))), D(MINUTE),
              ast.AccumulationMode.ACCUMULATING, DELAY),
    "f3": (ast.Fixed(D(MINUTE)), None, None, ast.AccumulationMode.DISCARDING, 30 * MINUTE),
}


def batches(rows: int, n_batches: int, n_buckets: int, delay: int = DELAY):
    """[(p, wm_prev, wm_new, [bucket frames])] for the micro-batches of the first `rows` events."""
    data = ev.events(rows).sort_values("arrival_time", kind="stable").reset_index(drop=True)
    data = data.rename(columns={"event_time": EVENT_TIME})
    bucket = (data["user_id"].to_numpy() * 0x9E3779B1) % n_buckets
    cuts = np.linspace(0, len(data), n_batches + 1).astype(int)
    out, seen, wm = [], NEG_INF, NEG_INF
    for i in range(n_batches):
        part = data.iloc[cuts[i]:cuts[i + 1]]
        p = int(part["arrival_time"].max())
        # Spark's watermark of batch i: from the event times of the batches before it
        frames = [part[bucket[cuts[i]:cuts[i + 1]] == b][["user_id", "amount", EVENT_TIME]].reset_index(drop=True)
                  for b in range(n_buckets)]
        new_wm = wm if seen == NEG_INF else max(wm, seen - delay)
        out.append((p, wm, new_wm, frames))
        wm = new_wm
        seen = max(seen, int(part[EVENT_TIME].max()))
    return out


def run(engine: Engine, feed, how: str) -> dict:
    """Every bucket through every batch; seconds in the engine and in pickling, panes, state."""
    n_buckets = len(feed[0][3])
    states = [None] * n_buckets
    engine_s = pickle_s = 0.0
    panes = rows = written = 0
    largest = (0, 0)
    for p, wm_prev, wm_new, frames in feed:
        for b, frame in enumerate(frames):
            t0 = time.perf_counter()
            state = pickle.loads(states[b]) if states[b] is not None else None
            t1 = time.perf_counter()
            result, state = engine.advance(state, frame, p=p, wm_prev=wm_prev, wm_new=wm_new, ordered=False,
                                           reference=how == "reference")
            t2 = time.perf_counter()
            blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
            t3 = time.perf_counter()
            states[b] = blob
            written += len(blob)
            engine_s += t2 - t1
            pickle_s += (t1 - t0) + (t3 - t2)
            panes += len(result.panes)
            rows += len(frame)
            windows = engine.state_summary(state, wm_new)[1]
            largest = max(largest, (len(blob), windows))
    total = engine_s + pickle_s
    return {"rows": rows, "seconds": round(total, 3), "engine_seconds": round(engine_s, 3),
            "pickle_seconds": round(pickle_s, 3), "rows_per_second": round(rows / total),
            "output_rows": panes, "largest_state_bytes": largest[0], "its_live_windows": largest[1],
            "bytes_per_live_window": round(largest[0] / largest[1], 1) if largest[1] else None,
            "blob_bytes_written": written}  # what the operator's state reads and writes, over all calls


def state_bytes(state) -> int:
    """Bytes the state's arrays and key table hold in memory (object values included)."""
    total = 0

    def walk(x):
        nonlocal total
        if isinstance(x, np.ndarray):
            total += x.nbytes + (sum(sys.getsizeof(v) for v in x) if x.dtype == object else 0)
        elif isinstance(x, pd.DataFrame):
            total += int(x.memory_usage(deep=True, index=False).sum())
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(state)
    return total


def memory(keys: int) -> dict:
    """The state of one bucket holding `keys` keys, each with one live session of the README's first query
    that has emitted an EARLY pane (its lineage) and holds new pending input: bytes per live
    window, in memory and pickled; then the watermark passes every session and the state is
    empty again."""
    window, trigger, lateness, mode, _ = CASES["card"]
    engine = Engine(EnginePlan(ast.Windowing(ast.WindowClause(window), trigger, None, ast.Emit(mode)), AGGS,
                               keys=("user_id",)))
    t0 = ev.BASE
    ids = np.arange(keys, dtype=np.int64)
    rows = pd.DataFrame({"user_id": ids, "amount": np.ones(keys, np.int64), EVENT_TIME: t0 + ids % 1000})
    _, state = engine.advance(None, rows, p=t0, wm_prev=NEG_INF, wm_new=NEG_INF, ordered=False)
    # a minute later the PERIOD fires (EARLY panes: one lineage pane per window), more input arrives
    result, state = engine.advance(state, rows, p=t0 + MINUTE, wm_prev=NEG_INF, wm_new=t0 - MINUTE, ordered=False)
    windows = engine.state_summary(state, t0 - MINUTE)[1]
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    in_memory = state_bytes(state)
    _, after = engine.advance(state, rows.iloc[:0], p=t0 + 2 * MINUTE, wm_prev=t0 - MINUTE,
                              wm_new=t0 + 40 * MINUTE, ordered=False)
    out = {"keys": keys, "live_windows": windows, "early_panes": len(result.panes),
           "pickled_bytes": len(blob), "pickled_bytes_per_window": round(len(blob) / windows, 1),
           "in_memory_bytes": in_memory, "in_memory_bytes_per_window": round(in_memory / windows, 1),
           "windows_after_the_watermark_passes": engine.state_summary(after, t0 + 40 * MINUTE)[1]}
    print(json.dumps(out), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--reference-rows", type=int, default=200_000)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--memory-keys", type=int, default=1_000_000,
                    help="keys with a live session for the state measurement (0: skip)")
    ap.add_argument("--out", default=str(HERE / "results" / "stream_step.json"))
    args = ap.parse_args(argv)
    facts, at_start = provenance.run_facts("stream_step.py", argv), provenance.load()
    state_memory = memory(args.memory_keys) if args.memory_keys else None

    results = {}
    for name in args.cases.split(","):
        window, trigger, lateness, mode, delay = CASES[name]
        feed = batches(args.rows, args.batches, args.buckets, delay)
        small = batches(args.reference_rows, args.batches, args.buckets, delay) if args.reference_rows else None
        plan = EnginePlan(ast.Windowing(ast.WindowClause(window), trigger,
                                        ast.AllowedLateness(lateness) if lateness else None, ast.Emit(mode)),
                          AGGS, keys=("user_id",))
        engine = Engine(plan)
        results[name] = {"vectorised": run(engine, feed, "vectorised")}
        if small is not None:
            results[name]["reference"] = run(engine, small, "reference")
            results[name]["vectorised_same_rows_as_reference"] = run(engine, small, "vectorised")
        for how, r in results[name].items():
            print(f"{name:6s} {how:32s} {r['rows']:>9,} rows {r['rows_per_second']:>10,} rows/s "
                  f"(engine {r['engine_seconds']} s, pickle {r['pickle_seconds']} s) {r['output_rows']:,} panes, "
                  f"state {r['largest_state_bytes']:,} B / {r['its_live_windows']:,} windows, "
                  f"{r['blob_bytes_written']:,} B of blobs written", flush=True)
    report = {"record": provenance.record(facts, at_start, pandas=pd.__version__, numpy=np.__version__),
              "rows": args.rows, "batches": args.batches, "buckets": args.buckets,
              "results": results, "state_memory": state_memory}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
