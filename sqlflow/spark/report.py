"""What a `sqlflow.sql` result carries besides its rows: per windowed SELECT, the dropped input
rows and the counts (`sqlflow.dropped(df)`, `sqlflow.metrics(df)`).

Both are lazy: nothing is computed until asked, and then by Spark (`metrics` runs one small
aggregation per windowed SELECT). Rows dropped for a NULL event time are excluded from every
window and counted; `metrics` warns when there are any.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..columns import (BY_SOURCE, DROP_METRICS, DROPPED, IS_RETRACTION, KIND, METRIC_NAMES, METRICS, PANE, REASON, ROWS,
                       SOURCE, TOO_LATE, source_metric)
from ..plan import user_warnings

#: the attribute of a result DataFrame holding its Report
ATTRIBUTE = "_sqlflow_report"


class SqlflowDataWarning(UserWarning):
    """Input rows were excluded from the result (NULL event times, NULL arrival times of a replay)."""


@dataclass
class Stage:
    """One windowed SELECT of a statement, as it ran."""

    number: int
    label: str
    path: str
    why: str
    mode: str
    engine_mode: str | None = None
    replay: str | None = None
    buckets: str | None = None
    output_time: str | None = None  # the OUTPUT TIMESTAMP policy (column output_time)
    # lazily evaluated DataFrames
    output: Any = None         # engine path: the bucket jobs' raw output
    dropped_rows: Any = None   # dropped input rows (user-facing columns), or a function building them
    input_rows: Any = None     # native path: the input relation, for counting
    panes: Any = None          # native path: the panes, for counting
    panes_are_result: bool = False  # native path: the statement's result is the panes (`panes` set from it)
    null_event_time: Any = None  # native path: Column condition of a NULL event time
    bad_gap: Any = None          # native path: Column condition of a bad per-row gap
    extra: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # triggers that cannot fire (trigger_checks)
    # a replayed engine stage's time, for sqlflow.plot: its input watermark (an engine Timeline, in
    # microseconds; for a stage over a stage, that stage's output watermark), its watermark holds
    # (DataFrame since, until, value), the Stage whose panes it reads, and its own panes
    timeline: object = None
    holds: object = None
    reads: "Stage | None" = None
    pane_frame: object = None     # function() -> a DataFrame of its panes (the query's column names)

    def dropped(self):
        """The dropped input rows as a DataFrame (built on first use: most queries never ask)."""
        if callable(self.dropped_rows):
            self.dropped_rows = self.dropped_rows()
        return self.dropped_rows

    def describe(self) -> str:
        lines = [f"{self.label}:", f"  path: {self.path} ({self.why})", f"  emit: {self.mode}"]
        if self.output_time:
            lines.append(f"  output time: {self.output_time}")
        if self.engine_mode:
            lines.append(f"  engine: {self.engine_mode}")
        lines.append(f"  input: {self.replay or 'bounded (rows in event-time order, no arrival times)'}")
        if self.buckets:
            lines.append(f"  buckets: {self.buckets}")
        if self.extra.get("executor"):
            lines.append(f"  executor: {self.extra['executor']}")
        lines += [f"  warning: {note}" for note in self.notes]
        return "\n".join(lines)

    def metrics(self) -> dict:
        from pyspark.sql import functions as F

        counts = dict.fromkeys(METRIC_NAMES, 0)
        if self.output is not None:
            by_source = SOURCE in self.output.columns  # several replayed sources: late rows per source
            rows = (self.output.groupBy(F.col(KIND).alias("kind"), F.col(REASON).alias("reason"),
                                        F.col(IS_RETRACTION).alias("r"),
                                        (F.col(SOURCE) if by_source else F.lit(None)).alias("source"))
                    .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col(ROWS)).alias("rows")).collect())
            for name in self.extra.get("sources", ()):
                counts[source_metric("dropped_too_late", name)] = 0
            for row in rows:
                if row["kind"] == DROPPED and row["reason"] == TOO_LATE and row["source"] is not None:
                    key = source_metric("dropped_too_late", row["source"])
                    counts[key] = counts.get(key, 0) + int(row["n"])
                if row["kind"] == METRICS:
                    counts["input_rows"] += int(row["rows"] or 0)
                elif row["kind"] == PANE:
                    counts["retractions" if row["r"] else "panes"] += int(row["n"])
                elif row["kind"] == DROPPED:
                    counts[DROP_METRICS[row["reason"]]] += int(row["n"])
        else:
            agg = self.input_rows.agg(
                F.count(F.lit(1)).alias("n"),
                F.count_if(self.null_event_time).alias("null_et"),
                (F.count_if(self.bad_gap) if self.bad_gap is not None else F.lit(0)).alias("bad_gap")).collect()[0]
            counts["input_rows"] = int(agg["n"])
            counts["dropped_null_event_time"] = int(agg["null_et"])
            counts["dropped_bad_gap"] = int(agg["bad_gap"])
            counts["panes"] = self.panes.count()
        if counts["dropped_null_event_time"]:
            user_warnings.warn(f"sqlflow: {self.label}: {counts['dropped_null_event_time']} input rows have a NULL "
                          "event time; they are in no window (sqlflow.dropped(df) lists them)", SqlflowDataWarning)
        if counts["dropped_null_arrival_time"]:
            user_warnings.warn(f"sqlflow: {self.label}: {counts['dropped_null_arrival_time']} input rows of the replay "
                          "have a NULL arrival time; they never arrive (sqlflow.dropped(df) lists them)", SqlflowDataWarning)
        return counts


@dataclass
class Report:
    """Every windowed SELECT of one `sqlflow.sql` statement."""

    stages: list[Stage] = field(default_factory=list)
    #: the statement's Spark SQL and its arguments (a stream's owned-sink executor runs it over
    #: each micro-batch's panes)
    sql: str | None = None
    args: object = None

    def explain(self) -> str:
        if not self.stages:
            return "plain Spark SQL: no windowed SELECT, the statement goes to spark.sql unchanged"
        return "\n".join(stage.describe() for stage in self.stages)


def report_of(df) -> Report:
    if getattr(df, "isStreaming", False):
        from ..errors import SqlflowUnsupportedError
        from .conf import DROPPED_PATH

        raise SqlflowUnsupportedError(
            "a streaming result has no end to count up to: its counts are in the running query's "
            "progress (sqlflow.spark.streaming.query_metrics(query)) and its dropped rows in the "
            f"side output (streaming.start(df, ..., dropped_path=...); in SQL, SET {DROPPED_PATH} "
            "before INSERT INTO)")
    report = getattr(df, ATTRIBUTE, None)
    if report is None:
        from ..errors import SqlflowError

        raise SqlflowError("this DataFrame did not come from sqlflow.sql (or was transformed since): "
                           "call dropped() and metrics() on the DataFrame sqlflow.sql returned")
    return report


def dropped(df):
    """The input rows the windowed SELECTs of `df`'s statement dropped, as a DataFrame.

    Columns: `stage` (1 for the first windowed SELECT in the text, ...), the GROUP BY keys and
    aggregate arguments of the row (named as in the query), `event_time`, `arrival_time` (NULL
    without ARRIVAL), `reason` ('null event time', 'null arrival time' (a replay's row that never
    arrives), 'null or non-positive session gap', 'too late', 'closed window') and the window it missed (`window_start`, `window_end`, NULL
    when the row is in no window at all).
    """
    from pyspark.sql import functions as F

    report = report_of(df)
    frames = [stage.dropped().select(F.lit(stage.number).alias("stage"), "*") for stage in report.stages]
    if not frames:
        spark = df.sparkSession
        return spark.createDataFrame([], "stage int, reason string")
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame, allowMissingColumns=True)
    return out


def metrics(df) -> dict:
    """Counts of the windowed SELECTs of `df`'s statement: input rows, panes, retractions and
    dropped rows by reason (and per source of several: `late_by_source`), summed over the windowed
    SELECTs, and per windowed SELECT under "stages". Runs Spark jobs; warns (SqlflowDataWarning) about rows with a NULL event time."""
    report = report_of(df)
    total: dict[str, Any] = dict.fromkeys(METRIC_NAMES, 0)
    stages = []
    for stage in report.stages:
        counts = stage.metrics()
        for k in METRIC_NAMES:
            total[k] += counts[k]
        for k in counts:  # late rows per source (several sources), an ordering's counts: summed as the rest
            if k not in METRIC_NAMES and isinstance(counts[k], int):
                total[k] = total.get(k, 0) + counts[k]
        stages.append({"stage": stage.number, "select": stage.label, "path": stage.path, **counts})
    total["stages"] = stages
    return total


def late_by_source(metrics: dict) -> dict[str, int]:
    """Of several watermarked sources feeding a window (docs/semantics.md, 9), replayed or
    streaming: the (row, window) pairs of each source dropped as too late, by the source's
    relation name or alias, from `sqlflow.metrics(df)` or `streaming.query_metrics(query)`.
    Rows are judged against the window's watermark, the minimum of the sources'.

    >>> late_by_source({"dropped_too_late": 3, "dropped_too_late@a": 1, "dropped_too_late@b": 2})
    {'a': 1, 'b': 2}
    """
    prefix = "dropped_too_late" + BY_SOURCE
    return {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}
