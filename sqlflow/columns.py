"""Every column sqlflow adds to a query's data, and the values it puts in them: one place.

The driver (sqlflow/spark) writes Spark SQL that computes the engine's input columns, the
executors (udfs/) answer with rows in an agreed shape, and the driver turns those back into the
pane columns users see. A name or a code that differs between two sides gives wrong data, not an
error, so each is written once, here, and both sides import it.

Layering: the bottom layer, beside `ast`, `errors` and `time`. It imports nothing from the project
and nothing heavy (Spark types are DDL type names, not pyspark objects), so every layer imports
it: the engine and the executors as much as the frontend, the Spark layer and the interfaces.

A module's own scratch columns, which never leave it, are `PREFIX` + a word, named where they are
used. Not here, because they are not columns: the frontend's clause markers (`__sqlflow_windowing_0`,
`__sqlflow_watermark_0`: identifiers standing in for sqlflow clauses while sqlglot parses) and
its printing placeholder (`__sqlflow_alias__`), in sqlflow/frontend/dialect.py, and the named
parameters positional ones become (`:__sqlflow_p0`, sqlflow/plan/params.py).

>>> key_column(0), agg_column(2), when_column(1), null_mask("k0"), metric_column("panes")
('__sqlflow_k0', '__sqlflow_agg2', '__sqlflow_when1', '__sqlflow_null_k0', '__sqlflow_m_panes')
>>> pane_columns(retracting=True)[-2:]
('output_time', 'is_retraction')
>>> sorted(DROP_METRICS.values())[:2]
['dropped_bad_gap', 'dropped_closed_window']
"""
from __future__ import annotations

PREFIX = "__sqlflow_"

# ------------------------------------------------------------------ pane columns (what users see)

WINDOW_START = "window_start"
WINDOW_END = "window_end"
PANE_INDEX = "pane_index"
PANE_TIMING = "pane_timing"
IS_LAST = "is_last"
EMIT_TIME = "emit_time"
OUTPUT_TIME = "output_time"
IS_RETRACTION = "is_retraction"

#: the pane columns every windowed SELECT adds, in output order
PANE_COLUMNS = (WINDOW_START, WINDOW_END, PANE_INDEX, PANE_TIMING, IS_LAST, EMIT_TIME, OUTPUT_TIME)
#: ... and the retraction flag after them, in ACCUMULATING AND RETRACTING mode only
RETRACTION_COLUMN = IS_RETRACTION
ALL_PANE_COLUMNS = PANE_COLUMNS + (IS_RETRACTION,)

#: their Spark types (DDL type names)
PANE_TYPES = {WINDOW_START: "timestamp", WINDOW_END: "timestamp", PANE_INDEX: "bigint", PANE_TIMING: "string",
              IS_LAST: "boolean", EMIT_TIME: "timestamp", OUTPUT_TIME: "timestamp", IS_RETRACTION: "boolean"}
#: the pane columns that may hold NULL (a GLOBAL window has no bounds nor output time, bounded
#: data no emit time)
PANE_NULLABLE = frozenset({WINDOW_START, WINDOW_END, EMIT_TIME, OUTPUT_TIME})
#: pane columns holding times: TIMESTAMP for users, int64 microseconds from the engine to the driver
PANE_TIMES = tuple(c for c in ALL_PANE_COLUMNS if PANE_TYPES[c] == "timestamp")

#: pane timings (column pane_timing)
EARLY, ON_TIME, LATE = "EARLY", "ON_TIME", "LATE"


def pane_columns(retracting: bool) -> tuple[str, ...]:
    """The pane columns of a query in an accumulation mode that retracts or not."""
    return ALL_PANE_COLUMNS if retracting else PANE_COLUMNS


# ------------------------------------------------------------------ the engine's input columns

#: event time, arrival time of a replay, per-row session gap: int64 microseconds for the engine
EVENT_TIME = PREFIX + "et"
ARRIVAL_TIME = PREFIX + "at"
GAP = PREFIX + "gap"
WHEN_PREFIX = PREFIX + "when"
KEY_PREFIX = PREFIX + "k"
ARG_PREFIX = PREFIX + "a"
AGG_PREFIX = PREFIX + "agg"


def when_column(i: int) -> str:
    """The column of the i-th WHEN predicate of a trigger (a boolean per element)."""
    return f"{WHEN_PREFIX}{i}"


def key_column(i: int) -> str:
    """The column of the i-th GROUP BY key of a windowed SELECT's input relation."""
    return f"{KEY_PREFIX}{i}"


def arg_column(i: int) -> str:
    """The column of the i-th distinct aggregate argument of a windowed SELECT's input relation."""
    return f"{ARG_PREFIX}{i}"


def agg_column(j: int) -> str:
    """The column of the j-th aggregate call's result in the panes relation."""
    return f"{AGG_PREFIX}{j}"


# ------------------------------------------------------------------ the executors' wire format

#: what a row of an executor's input or output is (INT)
KIND = PREFIX + "kind"
#: row kinds, one encoding for both executors (udfs/bucket.py, udfs/streaming.py); a code never
#: means two things. Output rows: a pane (or retraction), an input row the engine dropped, counters
PANE, DROPPED, METRICS = 0, 1, 2
#: input rows of the streaming operator: data, a heartbeat (a partition's max event time), end of
#: input, and a bucket's data rows packed in one row (column PACK, udfs/pack.py)
DATA, HEARTBEAT, FINISH, PACKED = 3, 4, 5, 6
#: ... and of a chained stage (a windowed SELECT over a windowed stage on a stream): a report of
#: the stage before (the REPORT_* columns)
REPORT = 7
#: ... and of the owned-sink executor's output: a bucket's new state (the STATE_* columns, udfs/batch_step.py)
STATE = 8
KIND_NAMES = {PANE: "pane", DROPPED: "dropped", METRICS: "metrics", DATA: "data", HEARTBEAT: "heartbeat",
              FINISH: "finish", PACKED: "packed", REPORT: "report", STATE: "state"}

#: a dropped row's reason (STRING)
REASON = PREFIX + "reason"
#: bounded path: whether a pane is its window's final value (BOOLEAN)
FINAL = PREFIX + "final"
#: bounded path: the input rows of one bucket, on its METRICS row (BIGINT)
ROWS = PREFIX + "rows"
#: bounded path, replays: when a pane row's watermark hold starts (BIGINT microseconds, NULL: not
#: held), for the output watermark a later windowed stage reads (sqlflow.engine.holds)
HOLD_SINCE = PREFIX + "hold_since"
#: ... and when it ends (its emission, or, for a retraction, when the watermark passed the end of
#: the window it was pending in: docs/semantics.md, 1.3)
HOLD_UNTIL = PREFIX + "hold_until"
#: prefix of the NULL mask of a BIGINT input column (the column itself then holds 0 for NULL)
NULL_MASK = PREFIX + "null_"
#: how many input rows a combined element stands for (BIGINT), and the largest event time among them
WEIGHT = PREFIX + "weight"
LATEST = PREFIX + "latest"
#: a stream under `WATERMARK ts ASCENDING PER p`: each row's partition (its value as a string)
PARTITION = PREFIX + "partition"
#: partial aggregates of combined rows
PART_PREFIX = PREFIX + "part"
#: streaming: the hash bucket of a row's keys (INT) and Spark's watermark column (TIMESTAMP)
BUCKET = PREFIX + "bucket"
WM_COLUMN = PREFIX + "wm"
#: the owned-sink executor's bucket state, one row per bucket and batch (udfs/batch_step.py): the
#: format version of the engine state bytes (INT) and the bytes (BINARY, sqlflow.engine.state_codec)
STATE_FORMAT = PREFIX + "state_format"
STATE_BYTES = PREFIX + "state"
#: a partial SUM over one micro-batch's rows of a key and window that left BIGINT (BOOLEAN)
PARTIAL_OVERFLOW = PREFIX + "partial_overflow"
#: ... and the bucket's bookkeeping beside them (`udfs.streaming.Meta`'s fields of these names)
STATE_META = ("wm", "p", "keys", "windows", "next_wm", "next_proc", "finished", "seen", "bytes")


def state_meta_column(field: str) -> str:
    """The column of one `STATE_META` field in the owned-sink executor's output and state files."""
    return PREFIX + "s_" + field
#: several watermarked inputs of one window (UNION ALL): the number of a row's source (INT), in
#: the order the sources are written (sqlflow/spark/streaming/several.py)
SOURCE = PREFIX + "source"
#: streaming: a PACKED row's data rows, an Arrow IPC stream (BINARY, udfs/pack.py)
PACK = PREFIX + "pack"
#: streaming, chained stages (docs/pipelines.md, "On a stream"): what each call of a stage's
#: bucket tells the stage after it, on its METRICS row (BIGINT; DONE BOOLEAN): its bucket, its
#: call number (larger: later), its input watermark and holds after the call (engine
#: microseconds; the output watermark is their minimum), the batch time, whether its input ended
REPORT_FROM = PREFIX + "from_bucket"
REPORT_SEQ = PREFIX + "seq"
REPORT_WM = PREFIX + "report_wm"
REPORT_HELD = PREFIX + "report_held"
REPORT_TIME = PREFIX + "report_time"
REPORT_DONE = PREFIX + "report_done"
REPORT_COLUMNS = (REPORT_FROM, REPORT_SEQ, REPORT_WM, REPORT_HELD, REPORT_TIME, REPORT_DONE)
#: streaming: prefix of the counter columns on a METRICS row (BIGINT)
METRIC_PREFIX = PREFIX + "m_"

#: the columns of an executor's output rows besides keys, aggregates and argument echoes, with
#: their Spark types; both executors write them (udfs/bucket.py, udfs/streaming.py), each the
#: ones it needs. KIND says what a row is. A pane fills the pane columns, times as int64
#: microseconds (the driver converts them); a dropped row fills EVENT_TIME, ARRIVAL_TIME, REASON
#: and the window it missed in WINDOW_START and WINDOW_END (NULL: none), and on a stream EMIT_TIME
#: (when it was dropped); a METRICS row fills ROWS or the counter columns (`metric_column`).
OUTPUT_TYPES = {
    KIND: "int", REASON: "string", FINAL: "boolean", ROWS: "bigint",
    **{c: ("bigint" if c in PANE_TIMES else PANE_TYPES[c]) for c in ALL_PANE_COLUMNS},
    EVENT_TIME: "bigint", ARRIVAL_TIME: "bigint", HOLD_SINCE: "bigint",
    HOLD_UNTIL: "bigint",
}
#: ... and the streaming operator's report columns (not the bounded job's)
REPORT_TYPES = {**{c: "bigint" for c in REPORT_COLUMNS}, REPORT_DONE: "boolean"}
#: the bounded bucket job's columns besides keys, aggregates and argument echoes, in order
BUCKET_OUTPUT_COLUMNS = tuple(OUTPUT_TYPES)


def metric_column(name: str) -> str:
    """The column of the counter `name` on the streaming operator's METRICS rows."""
    return METRIC_PREFIX + name


def part_column(j: int) -> str:
    """The column of the j-th partial aggregate of combined rows."""
    return f"{PART_PREFIX}{j}"


def null_mask(column: str) -> str:
    """The NULL-mask column that travels with the BIGINT `column`."""
    return NULL_MASK + column


# ------------------------------------------------------------------ drop reasons and counters

#: why the engine dropped an input row (from a window: the (row, window) assignment)
TOO_LATE = "too late"
CLOSED = "closed window"
NULL_EVENT_TIME = "null event time"
NULL_ARRIVAL_TIME = "null arrival time"
BAD_GAP = "null or non-positive session gap"
#: ... and under `WATERMARK ts ASCENDING PER p`, before any window: the row is older than its
#: partition's latest event time (docs/semantics.md 1.2; counted as `dropped_behind_partition`)
BEHIND_PARTITION = "behind its partition"
#: the reasons of a (row, window) assignment as int8 codes (the engine's vectorised paths), 0: kept
DROP_CODE = {"": 0, TOO_LATE: 1, CLOSED: 2}
#: drop reason -> the counter that counts it
DROP_METRICS = {NULL_EVENT_TIME: "dropped_null_event_time", NULL_ARRIVAL_TIME: "dropped_null_arrival_time",
                BAD_GAP: "dropped_bad_gap", TOO_LATE: "dropped_too_late", CLOSED: "dropped_closed_window"}
#: the counters of a bounded result (`sqlflow.metrics(df)`)
METRIC_NAMES = ("input_rows", "panes", "retractions", *DROP_METRICS.values())
#: the counters the streaming operator sums over its buckets, and the values it reduces with max()
#: (a batch's processing time and watermark, engine microseconds, and whether it finished the input)
STREAM_COUNTERS = ("engine_rows", "panes", "retractions", "dropped_too_late", "dropped_closed_window",
                   "dropped_null_event_time", "dropped_bad_gap", "buckets_advanced")
STREAM_GAUGES = ("batch_time", "watermark", "finished")
#: ... and the values it sums over the buckets of a batch: what the operator keeps when the batch ends
#: (keys, live windows, bytes of the engine state); every bucket reports in every batch that moves the
#: watermark or brings data (heartbeats), so the sums are the whole operator's
STREAM_LIVE = ("state_keys", "state_windows", "state_bytes")

#: a counter of one source of several (`late_by_source`): counter, this mark, the source's name
BY_SOURCE = "@"


def source_metric(counter: str, source: str) -> str:
    """The counter `counter` of the rows of one source of several (its relation name or alias).

    >>> source_metric("dropped_too_late", "clicks")
    'dropped_too_late@clicks'
    """
    return f"{counter}{BY_SOURCE}{source}"


#: the columns of dropped rows as users get them (besides keys and argument values)
DROPPED_EVENT_TIME, DROPPED_ARRIVAL_TIME, DROPPED_REASON = "event_time", "arrival_time", "reason"
#: ... and of several watermarked inputs, the name of the row's source
DROPPED_SOURCE = "source"

# ------------------------------------------------------------------ relations sqlflow names

#: the one-row relation of NULL pane columns a naming query joins (sqlflow/spark/select_types.py)
PANE_ALIAS = PREFIX + "pane"


def view_name(kind: str, run_id: str, n: int) -> str:
    """The temporary view of a statement's run (`kind`: panes, stream, ...)."""
    return f"{PREFIX}{kind}_{run_id}_{n}"


#: a regular expression matching every `view_name` (Spark's messages name them)
VIEW_PATTERN = PREFIX + r"[a-z]+_[0-9a-f]+_\d+"
