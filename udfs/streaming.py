"""The streaming operator: `Engine.advance` inside Spark's transformWithStateInPandas (TWS).

Runs on Spark's Python workers. The driver side (`sqlflow/spark/streaming/stateful.py`) groups the input
by a hash bucket of the GROUP BY key, so one Python call advances many keys at once, and gives
every bucket three kinds of input row (column `KIND`): data, heartbeats (one per bucket and input
partition in every batch with data, for processing-time triggers) and finish rows (end of input).

Per bucket, one value of state (`bucket`, `STATE_SCHEMA`): the `Meta` fields and the engine
state as one binary field, so a call reads it once and writes it at most once (each read and write
is a round trip to the JVM):

- the `Meta` fields: the engine watermark and processing time of the bucket's last step, the
  number of keys and live windows, and when something is next due (the earliest processing-time
  timer and watermark value that matter, from `Engine.state_summary`);
- `blob`: the engine state of every key of the bucket, as `engine.state_codec`'s versioned bytes
  (the owned-sink executor keeps the same). Its bytes come with every read, but they are decoded
  (and the engine run) only when something is due.

Each micro-batch N (processing time p, Spark watermark W_N) is one engine instant
`advance(rows, p, wm_prev=W_{N-1}, wm_new=W_N)`: rows are judged against the watermark of the
batch before, as Spark itself judges late rows, then the watermark steps to W_N. For that every
bucket must see every watermark advance, so every bucket exists from the first batch (its
heartbeat rows; without heartbeats, TWS initial state) and keeps one event-time "poll" timer at
W + 1 ms while the watermark can move without new data: whenever it moves, every bucket is
visited (cheaply, from the `Meta` fields, when nothing is due). With heartbeats a bucket knows
the next batch's watermark and keeps no timer when that is W (the next batch with data visits it
anyway); docs/streaming.md 3.2 says why the buckets with nothing
due still run in a batch without data. A visit writes only when something changed (what a batch
writes goes into a state store version Spark keeps for `spark.sql.streaming.minBatchesToRetain`
batches): the value when the blob's bytes or the `Meta` fields changed (the whole value then, the
blob as it was read when it did not change), the timer when it must move.

Heartbeat rows also carry their input partition's max event time, and every bucket keeps the
largest it has seen (`meta.seen`). From it the bucket computes the watermark Spark should have
for the next batch (`own_watermark_ms`) and uses the larger of the two. Normally they are equal.
They differ after a restart that re-runs a batch the sink had already committed: the sink skips
it without executing it, Spark never sees that batch's event times, and its watermark lags one
batch (SPARK-18513's "known issue"); the operator's does not, so the panes are those of an
uninterrupted run.

Spark's watermark (milliseconds, computed on a shifted column, see docs/streaming.md) maps to
engine time (microseconds) by `engine_watermark`; Spark's 0 (or -1) means "none yet".

This module imports the engine; never pyspark (pyspark's types only in `state_schema`), sqlglot or
lark. The TWS processor Spark calls is udfs/tws.py's `PaneProcessor`, a shell that imports this
module only on its first call on an executor and hands every call to a `BucketOperator`.

>>> engine_watermark(0, 0) == NEG_INF, engine_watermark(-1, 0) == NEG_INF
(True, True)
>>> engine_watermark(1_700_000_000_123, 0)
1700000000123000
>>> poll_timer_ms(0), poll_timer_ms(5_000)
(1, 5001)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sqlflow.ast import TimeDomain
from sqlflow.columns import (DATA, DROP_METRICS, DROPPED, EMIT_TIME, EVENT_TIME, FINISH, HEARTBEAT,
                             IS_LAST, IS_RETRACTION, KIND, METRICS, OUTPUT_TIME, PACK, PACKED, PANE,
                             PANE_INDEX, PANE_TIMING, REASON, REPORT_COLUMNS, SOURCE, STREAM_COUNTERS, STREAM_GAUGES, STREAM_LIVE,
                             WINDOW_END, WINDOW_START, metric_column, pane_columns, source_metric)
from sqlflow.engine import state_codec
from sqlflow.engine.aggregates import overflow_column
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.errors import SqlflowExecutionError
from sqlflow.time import NEG_INF, POS_INF
from sqlflow.udfs import source_watermarks as several
from sqlflow.udfs.operator_frames import one_frame, restore_nulls, struct_type
from sqlflow.udfs.pack import unpack

META_SCHEMA = ("wm long, p long, keys long, windows long, next_wm long, next_proc long, "
               "poll long, finished boolean, seen long, seen_by string, bytes long, held long, seq long, "
               "buckets long")
#: the bucket's one value of state: the `Meta` fields, then the engine state (`state_codec` bytes)
STATE_NAME = "bucket_state"
STATE_SCHEMA = META_SCHEMA + ", blob binary"
#: the value as sqlflow kept it before `Meta.buckets`: the same fields without it. Spark refuses
#: a state variable whose schema changed, so the value moved to a new variable; a bucket's old
#: value is read when the new one is absent, and moved (`read_state`)
PREVIOUS_STATE_NAME = "bucket"
PREVIOUS_STATE_SCHEMA = META_SCHEMA.removesuffix(", buckets long") + ", blob binary"


def engine_watermark(spark_ms: int, shift: int) -> int:
    """Spark's watermark (ms of the shifted watermark column) as engine time (us); 0 or less is
    Spark's "no watermark yet" (0 in EventTime mode, -1 elsewhere)."""
    if spark_ms is None or spark_ms <= 0:
        return NEG_INF
    return int(spark_ms) * 1000 - shift


def own_watermark_ms(seen: int | None, column_shift: int, delay_ms: int) -> int:
    """The watermark Spark computes (ms of the watermark column) once it has seen max event time
    `seen` (engine us; None: nothing yet): the column is event time + `column_shift` (us), Spark
    takes its max in whole ms and subtracts the delay (whole ms).

    >>> own_watermark_ms(None, 0, 10_000)
    0
    >>> own_watermark_ms(1_700_000_000_123_999, 0, 10_000)
    1699999990123
    >>> engine_watermark(own_watermark_ms(1_700_000_000_123_999, 5_000, 10_005), 0)  # shifts cancel
    1699999990123000
    """
    if seen is None:
        return 0
    return (int(seen) + column_shift) // 1000 - delay_ms


def latest_time(times: pd.Series, top: int | None) -> int | None:
    """The larger of `top` and the largest non-NULL of `times` (None: neither has one).

    >>> latest_time(pd.Series([3.0, None]), None), latest_time(pd.Series([None]), 7), latest_time(pd.Series([9]), 7)
    (3, 7, 9)
    """
    m = times.max()
    if pd.isna(m):
        return top
    return int(m) if top is None else max(top, int(m))


def poll_timer_ms(spark_ms: int) -> int:
    """The event-time timer that fires at the next watermark advance."""
    return max(int(spark_ms), 0) + 1


@dataclass(frozen=True)
class StreamSpec:
    """What the operator needs besides the plan (pickled to the workers with it)."""

    plan: EnginePlan
    input_columns: tuple[str, ...]  # engine input columns, in order
    frame_columns: tuple[str, ...] = ()  # the operator's input columns, in order
    integral_columns: tuple[str, ...] = ()  # Spark integral types: arrive as float64 when NULLs occur
    masked_columns: tuple[str, ...] = ()  # numbers shipped as value + NULL mask (`restore_nulls`)
    shift: int = 0  # engine time = watermark-column time - shift (us)
    keep_dropped: bool = False  # emit dropped rows (KIND == DROPPED) as a side output
    weight: str | None = None  # rows were combined: this column says how many each element stands for
    #: the watermark column is event time + column_shift (us) and Spark's delay on it delay_ms;
    #: None: heartbeats are off, the operator uses Spark's watermark alone
    column_shift: int = 0
    delay_ms: int | None = None
    packed: bool = False  # data rows come packed per bucket (udfs/pack.py)
    #: several watermarked inputs: their names and delays (ms, on the watermark column; udfs/source_watermarks.py)
    sources: tuple[str, ...] = ()
    source_delays_ms: tuple[int, ...] = ()
    #: a later windowed stage reads this one's panes (udfs/chained_operator.py): every call's METRICS row
    #: carries the bucket's report (columns.REPORT_COLUMNS)
    report: bool = False
    #: the hash buckets of keys the stream runs with (0: grouped by key, no buckets), kept in
    #: every bucket's value and checked when the stream restarts (`read_state`);
    #: `previous_buckets`: the count a value of an older sqlflow, which kept none, is taken to
    #: have; `buckets_setting`: what a user sets to choose the count (named by the error)
    buckets: int = 0
    previous_buckets: int = 0
    buckets_setting: str = ""
    #: every bucket gets its value and poll timer in the query's first batch (TWS initial state):
    #: buckets without heartbeats, which nothing else visits in every batch with data. Spark
    #: runs the initial state's plan in every batch, so with heartbeats there is none
    initial_state: bool = False

    @property
    def retracting(self) -> bool:
        return self.plan.mode.retracting

    @property
    def clock(self) -> bool:
        """ON PROCESSING / INGESTION TIME: each row's time is its batch's, and so is the watermark."""
        return self.plan.windowing.domain is not TimeDomain.EVENT_TIME

    def output_columns(self) -> list[str]:
        cols = [KIND, *self.plan.keys]
        for a in self.plan.aggregates:
            cols += [a.output, overflow_column(a.output)] if a.may_overflow else [a.output]
        cols += [*pane_columns(self.retracting), EVENT_TIME, REASON, *([SOURCE] if self.sources else [])]
        cols += [metric_column(m) for m in STREAM_COUNTERS + STREAM_GAUGES + STREAM_LIVE + self.source_counters()]
        return cols + (list(REPORT_COLUMNS) if self.report else [])

    def source_counters(self) -> tuple[str, ...]:
        """The counters of each source of several: its too-late (row, window) pairs."""
        return tuple(source_metric("dropped_too_late", name) for name in self.sources)


@dataclass
class Meta:
    wm: int = NEG_INF
    p: int = NEG_INF
    keys: int = 0
    windows: int = 0
    next_wm: int | None = None
    next_proc: int | None = None
    poll: int | None = None
    finished: bool = False
    seen: int | None = None  # the largest event time of any batch so far (heartbeats)
    seen_by: str | None = None  # several sources: the largest event time of each (udfs/source_watermarks.py)
    bytes: int = 0  # the size of the engine state blob (`blob`)
    held: int | None = None  # reporting stages: what the state holds of the output watermark (`Engine.held`)
    seq: int = 0  # reporting stages: the bucket's calls so far
    #: the hash buckets of keys of the stream that wrote the value (`StreamSpec.buckets`; None: a
    #: value of an older sqlflow, or the owned-sink executor's, which keeps its count apart)
    buckets: int | None = None

    def row(self) -> tuple:
        return (self.wm, self.p, self.keys, self.windows, self.next_wm, self.next_proc, self.poll,
                self.finished, self.seen, self.seen_by, self.bytes, self.held, self.seq, self.buckets)

    @staticmethod
    def of(row) -> "Meta":
        return Meta(*row)


def stored(value) -> tuple[Meta, bytes | None]:
    """The bucket's state value (`STATE_SCHEMA`; None: none yet) as its `Meta` and its engine state
    blob (None: no engine state).

    >>> meta, blob = stored((*Meta(keys=2).row(), bytearray(b"xy")))
    >>> meta.keys, blob
    (2, b'xy')
    >>> stored(None) == (Meta(), None)
    True
    """
    if value is None:
        return Meta(), None
    *fields, blob = value
    return Meta.of(fields), None if blob is None else bytes(blob)


def read_state(state, previous, spec: "StreamSpec", bucket: int, *, initialised: bool
               ) -> tuple[Meta, bytes | None, tuple | None]:
    """A bucket's state (`state`, the value's variable; `previous`, an older sqlflow's) as its
    `Meta`, its engine state blob and the `Meta` row as stored (None: nothing stored), checked
    against the stream's count of hash buckets of keys.

    A key's state lives in the bucket its hash gives under the count the stream started with, so a
    stream restarted from its checkpoint with another count would look for each moved key's
    state in the wrong bucket and lose it without a word. Every value keeps the count it was
    written with (`Meta.buckets`); another count is refused with an error naming both and the
    setting that keeps the checkpoint's. `initialised`: every bucket of the stream got its value
    in the query's first batch (the operator's initial state), so a bucket without one is not of
    the checkpoint's buckets: the count grew. (With heartbeats every bucket runs in every batch
    with data, so the checkpoint's bucket 0 finds the other count in the same batch.) A value of
    an older sqlflow, which kept no count, is taken to have `spec.previous_buckets` and moved to
    the current variable.
    """
    value = state.get()  # None when it does not exist (no exists() round trip)
    if value is None:
        old = previous.get()
        if old is None:
            if initialised:
                raise bucket_count_error(spec, bucket, None)
            meta = Meta(buckets=spec.buckets)
            return meta, None, None
        *fields, blob = old
        if spec.previous_buckets != spec.buckets:
            raise bucket_count_error(spec, bucket, spec.previous_buckets, older=True)
        value = (*fields, spec.buckets, blob)
        state.update(value)
        previous.clear()
    meta, blob = stored(value)
    if meta.buckets != spec.buckets:
        raise bucket_count_error(spec, bucket, meta.buckets)
    return meta, blob, meta.row()


def bucket_count_error(spec: "StreamSpec", bucket: int, written: int | None, *, older: bool = False):
    """The located error of a checkpoint whose state was written with `written` hash buckets of
    keys (None: fewer than the stream's, not known how many) when the stream has `spec.buckets`.

    >>> print(bucket_count_error(StreamSpec(None, (), buckets=2, buckets_setting="b"), 1, 8))
    sqlflow: STREAM: the checkpoint's state of bucket 1 was written by a stream of 8 hash buckets of keys, and this query has 2: each key's state would be looked for in another bucket and lost
    set b = 8 to go on from this checkpoint, or start from a new one
    """
    setting = spec.buckets_setting or "the bucket count"
    if written is None:
        what = (f"the checkpoint has no state of bucket {bucket}: it was written by a stream of fewer hash buckets "
                f"of keys than this query's {spec.buckets}")
        hint = (f"set {setting} to the count of the checkpoint's first run (sqlflow.explain printed it) to go on "
                f"from this checkpoint, or start from a new one")
    else:
        by = (f"an older sqlflow, which kept no bucket count: taken to be its default here, {written} hash buckets"
              if older else f"a stream of {written} hash buckets")
        what = (f"the checkpoint's state of bucket {bucket} was written by {by} of keys, and this query has "
                f"{spec.buckets}")
        hint = f"set {setting} = {written} to go on from this checkpoint, or start from a new one"
    return SqlflowExecutionError(what + ": each key's state would be looked for in another bucket and lost",
                                 clause="STREAM", hint=hint)


class BucketStep:
    """One bucket's step at one micro-batch, independent of Spark (unit-testable)."""

    def __init__(self, spec: StreamSpec):
        self.spec = spec
        self.engine = Engine(spec.plan)
        self._empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in spec.input_columns})

    def due(self, meta: Meta, p: int, wm_new: int, has_rows: bool, finish: bool) -> bool:
        if has_rows or (finish and not meta.finished):
            return True
        if meta.windows == 0:
            return False
        if meta.held is not None and meta.held < POS_INF and wm_new > meta.wm:
            return True  # a held retraction is released when the watermark passes its window's end
        return ((meta.next_proc is not None and meta.next_proc <= p)
                or (meta.next_wm is not None and meta.next_wm <= wm_new))

    def run(self, meta: Meta, state: dict | None, rows: pd.DataFrame | None, *, p: int, wm_new: int,
            finish: bool, columns: bool = False):
        """Advance the bucket: returns (output frames, new state or None when unchanged); with
        `columns` the panes as a dict of columns rather than a frame (`pane_columns`, for
        `operator_frames.arrow_output`)."""
        wm_prev = meta.wm
        wm_new = max(wm_new, wm_prev)
        rows = self._coerce(rows) if rows is not None and len(rows) else self._empty
        end = finish and not meta.finished
        result, state = self.engine.advance(state, rows, p=p, wm_prev=wm_prev, wm_new=wm_new,
                                            end_of_input=end, ordered=False)
        if self.spec.weight and len(rows):
            result.metrics = weighted_metrics(result.metrics, result.dropped,
                                              rows[self.spec.weight].to_numpy(dtype=np.int64, na_value=1))
        meta.p = p
        if end:
            meta.finished = True
        meta.wm = POS_INF if meta.finished else wm_new
        meta.keys, meta.windows, meta.next_proc, meta.next_wm = self.engine.state_summary(state, meta.wm)
        if self.spec.report:
            meta.held = self.engine.held(state) if self.spec.retracting else POS_INF
        frames: list = []
        if len(result.panes):
            frames.append(self.pane_columns(result.panes) if columns else self._panes(result.panes))
        if self.spec.keep_dropped and len(result.dropped):
            frames.append(self._dropped(result.dropped, rows, p))
        if self.spec.sources and len(result.dropped):
            late = several.late_by_source(result.dropped, rows, len(self.spec.sources))
            result.metrics.update(zip(self.spec.source_counters(), late))
        frames.append(self._metrics(result.metrics, meta, p, wm_new))
        return frames, state

    def skip(self, meta: Meta, p: int, wm_new: int) -> list[pd.DataFrame]:
        """Nothing due: only the watermark moves (`meta.p` stays the last step's time, so a visit
        that moves neither leaves `meta` as it was and the operator writes nothing)."""
        meta.wm = POS_INF if meta.finished else max(meta.wm, wm_new)
        return [self._metrics({}, meta, p, wm_new, advanced=False)]

    def live(self, metrics: pd.DataFrame, meta: Meta) -> pd.DataFrame:
        """The metrics frame with the state's size once it is written (`meta.bytes`)."""
        metrics[metric_column("state_bytes")] = [int(meta.bytes or 0)]
        return metrics

    def report(self, metrics: pd.DataFrame, meta: Meta, bucket: int) -> pd.DataFrame:
        """The metrics frame with the bucket's report to a later stage (udfs/chained_operator.py): its
        output watermark is min(REPORT_WM, REPORT_HELD)."""
        held = POS_INF if meta.held is None else int(meta.held)
        # once finished, the batch's watermark rather than +inf: a replay's watermark stays at its
        # last step when its input ends (the end is an instant of its own, udfs/chained_operator.py)
        batch_wm = int(metrics[metric_column("watermark")].iloc[0])
        values = (bucket, int(meta.seq), batch_wm if meta.finished else int(meta.wm), held,
                  int(metrics[metric_column("batch_time")].iloc[0]), bool(meta.finished))
        for c, v in zip(REPORT_COLUMNS, values):
            metrics[c] = [v]
        return metrics

    # ------------------------------------------------------------------ frames

    def _coerce(self, rows: pd.DataFrame) -> pd.DataFrame:
        rows = restore_nulls(rows.reset_index(drop=True), self.spec.masked_columns)
        for c in self.spec.integral_columns:
            if c in rows and rows[c].dtype.kind == "f":
                rows[c] = rows[c].astype("Int64")
        return rows

    def _frame(self, n: int, kind: int) -> dict:
        return {KIND: np.full(n, kind, np.int32)}

    def _panes(self, panes: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({k: (v.reset_index(drop=True) if isinstance(v, pd.Series) else v)
                             for k, v in self.pane_columns(panes).items()})

    def pane_columns(self, panes: pd.DataFrame) -> dict:
        """The engine's panes as the output's columns (name: Series or array, in order)."""
        out = self._frame(len(panes), PANE)
        for c in self.spec.plan.keys:  # integers and booleans typed (an object column converts per value)
            exact = panes[c].dtype.kind in "iub" and not isinstance(panes[c].dtype, pd.CategoricalDtype)
            out[c] = panes[c] if exact else panes[c].to_numpy(dtype=object)
        for a in self.spec.plan.aggregates:
            out[a.output] = panes[a.output]
            if a.may_overflow:  # Spark's overflow rules read it (sqlflow/spark/handover.py)
                out[overflow_column(a.output)] = panes[overflow_column(a.output)].astype(bool)
        out[WINDOW_START] = panes[WINDOW_START].astype("Int64")
        out[WINDOW_END] = panes[WINDOW_END].astype("Int64")
        out[PANE_INDEX] = panes[PANE_INDEX].astype(np.int64)
        out[PANE_TIMING] = panes[PANE_TIMING].astype(object)
        out[IS_LAST] = panes[IS_LAST].astype(bool)
        out[EMIT_TIME] = panes[EMIT_TIME].astype("Int64")
        out[OUTPUT_TIME] = panes[OUTPUT_TIME].astype("Int64")
        if self.spec.retracting:
            out[IS_RETRACTION] = panes[IS_RETRACTION].astype(bool)
        return out

    def _dropped(self, dropped: pd.DataFrame, rows: pd.DataFrame, p: int) -> pd.DataFrame:
        idx = dropped["row"].to_numpy()
        out = self._frame(len(dropped), DROPPED)
        for c in self.spec.plan.keys:
            out[c] = rows[c].to_numpy(dtype=object)[idx]
        out[EVENT_TIME] = pd.array(rows[EVENT_TIME].to_numpy()[idx], dtype="Int64") if len(idx) else pd.array([], dtype="Int64")
        out[REASON] = dropped["reason"].to_numpy(dtype=object)
        out[WINDOW_START] = dropped["window_start"].astype("Int64").to_numpy()
        out[WINDOW_END] = dropped["window_end"].astype("Int64").to_numpy()
        out[EMIT_TIME] = np.full(len(dropped), p, np.int64)
        if self.spec.sources:
            out[SOURCE] = pd.array(rows[SOURCE].to_numpy()[idx], dtype="Int64")
        return pd.DataFrame(out)

    def _metrics(self, metrics: dict, meta: Meta, p: int, wm: int, advanced: bool = True) -> pd.DataFrame:
        out = self._frame(1, METRICS)
        for m in STREAM_COUNTERS:
            out[metric_column(m)] = [int(metrics.get("input_rows" if m == "engine_rows" else m, 0))]
        out[metric_column("buckets_advanced")] = [int(advanced)]
        out[metric_column("batch_time")] = [p]
        out[metric_column("watermark")] = [wm]
        out[metric_column("finished")] = [int(meta.finished)]
        out[metric_column("state_keys")] = [int(meta.keys)]
        out[metric_column("state_windows")] = [int(meta.windows)]
        out[metric_column("state_bytes")] = [int(meta.bytes or 0)]
        for c in self.spec.source_counters():
            out[metric_column(c)] = [int(metrics.get(c, 0))]
        return pd.DataFrame(out)


def weighted_metrics(metrics: dict, dropped: pd.DataFrame, weight: np.ndarray) -> dict:
    """The engine's counters when each input element stands for `weight` rows: input rows and
    dropped (row, window) assignments count the rows.

    >>> dropped = pd.DataFrame({"row": [0, 2, 2], "reason": ["too late", "too late", "null event time"]})
    >>> m = weighted_metrics({"input_rows": 3, "panes": 4, "dropped_too_late": 2}, dropped, np.array([5, 1, 7]))
    >>> m["input_rows"], m["panes"], m["dropped_too_late"], m["dropped_null_event_time"]
    (13, 4, 12, 7)
    """
    out = dict(metrics)
    out["input_rows"] = int(weight.sum())
    rows = dropped["row"].to_numpy(dtype=np.int64)
    reasons = dropped["reason"].to_numpy(dtype=object)
    for reason, metric in DROP_METRICS.items():
        if metric in out or (reasons == reason).any():
            out[metric] = int(weight[rows[reasons == reason]].sum())
    return out


def dumps_state(state: dict) -> bytes:
    """A bucket's engine state as the versioned bytes both executors keep (`state_codec`)."""
    return state_codec.encode(state)


def loads_state(blob, where: str = "the operator's state") -> dict:
    """`dumps_state`'s bytes (or the previous format's pickle) back; another format version is
    refused with a located error naming both versions."""
    return state_codec.decode(bytes(blob), where=where)


def state_schema():
    """The bucket's state value as pyspark's StructType (built here: a DDL string costs two more
    round trips to the JVM per state, in every task)."""
    return struct_type(STATE_SCHEMA)


def previous_state_schema():
    """An older sqlflow's value (`PREVIOUS_STATE_SCHEMA`) as pyspark's StructType."""
    return struct_type(PREVIOUS_STATE_SCHEMA)


class BucketOperator:
    """One bucket's calls in one task of transformWithStateInPandas, given the state handle and
    the bucket's state variable by udfs/tws.py's `PaneProcessor`: one call per bucket with input or
    an expired poll timer."""

    def __init__(self, spec: StreamSpec, handle, state, previous):
        self.spec = spec
        self.handle = handle
        self.state = state
        self.previous = previous  # an older sqlflow's value (`read_state`)
        self.step = BucketStep(spec)

    # ------------------------------------------------------------------ callbacks

    def initial(self, timerValues) -> None:
        """The bucket's first call (TWS initial state, the query's batch 0, before any input: the
        bucket has no value yet, so it is not read; reading an absent value makes Spark log a
        warning): its empty value and, without heartbeats, its poll timer."""
        meta = Meta(buckets=self.spec.buckets)
        self._poll(meta, timerValues.getCurrentWatermarkInMs())
        self.state.update((*meta.row(), None))

    def input_rows(self, key, rows, timerValues):
        """A call with rows (data, heartbeats, finish markers): one step."""
        data, finish, seen, beats = [], False, None, []
        for frame in rows:
            frame.columns = self.spec.frame_columns  # Spark renames columns named __x to _<position>
            kind = frame[KIND].to_numpy()
            if (kind == FINISH).any():
                finish = True
            if self.spec.sources:  # each heartbeat: one source's max in a partition
                beats.append(frame.loc[kind == HEARTBEAT, [SOURCE, EVENT_TIME]])
            elif self.spec.delay_ms is not None:  # heartbeats on: they carry the partitions' max
                seen = latest_time(frame[EVENT_TIME], seen)
            if self.spec.packed:
                blobs = frame[PACK].to_numpy()[kind == PACKED]
                if len(blobs):
                    data.append(unpack(blobs))
            elif (kind == DATA).all():
                data.append(frame)
            elif (kind == DATA).any():
                data.append(frame[kind == DATA])
        batch = pd.concat(data, ignore_index=True) if len(data) > 1 else (data[0] if data else None)
        if beats:
            seen = pd.concat(beats, ignore_index=True)
        yield from self._advance(key, batch, timerValues, finish, seen)

    def expired(self, key, timerValues, expiry_ms: int | None = None):
        """The poll timer (at `expiry_ms`) fired: the watermark moved. PySpark deletes a timer
        once it has fired, so the operator does not (a second delete makes Spark log a warning)."""
        yield from self._advance(key, None, timerValues, False, None, fired=expiry_ms)

    # ------------------------------------------------------------------ the step

    def _poll(self, meta: Meta, spark_ms: int, fired: int | None = None) -> None:
        """Keep one event-time timer, at the next watermark advance, while the watermark can
        advance without new data (`_moves`); none after the finish. `fired`: the timer of this
        call, which PySpark deletes itself."""
        if fired is not None and meta.poll == fired:
            meta.poll = None
        if meta.finished:
            want = None
        elif not self._moves(meta, spark_ms):
            # the next advance needs a batch with data, whose heartbeats visit this bucket and
            # set the timer then: a timer set now would cost two round trips and change nothing
            if meta.poll is None or meta.poll > spark_ms:
                return
            want = None
        else:
            want = poll_timer_ms(spark_ms)
        if meta.poll == want:
            return
        if meta.poll is not None:  # ahead of the watermark, or due in this batch and not fired yet
            self.handle.deleteTimer(meta.poll)
        if want is not None:
            self.handle.registerTimer(want)
        meta.poll = want

    def _moves(self, meta: Meta, spark_ms: int) -> bool:
        """Whether the watermark can pass `spark_ms` without a batch of data first: always, unless
        the heartbeats give the bucket the watermark Spark computes for the next batch
        (`own_watermark_ms`), and that is `spark_ms` (no row since raised the max event time)."""
        if self.spec.sources or self.spec.clock or self.spec.delay_ms is None:
            return True
        return own_watermark_ms(meta.seen, self.spec.column_shift, self.spec.delay_ms) > spark_ms

    def _advance(self, key, rows, timerValues, finish: bool, seen, fired: int | None = None):
        spark_ms = timerValues.getCurrentWatermarkInMs()
        p = timerValues.getCurrentProcessingTimeInMs() * 1000
        meta, old, before = read_state(self.state, self.previous, self.spec, int(key[0]),
                                       initialised=self.spec.initial_state)
        wm_ms = spark_ms
        if self.spec.sources:  # the minimum of the sources' (udfs/source_watermarks.py), Spark's leaves out the silent
            wm_ms = several.watermark_ms(meta.seen_by, self.spec.column_shift, self.spec.source_delays_ms)
            if seen is not None:
                meta.seen_by = several.merge_seen(meta.seen_by, len(self.spec.sources), seen)
                seen = None
        elif self.spec.delay_ms is not None:  # this batch's watermark from the batches before
            wm_ms = max(spark_ms, own_watermark_ms(meta.seen, self.spec.column_shift, self.spec.delay_ms))
        wm_new = engine_watermark(wm_ms, self.spec.shift)
        if self.spec.clock:  # the batch's time: every row of it and of the batches before is in
            wm_new = p       # (docs/semantics.md, 10), where Spark's watermark lags a batch
        if seen is not None:
            meta.seen = seen if meta.seen is None else max(meta.seen, seen)
        has_rows = rows is not None and len(rows) > 0
        if self.step.due(meta, p, max(wm_new, meta.wm), has_rows, finish):
            where = f"the operator's state of bucket {int(key[0])}"
            frames, state = self.step.run(meta, loads_state(old, where) if old is not None else {}, rows,
                                          p=p, wm_new=wm_new, finish=finish)
            blob = dumps_state(state) if state else None
            meta.bytes = len(blob) if blob is not None else 0
            frames[-1] = self.step.live(frames[-1], meta)
        else:
            frames, blob = self.step.skip(meta, p, wm_new), old
        self._poll(meta, spark_ms, fired)
        if self.spec.report:
            meta.seq += 1
            frames[-1] = self.step.report(frames[-1], meta, int(key[0]))
        row = meta.row()
        if row != before or blob != old:  # what a batch writes is kept for minBatchesToRetain batches
            self.state.update((*row, blob))
        # one frame per call: PySpark converts every frame to Arrow on its own (per column)
        yield one_frame(frames, self.spec.output_columns())
