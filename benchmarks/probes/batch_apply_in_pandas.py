"""Batch groupBy(...).applyInPandas: one call per group? big groups vs maxRecordsPerBatch;
groupBy(expression); is a prior sortWithinPartitions order preserved inside a group?"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from _common import spark


def calls(pdf: pd.DataFrame) -> pd.DataFrame:
    ts = pdf["ts"].to_numpy()
    return pd.DataFrame({"g": [int(pdf["g"].iloc[0])], "rows": [len(pdf)],
                         "sorted_by_ts": [bool((np.diff(ts) >= 0).all())],
                         "cols": [",".join(pdf.columns)]})


def main():
    s = spark()
    n = 60_000
    rng = np.random.default_rng(0)
    pdf = pd.DataFrame({"k": rng.integers(0, 6, n), "ts": rng.permutation(n)})
    df = s.createDataFrame(pdf).repartition(4)  # rows in random order across 4 partitions
    out = "g long, rows long, sorted_by_ts boolean, cols string"
    for cap in ("10000", "1000"):
        s.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", cap)
        r = df.withColumn("g", F.col("k") % 2).groupBy("g").applyInPandas(calls, out).orderBy("g").collect()
        print(f"maxRecordsPerBatch={cap}: groups of 30000 rows -> calls {[(x.g, x.rows) for x in r]}")
    s.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    # groupBy(<expression>): allowed for applyInPandas? what does the function see?
    r = df.groupBy((F.col("k") % 2).alias("g")).applyInPandas(
        lambda p: pd.DataFrame({"g": [-1], "rows": [len(p)], "sorted_by_ts": [False], "cols": [",".join(p.columns)]}),
        out).collect()
    print("groupBy(expr.alias('g')).applyInPandas: calls", [(x.rows, x.cols) for x in r])

    variants = {
        "sortWithinPartitions(k, ts) then groupBy(k)":
            df.sortWithinPartitions("k", "ts"),
        "repartition(k).sortWithinPartitions(k, ts) then groupBy(k)":
            df.repartition("k").sortWithinPartitions("k", "ts"),
        "repartition(2, k).sortWithinPartitions(k, ts) then groupBy(k) [2 = shuffle partitions]":
            df.repartition(2, "k").sortWithinPartitions("k", "ts"),
        "orderBy(k, ts) then groupBy(k)":
            df.orderBy("k", "ts"),
    }
    for label, d in variants.items():
        g = d.withColumn("g", F.col("k")).groupBy("k").applyInPandas(calls, out)
        r = g.collect()
        plan = g._jdf.queryExecution().executedPlan().toString()
        print(f"{label}: all groups ts-sorted: {all(x.sorted_by_ts for x in r)} "
              f"({sum(x.sorted_by_ts for x in r)}/{len(r)}); exchanges in plan: {plan.count('Exchange')}, sorts: {plan.count('Sort [')}")
    s.conf.set("spark.sql.adaptive.enabled", "false")
    d = df.repartition("k").sortWithinPartitions("k", "ts")
    r = d.withColumn("g", F.col("k")).groupBy("k").applyInPandas(calls, out).collect()
    print(f"same with AQE off: repartition(k).sortWithinPartitions(k, ts): ts-sorted {sum(x.sorted_by_ts for x in r)}/{len(r)}")
    s.stop()


if __name__ == "__main__":
    main()
