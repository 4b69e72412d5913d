"""One micro-batch of the owned-sink executor for one hash bucket: Arrow in, Arrow out.

Runs on Spark's Python workers, as the function of `batch.groupBy(bucket).cogroup(state.groupBy(
bucket)).applyInArrow(...)` inside `foreachBatch` (driver side: sqlflow/spark/streaming/owned.py).
Per bucket it receives the micro-batch's rows of the bucket (raw rows, or partial aggregates per
key and window with a weight where they combine exactly) and the bucket's state of the batch
before (zero or one row: the `Meta` bookkeeping and the engine state, `state_codec` bytes), and
returns one Arrow table: the panes (KIND PANE), with `StreamSpec.keep_dropped` the rows the engine
dropped (KIND DROPPED: one per (row, window) pair, with the reason and the window; the driver
writes them to the stream's `dropped_path`), one counters row (KIND METRICS) and the bucket's new
state (KIND STATE). The step itself is udfs/streaming.py's `BucketStep`, the one the
transformWithState operator runs: `Engine.advance(rows, p, wm_prev, wm_new)` vectorised over
every key of the bucket.

The watermark comes from the driver, one for all buckets (`BatchSpec.wm_prev`, `wm_new`: the
largest event time of the batches before this one and before the one before, minus the delay),
so a bucket that has never been called judges its first rows against the same watermark as every
other. Every bucket that holds state is called in every batch (the cogroup has its state row), so
timers and watermark crossings fire in every batch, with or without rows of that bucket.

>>> from sqlflow import ast
>>> from sqlflow.engine.aggregates import Aggregate
>>> from sqlflow.engine.plan import EnginePlan
>>> import pyarrow as pa
>>> w = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(10))), None, ast.AllowedLateness(ast.Duration(0)),
...                   ast.Emit(ast.AccumulationMode.DISCARDING))
>>> spec = StreamSpec(EnginePlan(w, (Aggregate("count_star", None, "n"),), keys=("k",)), ("k", "__sqlflow_et"))
>>> step = BatchStep(spec, output_schema(spec, {"k": pa.string(), "n": pa.int64()}))
>>> rows = pa.table({"k": ["a", "a", "b"], "__sqlflow_et": [1, 2, 15]})
>>> out = step.run(0, rows, None, p=100, wm_prev=NEG_INF, wm_new=12)
>>> panes = out.filter(pa.compute.equal(out["__sqlflow_kind"], PANE))
>>> panes.select(["k", "n", "window_start", "pane_timing"]).to_pylist()
[{'k': 'a', 'n': 2, 'window_start': 0, 'pane_timing': 'ON_TIME'}]
>>> state = out.filter(pa.compute.equal(out["__sqlflow_kind"], STATE))
>>> state[state_meta_column("windows")].to_pylist(), state[state_meta_column("seen")].to_pylist()
([1], [15])
>>> again = step.run(0, rows.slice(0, 0), state, p=200, wm_prev=12, wm_new=30)
>>> again.filter(pa.compute.equal(again["__sqlflow_kind"], PANE)).select(["k", "n", "window_start"]).to_pylist()
[{'k': 'b', 'n': 1, 'window_start': 10}]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sqlflow.columns import (BUCKET, DATA, EVENT_TIME, FINISH, KIND, LATEST, PANE, PARTIAL_OVERFLOW, STATE,
                             STATE_BYTES, STATE_FORMAT, STATE_META, metric_column, state_meta_column)
from sqlflow.errors import SqlflowExecutionError
from sqlflow.engine import state_codec
from sqlflow.time import NEG_INF, POS_INF
from sqlflow.udfs.bucket import arrow_frame
from sqlflow.udfs.operator_frames import arrow_output
from sqlflow.udfs.streaming import BucketStep, Meta, StreamSpec, engine_watermark, own_watermark_ms
from sqlflow.udfs.worker_gc import freeze_imports

__all__ = ["BUCKET_LAYOUT", "SPARK_LAYOUT", "BatchSpec", "BatchStep", "StateFiles", "driver_batch", "NEG_INF", "PANE", "STATE", "StreamSpec", "output_schema", "state_columns",
           "state_meta_column"]


def state_columns() -> list[str]:
    """The columns of a bucket's state row, in order (the state files' schema)."""
    return [BUCKET, STATE_FORMAT, *[state_meta_column(f) for f in STATE_META], STATE_BYTES]


#: Arrow types of the state columns (the engine's int64 times; `seen`: the largest event time)
def _state_types():
    import pyarrow as pa

    types = {BUCKET: pa.int32(), STATE_FORMAT: pa.int32(), STATE_BYTES: pa.binary()}
    types.update({state_meta_column(f): pa.bool_() if f == "finished" else pa.int64() for f in STATE_META})
    return types


def output_schema(spec: StreamSpec, types: dict):
    """The Arrow schema of a bucket's output: the operator's columns (`StreamSpec.output_columns`:
    keys and aggregates typed by `types`, an aggregate's overflow flag boolean, the wire columns as
    `columns.OUTPUT_TYPES` says, counters int64), then the state columns. The driver builds the
    same from Spark's types (owned.py)."""
    import pyarrow as pa

    from sqlflow.columns import OUTPUT_TYPES
    from sqlflow.engine.aggregates import overflow_column

    arrow = {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string(), "boolean": pa.bool_()}
    flags = {overflow_column(a.output) for a in spec.plan.aggregates if a.may_overflow}
    fields = []
    for c in spec.output_columns():
        kind = types.get(c) or (pa.bool_() if c in flags else arrow[OUTPUT_TYPES.get(c, "bigint")])
        fields.append(pa.field(c, kind))
    state = _state_types()
    fields += [pa.field(c, state[c]) for c in state_columns()]
    return pa.schema(fields)


def batch_watermark(seen: int | None, delay: int, shift: int = 0) -> int:
    """The watermark of a micro-batch (engine us) when `seen` is the largest event time of the
    batches before it (None: none yet): Spark's rule, max event time - delay, both in whole
    milliseconds, on the event time + `shift` (us; the query's time shift), NEG_INF before any.

    >>> batch_watermark(None, 10_000_000) == NEG_INF
    True
    >>> batch_watermark(1_700_000_000_123_999, 10_000_000)
    1699999990123000
    """
    if seen is None:
        return NEG_INF
    return engine_watermark(own_watermark_ms(seen, shift, delay // 1000), shift)


@dataclass(frozen=True)
class BatchSpec:
    """One micro-batch's instant, the same for every bucket (decided by the driver)."""

    p: int  # the batch's processing time (us)
    wm_prev: int  # the watermark its rows are judged against (us; NEG_INF: none yet)
    wm_new: int  # the watermark it steps to
    finish: bool = False  # the batch ends the input
    finished: bool = False  # an earlier batch ended the input (a bucket new now starts finished)
    where: str = "the checkpoint"  # where the state was read (for errors)
    #: the bucket reads and writes its state files itself (`StateFiles`; None: the driver hands the
    #: state in through a cogroup and writes the STATE rows)
    files: "StateFiles | None" = None


@dataclass(frozen=True)
class StateFiles:
    """Where a bucket reads its state of the batch before and writes its new one, when the bucket's
    call does both itself (one Spark job per batch, docs/streaming.md 3.0): `read` the version
    before (None: none yet), laid out as `layout` says (`SPARK_LAYOUT`: one parquet dataset of all
    buckets, as Spark wrote it; `BUCKET_LAYOUT`: one parquet file per bucket, `bucket_file`),
    `write` the version this batch writes (`BUCKET_LAYOUT`). Both are URIs or local paths that
    pyarrow's file systems open.

    >>> import tempfile, pyarrow as pa
    >>> where = tempfile.mkdtemp()
    >>> files = StateFiles(None, BUCKET_LAYOUT, where + "/v=0")
    >>> row = pa.table({"x": [1]})
    >>> files.save(3, row); StateFiles(where + "/v=0", BUCKET_LAYOUT, where + "/v=1").load(3).to_pylist()
    [{'x': 1}]
    """

    read: str | None
    layout: int
    write: str

    def load(self, bucket: int):
        """The bucket's state table of the version before (zero or one row; None: no version yet)."""
        import pyarrow.parquet as pq

        if self.read is None:
            return None
        fs, root = file_system(self.read)
        if self.layout == SPARK_LAYOUT:
            import pyarrow.dataset as ds

            data = ds.dataset(root, format="parquet", filesystem=fs)
            return data.to_table(filter=ds.field(BUCKET) == bucket)
        path = f"{root}/{bucket_file(bucket)}"
        try:  # one file: not the dataset machinery of `pq.read_table` (2 ms against 1 ms a bucket)
            with fs.open_input_file(path) as f:
                return pq.ParquetFile(f).read()
        except FileNotFoundError:
            raise SqlflowExecutionError(f"the state version {self.read} has no file for bucket {bucket} "
                                        f"({bucket_file(bucket)})", clause="STREAM") from None

    def save(self, bucket: int, table) -> None:
        """Write the bucket's state table to the version this batch writes, atomically (a hidden
        temporary name, then a rename: a task Spark runs again writes it again, whole). Without a
        dictionary or statistics for its one row (a 1.6 MB state written in 1.0-1.4 ms against
        4.7 ms, docs/dev/streaming-performance.md 1): the same schema and values."""
        import uuid

        import pyarrow.parquet as pq

        fs, root = file_system(self.write)
        fs.create_dir(root, recursive=True)
        tmp = f"{root}/.{bucket_file(bucket)}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table, tmp, filesystem=fs, use_dictionary=False, write_statistics=False)
        fs.move(tmp, f"{root}/{bucket_file(bucket)}")


#: the layouts of a state version: Spark's parquet dataset of all buckets (the first one), and one
#: file per bucket written by the bucket's own call
SPARK_LAYOUT, BUCKET_LAYOUT = 1, 2


def bucket_file(bucket: int) -> str:
    """The file of one bucket's state in a version of `BUCKET_LAYOUT`."""
    return f"bucket-{bucket:05d}.parquet"


def file_system(uri: str):
    """(pyarrow file system, path) of a URI or local path; Hadoop's `file:/x` is the local /x."""
    from pyarrow import fs

    if uri.startswith("file:") and not uri.startswith("file://"):
        uri = "/" + uri[len("file:"):].lstrip("/")
    if uri.startswith("/"):
        return fs.LocalFileSystem(), uri
    return fs.FileSystem.from_uri(uri)


#: per worker process: the step of each plan, built once (the engine compiles its trigger)
_STEPS: dict = {}


class BatchStep:
    """The cogroup function: `(key, rows, state) -> output` for one bucket at one batch."""

    def __init__(self, spec: StreamSpec, schema, batch: BatchSpec | None = None, token: str = ""):
        self.spec, self.schema, self.batch, self.token = spec, schema, batch, token

    def __call__(self, key, rows, state=None):
        """A bucket's call: `state` handed in (a cogroup), or read from `BatchSpec.files`, and then
        the new state written there, its STATE row carrying the bookkeeping without the bytes."""
        freeze_imports()
        return self.bucket(int(key[0].as_py()), rows, state)

    def bucket(self, bucket: int, rows, state=None):
        """One bucket at the batch's instant (`BatchSpec`): its state handed in, or read from
        `BatchSpec.files` and its new state written there."""
        b = self.batch
        assert b is not None
        if b.files is not None:
            state = b.files.load(bucket)
        return self.run(bucket, rows, state if state is not None and state.num_rows else None, p=b.p,
                        wm_prev=b.wm_prev, wm_new=b.wm_new, finish=b.finish, finished=b.finished, where=b.where,
                        files=b.files)

    def _step(self) -> BucketStep:
        step = _STEPS.get(self.token) if self.token else None
        if step is None:
            step = BucketStep(self.spec)
            if self.token:
                _STEPS[self.token] = step
        return step

    def run(self, bucket: int, rows, state, *, p: int, wm_prev: int, wm_new: int, finish: bool = False,
            finished: bool = False, where: str = "the checkpoint", files: StateFiles | None = None):
        """The bucket's output table (panes, counters, new state) at instant (p, wm_prev, wm_new);
        with `files` the new state is written there and its STATE row holds no bytes."""
        step = self._step()
        meta, engine_state = self._stored(state, bucket, where)
        if state is None and finished:  # a bucket that first gets rows after the end of input
            meta.finished, meta.wm = True, POS_INF
        meta.wm = max(meta.wm, wm_prev)
        frame = arrow_frame(rows) if rows is not None and rows.num_rows else None
        if frame is not None:
            frame, finish = self._data(frame, finish)
        if frame is not None:  # the largest event time seen by this bucket (the driver's watermark)
            times = frame[LATEST] if LATEST in frame else frame[EVENT_TIME]
            top = times.max()
            if not pd.isna(top):
                meta.seen = int(top) if meta.seen is None else max(meta.seen, int(top))
            if LATEST in frame:
                frame = frame.drop(columns=[LATEST])
        wm_new = POS_INF if meta.finished else max(wm_new, meta.wm)
        if step.due(meta, p, wm_new, frame is not None, finish):
            frames, engine_state = step.run(meta, engine_state, frame, p=p, wm_new=wm_new, finish=finish,
                                            columns=True)
            blob = state_codec.encode(engine_state) if engine_state else None
            meta.bytes = len(blob) if blob is not None else 0
            frames[-1] = step.live(frames[-1], meta)
        else:
            frames = step.skip(meta, p, wm_new)
            blob = state[STATE_BYTES][0].as_py() if state is not None else None
        if files is not None:
            files.save(bucket, self.state_table(bucket, meta, blob))
            blob = None
        frames.append(self._state_row(bucket, meta, blob))
        return arrow_output(frames, self.schema)

    @staticmethod
    def state_table(bucket: int, meta: Meta, blob: bytes | None):
        """The bucket's state as a one-row Arrow table of the state files' schema (`state_columns`)."""
        import pyarrow as pa

        types = _state_types()
        values = {BUCKET: bucket, STATE_FORMAT: state_codec.FORMAT_VERSION, STATE_BYTES: blob}
        for f in STATE_META:
            v = getattr(meta, f)
            values[state_meta_column(f)] = bool(v) if f == "finished" else (None if v is None else int(v))
        return pa.table({c: pa.array([values[c]], types[c]) for c in state_columns()})

    @staticmethod
    def _data(frame: pd.DataFrame, finish: bool) -> tuple[pd.DataFrame | None, bool]:
        """The data rows of a bucket's input (its finish markers say the input ends), without the
        executor's own columns."""
        if KIND in frame:
            kind = frame[KIND].to_numpy()
            finish = finish or bool((kind == FINISH).any())
            if not (kind == DATA).all():
                frame = frame[kind == DATA].reset_index(drop=True)
        if PARTIAL_OVERFLOW in frame:
            if frame[PARTIAL_OVERFLOW].fillna(False).astype(bool).any():
                raise SqlflowExecutionError(
                    "a SUM over one micro-batch's rows of one key and window left BIGINT, so its partial "
                    "aggregate is not exact", clause="STREAM",
                    hint="run this stream with spark.sqlflow.streaming.executor = operator")
        frame = frame.drop(columns=[c for c in (KIND, BUCKET, PARTIAL_OVERFLOW) if c in frame])
        return (frame if len(frame) else None), finish

    @staticmethod
    def _stored(state, bucket: int, where: str) -> tuple[Meta, dict]:
        if state is None:
            return Meta(), {}
        row = {c: state[c][0].as_py() for c in state.column_names}
        version = row.get(STATE_FORMAT)
        if version != state_codec.FORMAT_VERSION:
            raise state_codec.StateFormatError(
                f"the state at {where}, bucket {bucket} has format version {version}; this sqlflow reads format "
                f"version {state_codec.FORMAT_VERSION}", clause="STREAM")
        values = {f: row[state_meta_column(f)] for f in STATE_META}
        meta = Meta(**{f: (v if v is not None else getattr(Meta(), f)) for f, v in values.items()})
        meta.finished = bool(meta.finished)
        blob = row[STATE_BYTES]
        return meta, (state_codec.decode(blob, where=f"{where}, bucket {bucket}") if blob is not None else {})

    @staticmethod
    def _state_row(bucket: int, meta: Meta, blob: bytes | None) -> pd.DataFrame:
        out = {KIND: np.array([STATE], np.int32), BUCKET: pd.array([bucket], dtype="Int32"),
               STATE_FORMAT: pd.array([state_codec.FORMAT_VERSION], dtype="Int32")}
        for f in STATE_META:
            v = getattr(meta, f)
            out[state_meta_column(f)] = (pd.array([bool(v)], dtype="boolean") if f == "finished"
                                         else pd.array([None if v is None else int(v)], dtype="Int64"))
        out[STATE_BYTES] = np.array([blob], dtype=object)
        return pd.DataFrame(out)


def driver_batch(step: BatchStep, rows, buckets: int):
    """Every bucket of one micro-batch in one process: the driver-local step of the owned-sink
    executor (docs/streaming.md 3.0). `rows`: the batch's rows (or partial aggregates) with their
    bucket column, as the buckets' calls receive them; each bucket reads its state file of the
    batch before and writes its new one (`BatchSpec.files`, the same files as the distributed
    step's). The batch is sorted by bucket once and sliced; every bucket is stepped, rows or not
    (its timers and watermark crossings), one vectorised call per bucket. Returns the buckets'
    outputs as one table (the distributed step's rows: panes, dropped rows, counters, state).

    >>> import tempfile, pyarrow as pa
    >>> from sqlflow import ast
    >>> from sqlflow.engine import Aggregate, EnginePlan
    >>> w = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(10))), None, ast.AllowedLateness(ast.Duration(0)),
    ...                   ast.Emit(ast.AccumulationMode.DISCARDING))
    >>> spec = StreamSpec(EnginePlan(w, (Aggregate("count_star", None, "n"),), keys=("k",)), ("k", "__sqlflow_et"))
    >>> where = tempfile.mkdtemp()
    >>> batch = BatchSpec(100, NEG_INF, 12, files=StateFiles(None, BUCKET_LAYOUT, where + "/v=0"))
    >>> step = BatchStep(spec, output_schema(spec, {"k": pa.string(), "n": pa.int64()}), batch)
    >>> rows = pa.table({"k": ["a", "a", "b"], "__sqlflow_et": [1, 2, 15], "__sqlflow_bucket": [1, 1, 0]})
    >>> out = driver_batch(step, rows, 3)
    >>> out.filter(pa.compute.equal(out["__sqlflow_kind"], PANE)).select(["k", "n"]).to_pylist()
    [{'k': 'a', 'n': 2}]
    >>> sorted(p.name for p in __import__("pathlib").Path(where, "v=0").iterdir())
    ['bucket-00000.parquet', 'bucket-00001.parquet', 'bucket-00002.parquet']
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows and buckets > 1:
        rows = rows.take(pc.sort_indices(rows[BUCKET]))
        bounds = np.searchsorted(rows[BUCKET].to_numpy(), np.arange(buckets + 1))
    else:
        bounds = np.array([0] + [rows.num_rows] * buckets)
    outs = [step.bucket(b, rows.slice(int(bounds[b]), int(bounds[b + 1] - bounds[b]))) for b in range(buckets)]
    return pa.concat_tables(outs)


def metrics_columns() -> list[str]:
    """The counters a batch's METRICS rows carry (summed or taken by the driver)."""
    from sqlflow.columns import STREAM_COUNTERS, STREAM_GAUGES, STREAM_LIVE
    return [metric_column(m) for m in STREAM_COUNTERS + STREAM_GAUGES + STREAM_LIVE]
