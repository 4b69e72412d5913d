"""Benchmark of the engine alone (no Spark), one core: events per second.

    python benchmarks/engine.py [--events 1000000] [--keys 10000] [--out benchmarks/results/engine.json]

Cases, each with its throughput target, over a synthetic clickstream (benchmarks/clickstream.py):
  (a) FIXED(SIZE 1h), default trigger, bounded data           target >= 2,000,000 events/s
  (b) SESSIONS(GAP 5m), SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK)),
      ACCUMULATING AND RETRACTING, replayed arrivals, watermark 1 minute behind   target >= 500,000
  (c) SESSIONS(GAP 5m), default trigger, bounded data            target >= 2,000,000
Each case runs the engine as the Spark path calls it (one call over all keys, panes unordered);
the best of three runs is reported, with the reference per-key loop for comparison on (b).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402
from clickstream import MINUTE, clickstream  # noqa: E402

from sqlflow import ast  # noqa: E402
from sqlflow.engine.aggregates import Aggregate  # noqa: E402
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME  # noqa: E402
from sqlflow.engine.plan import EnginePlan  # noqa: E402
from sqlflow.engine.runner import Engine  # noqa: E402
from sqlflow.engine.watermarks import bounded_delay  # noqa: E402

HOUR = 60 * MINUTE
D = ast.Duration
EARLY_LATE = ast.Sequence((ast.RepeatUntil(ast.Period(D(MINUTE)), ast.Watermark()), ast.Repeat(ast.Watermark())))
CASES = {
    "a_fixed_default_bounded": (ast.Fixed(D(HOUR)), None, ast.AccumulationMode.ACCUMULATING, False, 2_000_000),
    "b_sessions_early_late_retracting_replay": (ast.Sessions(D(5 * MINUTE)), EARLY_LATE,
                                                ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, True, 500_000),
    "c_sessions_default_bounded": (ast.Sessions(D(5 * MINUTE)), None, ast.AccumulationMode.ACCUMULATING, False,
                                   2_000_000),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "engine.json"))
    args = ap.parse_args(argv)
    facts, at_start = provenance.run_facts("engine.py", argv), provenance.load()

    data = clickstream(args.events, args.keys).rename(columns={"event_time": EVENT_TIME, "arrival_time": ARRIVAL_TIME})
    timeline = bounded_delay(data[ARRIVAL_TIME].to_numpy(), data[EVENT_TIME].to_numpy(), MINUTE)
    aggs = (Aggregate("sum", "amount", "total"), Aggregate("count_star", None, "clicks"))
    results = {}
    for name, (window, trigger, mode, replay, target) in CASES.items():
        plan = EnginePlan(ast.Windowing(ast.WindowClause(window), trigger, None, ast.Emit(mode)), aggs,
                          keys=("user_id",))
        engine = Engine(plan)
        best, out = float("inf"), None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = engine.run(data, timeline=timeline if replay else None, replay=replay, ordered=False)
            best = min(best, time.perf_counter() - t0)
        results[name] = {
            "events_per_second": round(args.events / best),
            "seconds": round(best, 3),
            "target_events_per_second": target,
            "meets_target": args.events / best >= target,
            "output_rows": len(out.panes),
            "metrics": out.metrics,
        }
        print(f"{name:45s} {args.events / best:>12,.0f} events/s  (target {target:,})  {len(out.panes):,} rows")
    # the definition, for comparison, on a tenth of the input
    small = data.iloc[: args.events // 10]
    window, trigger, mode, _, _ = CASES["b_sessions_early_late_retracting_replay"]
    engine = Engine(EnginePlan(ast.Windowing(ast.WindowClause(window), trigger, None, ast.Emit(mode)), aggs,
                               keys=("user_id",)))
    t0 = time.perf_counter()
    engine.run(small, timeline=timeline, replay=True, reference=True, ordered=False)
    ref = len(small) / (time.perf_counter() - t0)
    results["b_reference_per_key_loop"] = {"events_per_second": round(ref), "events": len(small)}
    print(f"{'b, per-key reference loop (1/10 of input)':45s} {ref:>12,.0f} events/s")

    report = {
        "record": provenance.record(facts, at_start),
        "events": args.events, "keys": args.keys,
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
