"""Scenario 2p's changes measured against each other in one process (benchmarks/pipeline.py;
README, the 2p note): the same pipeline query with the first stage kept or not
(`Runner.materialise`, switched off as on Spark Connect) and the keyless second stage spread over
buckets by window or not (`engine_path.spread_over`), interleaved round by round with the
hand-written reference and the first stage alone, so that a shared machine's load hits every side
alike. (The output watermark's pruning of holds has no switch: it is in every side.)

    python benchmarks/pipeline_ab.py --rows 2000000 --repeat 2
"""
from __future__ import annotations

import argparse
import statistics
import time

import compare
import events
import pipeline
from measure import noop

SIDES = {"before": (False, False), "kept": (True, False), "kept+spread": (True, True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2, help="measured rounds, after one warm-up round")
    args = ap.parse_args()

    import sqlflow
    from sqlflow.spark import engine_path, execute
    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-pipeline-ab", conf={"spark.driver.memory": "8g"})
    compare.load(spark, events.dataset(args.rows))
    query = pipeline.query(compare.Q_SESSIONS_REPLAY)
    connect, spread = execute.is_connect, engine_path.spread_over

    def timed(run) -> float:
        clock = time.perf_counter()
        noop(run())
        return time.perf_counter() - clock

    def side(keep: bool, spreads: bool):
        execute.is_connect = connect if keep else (lambda spark: True)
        engine_path.spread_over = spread if spreads else (lambda *a: None)
        return sqlflow.sql(spark, query)

    runs = {**{name: (lambda v=v: side(*v)) for name, v in SIDES.items()},
            "reference": lambda: pipeline.hand(compare.hand_sessions(spark)),
            "single_stage": lambda: sqlflow.sql(spark, compare.Q_SESSIONS_REPLAY)}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.repeat + 1):
        for name, run in runs.items():
            s = timed(run)
            print(f"round {round_}{' (warm-up)' if not round_ else ''}: {name} {s:.2f} s", flush=True)
            if round_:
                seconds[name].append(s)
    execute.is_connect, engine_path.spread_over = connect, spread
    med = {name: statistics.median(s) for name, s in seconds.items()}
    print("medians (s):", {k: round(v, 2) for k, v in med.items()})
    print("speed-up over before:", {k: round(med["before"] / med[k], 2) for k in SIDES})
    print("throughput / reference:", {k: round(med["reference"] / med[k], 3) for k in SIDES})
    print("time / first stage alone:", {k: round(med[k] / med["single_stage"], 2) for k in SIDES})
    spark.stop()


if __name__ == "__main__":
    main()
