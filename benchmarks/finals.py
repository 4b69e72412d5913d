"""What both sides of a comparison computed, as final values per window, and whether they agree
(benchmarks/compare.py, flink_compare.py)."""
from __future__ import annotations


def finals(df):
    """The final value of every window. With retractions: the sum of each window's panes, a
    retraction counting negatively (what a downstream consumer computes), windows that were
    retracted completely (merged into a bigger session) dropped. Otherwise the window's last pane.
    (`is_last` cannot be used: a window's last pane is only marked when it is emitted at the
    window's expiry, and after an on-time pane with no late data nothing is emitted then.)"""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = ["user_id", "window_start", "window_end"]
    if "is_retraction" in df.columns:
        sign = F.when(F.col("is_retraction"), -1).otherwise(1)
        return (df.groupBy(*keys).agg(F.sum(sign * F.col("clicks")).alias("clicks"),
                                      F.sum(sign * F.col("total")).alias("total"))
                .where("clicks <> 0"))
    if "pane_index" not in df.columns:
        return df
    last = Window.partitionBy(*keys).orderBy(F.col("pane_index").desc())
    return df.withColumn("_n", F.row_number().over(last)).where("_n = 1").select(*keys, "clicks", "total")


def live_sessions(panes):
    """Beam's final session values: its last pane per window, without the windows that were merged
    into a bigger session later (Beam has no retractions: their panes just stay in the output).
    A merged-away session lies inside the session it joined, so a key's live sessions are those
    not contained in another of its windows."""
    last = (panes.sort_values("pane_index").groupby(["user_id", "window_start", "window_end"], as_index=False)
            .last().sort_values(["user_id", "window_start", "window_end"], ascending=[True, True, False]))
    reach = last.groupby("user_id")["window_end"].cummax()
    before = reach.groupby(last["user_id"]).shift(1)  # the furthest end of the windows before this one
    return last[before.isna() | (last["window_end"] > before)]


def same_rows(a, b, cols=("user_id", "window_start", "window_end", "clicks", "total")) -> dict:
    cols = list(cols)
    a, b = a.select(*cols).cache(), b.select(*cols).cache()
    out = {"rows": a.count(), "reference_rows": b.count(),
           "only_sqlflow": a.exceptAll(b).count(), "only_reference": b.exceptAll(a).count()}
    a.unpersist()
    b.unpersist()
    out["equal"] = out["only_sqlflow"] == 0 and out["only_reference"] == 0
    return out
