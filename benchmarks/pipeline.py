"""Scenario 2p of benchmarks/compare.py: scenario 2's replayed sessions as the first stage of a
two-stage pipeline (docs/pipelines.md, "A window over a replayed stage"), the sessions counted per
hour of their output time by a second replayed stage, whose watermark is the sessions' output
watermark. The reference is the best hand-written Spark for the same final counts: native
`session_window` (final sessions only), then `window()` over each session's end. Scenario 2's
single-stage query runs in the same rounds, so the second stage's own cost is measured too."""
from __future__ import annotations

from finals import same_rows
from measure import measure, noop

COLUMNS = ["window_start", "window_end", "sessions", "clicks", "total"]


def query(first_stage: str, minutes: int = 60) -> str:
    """The pipeline over `first_stage` (a sessions query with clicks and total per user)."""
    return f"""WITH sessions AS ({first_stage})
SELECT COUNT(*) AS sessions, SUM(clicks) AS clicks, SUM(total) AS total FROM sessions
WINDOW FIXED(SIZE {minutes}m) ON output_time
TRIGGER WATERMARK LATE COUNT 1
ALLOWED LATENESS 1h"""


def hand(sessions, minutes: int = 60):
    """The final sessions (a DataFrame of window_start, window_end, clicks, total) counted per hour
    of their output time (OUTPUT TIMESTAMP END OF WINDOW, the default: the session's end - 1us)."""
    from pyspark.sql import functions as F

    hour = F.window(F.col("window_end") - F.expr("INTERVAL 1 MICROSECOND"), f"{minutes} minutes")
    return (sessions.groupBy(hour)
            .agg(F.count("*").alias("sessions"), F.sum("clicks").alias("clicks"), F.sum("total").alias("total"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "sessions", "clicks", "total"))


def finals(df):
    """The final count of every hour: its last pane (the second stage accumulates); an hour whose
    sessions were all retracted (merged into a session that ends in a later hour) is dropped, as it
    has no session in the reference."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    last = Window.partitionBy("window_start", "window_end").orderBy(F.col("pane_index").desc())
    return df.withColumn("_n", F.row_number().over(last)).where("_n = 1 AND sessions <> 0").select(*COLUMNS)


def scenario(spark, rows: int, repeat: int, warmup: int, *, first_stage: str, hand_sessions) -> dict:
    """Time the pipeline, its hand-written reference and its first stage alone (`single_stage`,
    with `stage_two_overhead`: the pipeline's time over it), interleaved; then check that the final
    counts are equal. The input is the `events` view (`compare.load`)."""
    import sqlflow

    pipeline = query(first_stage)
    sides = {"sqlflow": lambda: noop(sqlflow.sql(spark, pipeline)),
             "reference": lambda: noop(hand(hand_sessions(spark))),
             "single_stage": lambda: noop(sqlflow.sql(spark, first_stage))}
    result = measure(sides, rows, repeat, warmup)
    single = result.pop("single_stage")
    result["single_stage"] = dict(single, stage_two_overhead=round(result["sqlflow"]["median_s"] / single["median_s"], 3))
    result["check"] = same_rows(finals(sqlflow.sql(spark, pipeline)), hand(hand_sessions(spark)), cols=COLUMNS)
    return dict(result, rows=rows)
