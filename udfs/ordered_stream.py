"""Ordering a live stream by event time: the operator inside transformWithStateInPandas (TWS).

Flink's time design draft, "Ordering Elements in a Stream": "The ordering operator has to buffer
all elements it receives. Then, when it receives a watermark it can sort all elements that have a
timestamp that is lower than the watermark and emit them in the sorted order." The rules are
docs/semantics.md, 11; how a micro-batch is an instant, docs/streaming.md, 2. The driver side is
`sqlflow/spark/streaming/ordered.py`.

The stream is one group (one Python call per micro-batch, vectorised over its rows). Its rows
arrive packed (udfs/pack.py: one row per input partition holding its rows as Arrow IPC), and its
one value of state holds the bookkeeping (`OrderMeta`) and the buffered rows as one Arrow IPC
stream, read once and written once per call. Micro-batch N (processing time p, watermark W(N)):

- its rows are judged against W(N-1), the watermark the call before recorded: a row with a NULL
  event time, or below W(N-1), is dropped (reason `null event time`, `too late`), the others join
  the buffer;
- the buffered rows below W(N) are released, sorted by (event time, tie-breakers), with
  `emit_time` p; at the end of input (the finish marker) W is +inf and the buffer empties.

W(N) is the larger of Spark's watermark and the one computed from the largest event time of the
batches before N (`streaming.own_watermark_ms`): after a restart that re-runs a batch the sink had
committed Spark's lags a batch, the operator's does not. To know W(N-1) in every batch, the
operator keeps an event-time timer at W + 1 ms while the watermark can move without new data, so
a batch without data that moves it calls the operator too.

>>> op = OrderStep(OrderSpec(columns=("t", "id"), ties=(("id", True, False),), delay_ms=10))
>>> rows = pa.table({"t": [5_000, 30_000, 1_000, 20_000], "id": ["a", "b", None, "c"]})
>>> meta, buffer, out = op.step(OrderMeta(), None, rows, p=100, spark_ms=0)
>>> out[0].empty, int(out[-1]["__sqlflow_m_input_rows"][0]), buffer.num_rows
(True, 4, 4)
>>> meta, buffer, out = op.step(meta, buffer, pa.table({"t": [15_000], "id": ["d"]}), p=200, spark_ms=20)
>>> out[0][["t", "id", "emit_time"]].values.tolist()
[[1000, None, 200], [5000, 'a', 200], [15000, 'd', 200]]
>>> meta, buffer, out = op.step(meta, buffer, pa.table({"t": [2_000], "id": ["e"]}), p=300, spark_ms=20)
>>> out[1][["t", "__sqlflow_reason"]].values.tolist(), meta.wm
([[2000, 'too late']], 20000)
>>> meta, buffer, out = op.step(meta, buffer, None, p=400, spark_ms=20, finish=True)
>>> out[0][["t", "id"]].values.tolist(), buffer
([[20000, 'c'], [30000, 'b']], None)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sqlflow.columns import (BEHIND_PARTITION, DROPPED, EMIT_TIME, FINISH, KIND, METRICS, NULL_EVENT_TIME, PACK, PACKED,
                             PANE, REASON, TOO_LATE, metric_column)
from sqlflow.time import NEG_INF, POS_INF
from sqlflow.udfs.bucket import arrow_frame
from sqlflow.udfs.operator_frames import one_frame
from sqlflow.udfs.streaming import engine_watermark, own_watermark_ms, poll_timer_ms

#: the operator's one value of state: `OrderMeta`'s fields, then the buffered rows (Arrow IPC)
ORDER_STATE_NAME = "ordered"
ORDER_STATE_SCHEMA = "wm long, seen long, poll long, finished boolean, rows long, blob binary, parts binary"
#: what a call counts (summed over the batch) and reports (the batch's, for `watermark_log`)
ORDER_COUNTERS = ("input_rows", "ordered_rows", "dropped_too_late", "dropped_null_event_time",
                  "dropped_behind_partition")
#: the partition of NULL values (partition values travel as strings)
NULL_PARTITION = "\0null"
ORDER_GAUGES = ("batch_time", "watermark", "finished", "buffered_rows")


@dataclass(frozen=True)
class OrderSpec:
    """What the operator needs (pickled to the workers).

    - `columns`: the columns of the packed rows, in order (the event time as int64 microseconds in
      `time`, the user's columns and the tie-breaker columns);
    - `ties`: the tie-breakers after the event time, (column, descending, NULLs first);
    - `delay_ms`, `column_shift`: Spark's delay on the watermark column (ms) and the column's shift
      from event time (us), as `streaming.own_watermark_ms` takes them;
    - `frame_columns`: the operator's input columns (bucket, kind, time, PACK), in order;
    - `partition`: under `ASCENDING PER`, the column of each row's partition (a string), and
      `idle` the IDLE TIMEOUT (us; None: none): the operator computes the watermark itself
      (`partition_watermark`); Spark's is a constant that never moves."""

    columns: tuple[str, ...]
    ties: tuple[tuple[str, bool, bool], ...] = ()
    delay_ms: int = 0
    column_shift: int = 0
    time: str = "t"
    frame_columns: tuple[str, ...] = ()
    partition: str | None = None
    idle: int | None = None
    wall_clock: tuple[str, ...] = ()  # TIMESTAMP_NTZ columns: out as naive datetimes (no time zone)
    #: the first stage of a windowed SELECT over an ASCENDING PER stream: every row not behind its
    #: partition (nor without an event time) is released in its own batch, late or not (the
    #: windowed stage judges it), and the watermark goes on the counters row as the stage's report
    pass_through: bool = False
    #: a window over several sources, one at least ASCENDING PER (pass-through): each source's
    #: rule, and `source` the column of each row's source number; `partition` is then "" on the
    #: rows of a DELAY OF source, and `time_shift` (us) the query's (`sources_watermark`)
    sources: tuple[SourceRule, ...] = ()
    source: str | None = None
    time_shift: int = 0

    def output_columns(self) -> list[str]:
        return [KIND, *self.columns, EMIT_TIME, REASON,
                *(metric_column(m) for m in (*ORDER_COUNTERS, *ORDER_GAUGES))]


@dataclass
class OrderMeta:
    wm: int = NEG_INF  # the watermark of the last call (engine us): the next batch's rows are judged against it
    seen: int | None = None  # the largest event time of the batches so far
    poll: int | None = None  # the event-time timer (ms) set, if any
    finished: bool = False
    rows: int = 0  # buffered rows

    def row(self) -> tuple:
        return (self.wm, self.seen, self.poll, self.finished, self.rows)


def to_ipc(table: pa.Table | None) -> bytes | None:
    """The rows as an Arrow IPC stream, LZ4-compressed (a third of the bytes the state store writes
    and the socket to the JVM carries per batch, for about a millisecond per MB)."""
    if table is None or table.num_rows == 0:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(blobs) -> pa.Table | None:
    tables = [pa.ipc.open_stream(pa.py_buffer(bytes(b))).read_all() for b in blobs if b is not None]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


def sorted_indices(table: pa.Table, time: str, ties) -> pa.Array:
    """The rows of `table` in (time, tie-breakers) order; a tie-breaker's NULLs first or last as
    asked (Spark's default: first ascending, last descending), NaN above every number.

    >>> t = pa.table({"t": [2, 1, 1, 1], "k": [None, "b", None, "a"]})
    >>> sorted_indices(t, "t", [("k", False, True)]).to_pylist(), sorted_indices(t, "t", [("k", True, False)]).to_pylist()
    ([2, 3, 1, 0], [1, 3, 2, 0])
    """
    columns = {"t": table.column(time)}
    keys = [("t", "ascending")]
    for i, (name, desc, nulls_first) in enumerate(ties):
        column = table.column(name)
        null = pc.is_null(column)
        columns[f"n{i}"] = pc.invert(null) if nulls_first else null
        columns[f"v{i}"] = column
        keys += [(f"n{i}", "ascending"), (f"v{i}", "descending" if desc else "ascending")]
    return pc.sort_indices(pa.table(columns), sort_keys=keys)


def empty_partitions() -> pd.DataFrame:
    return pd.DataFrame({"k": pd.Series([], dtype=object), "latest": np.array([], np.int64),
                         "last": np.array([], np.int64)})


def partition_watermark(parts: pd.DataFrame, keys: np.ndarray, t: np.ndarray, valid: np.ndarray, p: int,
                        idle: int | None, wm_prev: int) -> tuple[np.ndarray, pd.DataFrame, int]:
    """One micro-batch at processing time `p` of an ASCENDING PER stream (docs/semantics.md, 1.2,
    with the batch as the instant): which of its rows (partition `keys`, event times `t`, `valid`:
    with an event time) are behind their partition's latest event time before the batch, the
    partitions' new (latest event time, last arrival), and the watermark: the minimum latest over
    the partitions not idle at `p` (a row in `(p - idle, p]`), never below `wm_prev`; unchanged
    when every partition is idle. A row behind its partition neither moves its partition nor
    keeps it from turning idle.

    >>> parts = empty_partitions()
    >>> behind, parts, wm = partition_watermark(parts, np.array(["a", "b", "a"], object), np.array([10, 3, 12]),
    ...                                         np.array([True, True, True]), p=100, idle=None, wm_prev=-5)
    >>> behind.tolist(), wm, parts.values.tolist()
    ([False, False, False], 3, [['a', 12, 100], ['b', 3, 100]])
    >>> behind, parts, wm = partition_watermark(parts, np.array(["a", "a"], object), np.array([11, 20]),
    ...                                         np.array([True, True]), p=200, idle=50, wm_prev=wm)
    >>> behind.tolist(), wm, parts.values.tolist()
    ([True, False], 20, [['a', 20, 200], ['b', 3, 100]])
    """
    index = pd.Index(parts["k"].to_numpy(object))
    at = index.get_indexer(keys) if len(index) else np.full(len(keys), -1)
    latest = parts["latest"].to_numpy(np.int64)
    before = np.where(at >= 0, latest[np.maximum(at, 0)] if len(latest) else 0, NEG_INF)
    behind = valid & (t < before)
    kept = valid & ~behind
    if kept.any():
        new = (pd.DataFrame({"k": keys[kept], "latest": t[kept]}).groupby("k", sort=False)["latest"].max()
               .reset_index())
        new["last"] = np.int64(p)
        both = pd.concat([parts, new], ignore_index=True)
        parts = both.groupby("k", sort=False).agg(latest=("latest", "max"), last=("last", "max")).reset_index()
    active = parts["last"].to_numpy(np.int64) > (p - idle) if idle is not None else np.ones(len(parts), bool)
    wm = wm_prev
    if active.any():
        wm = max(wm_prev, int(parts["latest"].to_numpy(np.int64)[active].min()))
    return behind, parts, wm


@dataclass(frozen=True)
class SourceRule:
    """One branch's watermark on a live UNION ALL whose window reads several watermarked sources,
    one at least ASCENDING PER (docs/semantics.md 9 and 1.2): `delay` (us) for `DELAY OF`, None for
    `ASCENDING PER` with its IDLE TIMEOUT `idle` (us; None: none)."""

    delay: int | None = None
    idle: int | None = None


def empty_sources() -> pd.DataFrame:
    """The partition table of several sources: `partition_watermark`'s columns and `s`, each row's
    source; a row whose `k` is None holds its source's own watermark in `latest`."""
    return empty_partitions().assign(s=np.array([], np.int64))


def sources_watermark(parts: pd.DataFrame, rules: tuple[SourceRule, ...], source: np.ndarray, keys: np.ndarray,
                      t: np.ndarray, valid: np.ndarray, p: int, wm_prev: int, shift: int = 0
                      ) -> tuple[np.ndarray, pd.DataFrame, int]:
    """`partition_watermark` for a window over several sources (`rules`; `source`: each row's
    source number): each source keeps its own watermark, the window's is the minimum of theirs
    (docs/semantics.md, 9), never below `wm_prev`. An ASCENDING PER source's is its partitions'
    (`partition_watermark`, its rows may be behind their partition); a DELAY OF source's is the
    largest event time of the batches before minus its delay (`batch_watermark`, Spark's rule, on
    event time + `shift`; its rows are its one partition ""). A source without rows yet holds the
    window at -inf.

    >>> rules = (SourceRule(idle=None), SourceRule(delay=5_000))  # times in us
    >>> behind, parts, wm = sources_watermark(empty_sources(), rules, np.array([0, 0, 1]),
    ...     np.array(["a", "b", ""], object), np.array([10_000, 3_000, 30_000]), np.ones(3, bool), p=1, wm_prev=-9)
    >>> behind.tolist(), wm  # the DELAY OF source has no batch before: -inf, the window's stays
    ([False, False, False], -9)
    >>> behind, parts, wm = sources_watermark(parts, rules, np.array([0, 0, 1]), np.array(["a", "b", ""], object),
    ...     np.array([9_000, 20_000, 40_000]), np.ones(3, bool), p=2, wm_prev=wm)
    >>> behind.tolist(), wm  # a's 9 is behind its 10; min(ASCENDING PER: min(10, 20), DELAY OF: 30 - 5)
    ([True, False, False], 10000)
    >>> parts.values.tolist()
    [['a', 10000, 1, 0], ['b', 20000, 2, 0], [None, 10000, 2, 0], ['', 40000, 2, 1], [None, 25000, 2, 1]]
    """
    from sqlflow.udfs.batch_step import batch_watermark  # (it imports this module's neighbours)

    behind = np.zeros(len(t), bool)
    own = parts["s"].to_numpy(np.int64)
    held = pd.isna(parts["k"]).to_numpy(bool)
    tables, wms = [], []
    for i, rule in enumerate(rules):  # a handful of sources: a few vectorised calls each
        table = parts.loc[(own == i) & ~held, ["k", "latest", "last"]].reset_index(drop=True)
        mark = parts.loc[(own == i) & held, "latest"].to_numpy(np.int64)
        prev = int(mark[0]) if len(mark) else NEG_INF
        rows = source == i
        if rule.delay is None:
            behind[rows], table, wm = partition_watermark(table, keys[rows], t[rows], valid[rows], p, rule.idle, prev)
        else:
            seen = int(table["latest"].max()) if len(table) else None
            wm = max(prev, batch_watermark(seen, rule.delay, shift))
            _, table, _ = partition_watermark(table, np.full(int(rows.sum()), "", object), t[rows], valid[rows], p,
                                              None, prev)
        wms.append(wm)
        tables += [table.assign(s=np.int64(i)),
                   pd.DataFrame({"k": [None], "latest": [np.int64(wm)], "last": [np.int64(p)], "s": [np.int64(i)]})]
    parts = pd.concat(tables, ignore_index=True).astype({"latest": np.int64, "last": np.int64, "s": np.int64})
    return behind, parts, max(wm_prev, min(wms))


def partitions_to_ipc(parts: pd.DataFrame) -> bytes | None:
    return to_ipc(pa.Table.from_pandas(parts, preserve_index=False)) if len(parts) else None


def partitions_from_ipc(blob) -> pd.DataFrame:
    if blob is None:
        return empty_partitions()
    table = from_ipc([blob])
    return empty_partitions() if table is None else table.to_pandas()


class OrderStep:
    """One call's work, apart from Spark (the doctest above runs it)."""

    def __init__(self, spec: OrderSpec):
        self.spec = spec
        self.parts: pd.DataFrame | None = None

    def step(self, meta: OrderMeta, buffer: pa.Table | None, rows: pa.Table | None, *, p: int, spark_ms: int,
             finish: bool = False, parts: pd.DataFrame | None = None
             ) -> tuple[OrderMeta, pa.Table | None, list[pd.DataFrame]]:
        """Micro-batch at processing time `p` (us) with `rows` (None: none), Spark's watermark
        `spark_ms` (`parts`: the partitions under ASCENDING PER, updated in place of the frame
        given, `self.parts` after the call): the new meta and buffer, and the output frames
        (released, dropped, counters)."""
        spec = self.spec
        wm_prev = meta.wm
        if spec.partition is None:
            wm_ms = max(int(spark_ms), own_watermark_ms(meta.seen, spec.column_shift, spec.delay_ms))
            wm_new = max(engine_watermark(wm_ms, 0), wm_prev)
        else:
            if parts is None or not len(parts):
                parts = empty_sources() if spec.sources else empty_partitions()
            wm_new = wm_prev
        counts = dict.fromkeys(ORDER_COUNTERS, 0)
        dropped = None
        if rows is not None and rows.num_rows:
            t = rows.column(spec.time)
            counts["input_rows"] = rows.num_rows
            top = pc.max(t).as_py()
            if top is not None:
                meta.seen = top if meta.seen is None else max(meta.seen, top)
            values = np.asarray(t.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            null = np.asarray(t.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            behind = np.zeros(len(values), bool)
            if spec.partition is not None and parts is not None:
                keys = np.asarray(rows.column(spec.partition).fill_null(NULL_PARTITION).to_numpy(zero_copy_only=False),
                                  dtype=object)
                if spec.sources:
                    source = np.asarray(rows.column(spec.source).to_numpy(zero_copy_only=False), dtype=np.int64)
                    behind, parts, wm_new = sources_watermark(parts, spec.sources, source, keys, values, ~null, p,
                                                              wm_prev, spec.time_shift)
                else:
                    behind, parts, wm_new = partition_watermark(parts, keys, values, ~null, p, spec.idle, wm_prev)
            late = np.zeros(len(values), bool) if spec.pass_through else (
                ~null & ~behind & ((values < wm_prev) | meta.finished))
            kept = ~null & ~late & ~behind
            counts["dropped_null_event_time"] = int(null.sum())
            counts["dropped_too_late"] = int(late.sum())
            counts["dropped_behind_partition"] = int(behind.sum())
            if not kept.all():
                out = rows.filter(pa.array(~kept))
                reasons = np.where(null[~kept], NULL_EVENT_TIME, np.where(behind[~kept], BEHIND_PARTITION, TOO_LATE))
                dropped = self._frame(out)
                dropped[KIND] = np.full(len(dropped), DROPPED, np.int32)
                dropped[EMIT_TIME] = np.full(len(dropped), p, np.int64)
                dropped[REASON] = reasons.astype(object)
                rows = rows.filter(pa.array(kept))
            if rows.num_rows:
                buffer = rows if buffer is None else pa.concat_tables([buffer, rows.cast(buffer.schema)])
        elif spec.partition is not None and parts is not None and spec.sources:  # idle partitions, DELAY OF's step
            _, parts, wm_new = sources_watermark(parts, spec.sources, np.array([], np.int64), np.array([], object),
                                                 np.array([], np.int64), np.array([], bool), p, wm_prev,
                                                 spec.time_shift)
        elif spec.partition is not None and parts is not None and spec.idle is not None:  # partitions turn idle
            _, parts, wm_new = partition_watermark(parts, np.array([], object), np.array([], np.int64),
                                                   np.array([], bool), p, spec.idle, wm_prev)
        self.parts = parts
        if finish:
            meta.finished = True
        if meta.finished:
            wm_new = POS_INF
        released = None
        if buffer is not None and buffer.num_rows:
            t = np.asarray(buffer.column(spec.time).to_numpy(zero_copy_only=False), dtype=np.int64)
            ready = np.ones(len(t), bool) if spec.pass_through else t < wm_new
            if ready.any():
                out = buffer.filter(pa.array(ready)) if not ready.all() else buffer
                out = out.take(sorted_indices(out, spec.time, spec.ties))
                buffer = buffer.filter(pa.array(~ready)) if not ready.all() else None
                released = self._frame(out)
                released[KIND] = np.full(len(released), PANE, np.int32)
                released[EMIT_TIME] = np.full(len(released), p, np.int64)
                counts["ordered_rows"] = len(released)
        if buffer is not None and buffer.num_rows == 0:
            buffer = None
        meta.wm = wm_new
        meta.rows = 0 if buffer is None else buffer.num_rows
        gauges = {"batch_time": p, "watermark": wm_new if wm_new < POS_INF else None,
                  "finished": int(meta.finished), "buffered_rows": meta.rows}
        metrics = pd.DataFrame({KIND: np.array([METRICS], np.int32),
                                **{metric_column(k): pd.array([v], dtype="Int64") for k, v in {**counts, **gauges}.items()}})
        frames = [f if f is not None else pd.DataFrame({KIND: np.array([], np.int32)}) for f in (released, dropped)]
        return meta, buffer, [*frames, metrics]


    def _frame(self, table: pa.Table) -> pd.DataFrame:
        """Rows as the output frame: the engine path's pandas form (integers exact with NULLs),
        wall-clock timestamps as naive datetimes."""
        frame = arrow_frame(table)
        for name in self.spec.wall_clock:
            frame[name] = table.column(name).to_pandas(timestamp_as_object=False, coerce_temporal_nanoseconds=False)
        return frame


class OrderOperator:
    """The stream's calls in transformWithStateInPandas, given the state handle and the state
    variable by udfs/tws.py's `OrderProcessor`."""

    def __init__(self, spec: OrderSpec, handle, state):
        self.spec = spec
        self.handle = handle
        self.state = state
        self.step = OrderStep(spec)

    def input_rows(self, key, rows, timerValues):
        blobs, finish = [], False
        for frame in rows:
            frame.columns = self.spec.frame_columns  # Spark renames columns named __x to _<position>
            kind = frame[KIND].to_numpy()
            finish = finish or bool((kind == FINISH).any())
            blobs += [b for b in frame[PACK].to_numpy()[kind == PACKED] if b is not None]
        yield from self._advance(from_ipc(blobs), finish, timerValues)

    def expired(self, key, timerValues, expiry_ms: int | None = None):
        """The timer fired: the watermark moved (PySpark deletes a fired timer itself)."""
        yield from self._advance(None, False, timerValues, fired=expiry_ms)

    def _advance(self, rows, finish: bool, timerValues, fired: int | None = None):
        spark_ms = timerValues.getCurrentWatermarkInMs()
        p = timerValues.getCurrentProcessingTimeInMs() * 1000
        value = self.state.get()
        if value is None:
            meta, buffer, parts = OrderMeta(), None, None
        else:
            *fields, blob, parts_blob = value
            meta, buffer, parts = OrderMeta(*fields), from_ipc([blob]), partitions_from_ipc(parts_blob)
        meta, buffer, frames = self.step.step(meta, buffer, rows, p=p, spark_ms=spark_ms, finish=finish, parts=parts)
        parts_blob = None
        if self.spec.partition is None:
            self._poll(meta, spark_ms, fired)  # under ASCENDING PER Spark's watermark is a constant: no timer
        elif self.step.parts is not None:
            parts_blob = partitions_to_ipc(self.step.parts)
        self.state.update((*meta.row(), to_ipc(buffer), parts_blob))
        yield one_frame([f for f in frames if len(f)], self.spec.output_columns())

    def _poll(self, meta: OrderMeta, spark_ms: int, fired: int | None) -> None:
        """One event-time timer at the next watermark advance, while the batches so far move the
        watermark past Spark's current one (a batch without data may then follow); none after the
        finish."""
        if fired is not None and meta.poll == fired:
            meta.poll = None
        moves = own_watermark_ms(meta.seen, self.spec.column_shift, self.spec.delay_ms) > spark_ms
        want = poll_timer_ms(spark_ms) if moves and not meta.finished else None
        if meta.poll == want:
            return
        if meta.poll is not None:
            self.handle.deleteTimer(meta.poll)
        if want is not None:
            self.handle.registerTimer(want)
        meta.poll = want
