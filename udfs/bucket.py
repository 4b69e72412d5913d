"""The engine over one hash bucket of keys: the grouped function of the engine path.

Spark hash-partitions the input rows by `pmod(hash(keys), N)` and calls a `BucketJob` once per
partition (bucket) with all of its rows (`mapInArrow` via `ArrowBuckets`): many keys per Python
call, one `Engine.run` per call. One Python call per key is about 20x slower
(docs/spark-internals.md). The watermark timeline and the end of input are global: the driver
computed them with Spark and they travel inside the job, so every bucket sees the same watermark.

The rows cross from Arrow to the engine's pandas columns and back column by column, exactly
(`engine_column`, `arrow_piece`): integers with NULLs as nullable Int64 (float64 would merge 2^53
and 2^53 + 1), FLOAT/DOUBLE as masked floats when a NaN must stay apart from NULL, dates, times
and day-time intervals as their integer count of days or microseconds (Spark's type again on the
way out), decimals, binary, ARRAY, STRUCT and MAP as Arrow-backed columns, which the engine
compares as Spark does (`sqlflow.engine.values`).

The output holds three kinds of rows (column `KIND`; names and codes: sqlflow/columns.py):

- `PANE`: a pane (or a retraction), with `FINAL` telling whether it is the window's final
  value: not retracted later (retracting mode), not followed by a later pane of the same window
  (accumulating mode), always (discarding mode);
- `DROPPED`: an input row the engine dropped, with the reason and the window it missed;
- `METRICS`: one per bucket, the number of input rows (`ROWS`), for metrics.

Runs on Spark's Python workers: imports only the engine (with its numba kernels), numpy, pandas and pyarrow.

>>> import pyarrow as pa
>>> from sqlflow import ast
>>> from sqlflow.engine.aggregates import Aggregate
>>> from sqlflow.columns import EVENT_TIME
>>> from sqlflow.engine.plan import EnginePlan
>>> plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(10)))),
...                   (Aggregate("sum", "a0", "agg0"),), keys=("k0",))
>>> schema = pa.schema([(KIND, pa.int32()), (REASON, pa.string()), ("window_start", pa.int64()),
...                     ("k0", pa.string()), ("agg0", pa.int64()), ("a0", pa.int32())])
>>> job = BucketJob(plan, columns=tuple(schema.names), keys=("k0",), args=("a0",))
>>> rows = pa.table({"k0": ["x", "x", "y", "x"], "a0": pa.array([1, 2, None, 4], pa.int32()),
...                  EVENT_TIME: pa.array([3, 12, 5, None], pa.int64())})
>>> out = job.table(arrow_frame(rows), schema).to_pylist()
>>> sorted((r["k0"], r["window_start"], r["agg0"]) for r in out if r[KIND] == PANE)
[('x', 0, 1), ('x', 10, 2), ('y', 0, None)]
>>> [(r["k0"], r["a0"], r[REASON]) for r in out if r[KIND] == DROPPED]
[('x', 4, 'null event time')]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sqlflow.columns import (ARRIVAL_TIME, DROPPED, EVENT_TIME, FINAL, HOLD_SINCE, HOLD_UNTIL, IS_RETRACTION, KIND, METRICS,
                             PANE, PANE_INDEX, REASON, ROWS, WINDOW_END, WINDOW_START)
from sqlflow.engine.aggregates import overflow_column
from sqlflow.engine.arrival_combine import ChunkedCombine, combine
from sqlflow.engine.exact import decimal_average
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine import values
from sqlflow.engine.kernels import lex_order
from sqlflow.engine.watermarks import Timeline
from sqlflow.udfs.worker_gc import freeze_imports


@dataclass
class BucketJob:
    """Runs one EnginePlan over the rows of a bucket (picklable: it travels to the executors).

    - `columns`: the output columns, in the order of the Spark schema;
    - `keys`, `args`: key and aggregate-argument input columns (args are echoed for dropped rows);
    - `timeline`, `p_end`, `replay`: the global watermark and end of input of a replay (or
      `shared`: the timeline as a broadcast variable, loaded once per Python worker);
    - `weight`: the column of how many input rows each element stands for when Spark combined
      rows before the shuffle (sqlflow/spark/engine_path.py), for the input-rows metric;
    - `combine`: (slice size, slice offset, period, offset, parts) when the replayed rows are
      combined per key, aligned slice (a session's gap, a FIXED window) and arrival period before
      the engine runs
      (sqlflow/engine/arrival_combine.py; `plan` then aggregates the partials `parts` and
      `weight` counts the rows);
    - `averages`: (output, sum, count, sum scale, scale) per AVG of a DECIMAL, which the job
      divides as Spark does (`sqlflow.engine.exact.decimal_average`);
    - `chunked`: (plan over the partials, weight column, combine tuple as `combine`) when a bucket
      of more than `chunk_rows` rows (a hot key) may be combined the same way while its batches
      are read, chunk by chunk (`ArrowBuckets`), so that its memory follows the combined groups
      and the rows that stay single, not its rows.
    """

    plan: EnginePlan
    columns: tuple
    keys: tuple = ()
    args: tuple = ()
    timeline: Timeline | None = None
    p_end: int | None = None
    replay: bool = False
    weight: str | None = None  # a column of how many input rows each element stands for
    shared: Any = None  # the timeline as a Spark broadcast variable (instead of `timeline`)
    combine: tuple | None = None  # (size, slice offset, period, offset, parts): sqlflow.engine.arrival_combine
    chunked: tuple | None = None  # (plan, weight, combine): combining a bucket above chunk_rows rows
    chunk_rows: int = 1_000_000
    averages: tuple = ()  # (output, sum, count, sum scale, scale): AVG of a DECIMAL (sqlflow/spark/handover.py)

    def table(self, rows: pd.DataFrame, schema):
        """The output as one Arrow table of `schema`, built column by column from the parts'
        arrays (`arrow_stack`), not through one stacked pandas frame."""
        rows, result = self._run(rows)
        parts = [self._panes(result.panes), self._dropped(rows, result.dropped), self._metrics(rows)]
        return arrow_stack([(k, p) for k, p in zip((PANE, DROPPED, METRICS), parts) if len(p)], schema)

    def _run(self, rows: pd.DataFrame):
        rows = self._prepare(rows)
        # a broadcast value is loaded once per worker process and kept: every bucket job of the
        # process shares that Timeline (and the lookup lists it builds when first asked)
        timeline = self.timeline if self.shared is None else self.shared.value
        if self.combine is not None:
            if self.weight is None:
                raise ValueError("combined rows need a weight column")
            size, slice_offset, period, offset, parts = self.combine
            rows = combine(rows, keys=self.keys, gap=size, period=period, offset=offset, timeline=timeline,
                           parts=parts, weight=self.weight, slice_offset=slice_offset)
        # in retracting mode the engine tells which rows are final from the panes' lineage
        final = FINAL if self.plan.mode.retracting else None
        return rows, Engine(self.plan).run(rows, timeline=timeline, replay=self.replay, p_end=self.p_end,
                                           ordered=False, final=final, hold=(HOLD_SINCE, HOLD_UNTIL) if self.replay else None)

    def combiner(self) -> "tuple[BucketJob, ChunkedCombine]":
        """For a bucket read in chunks (`chunked`): the job that runs the engine over the combined
        elements, and the combiner the chunks go to."""
        import dataclasses

        if self.chunked is None:
            raise ValueError("this bucket job is not read in chunks")
        plan, weight, (size, slice_offset, period, offset, parts) = self.chunked
        timeline = self.timeline if self.shared is None else self.shared.value
        job = dataclasses.replace(self, plan=plan, weight=weight, combine=None, chunked=None)
        return job, ChunkedCombine(keys=self.keys, gap=size, period=period, offset=offset, timeline=timeline,
                                   parts=parts, slice_offset=slice_offset)

    def _metrics(self, rows: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({ROWS: [int(rows[self.weight].sum()) if self.weight else len(rows)]})

    # ------------------------------------------------------------------ input

    def _prepare(self, rows: pd.DataFrame) -> pd.DataFrame:
        # time order (Spark's shuffle keeps none; it hands over a few runs in arrival order, which a
        # stable sort merges); the engine orders keys itself. `take` copies: the caller's frame stays
        et = _filled(rows[EVENT_TIME])
        at = _filled(rows[ARRIVAL_TIME]) if self.replay else et
        return rows.take(lex_order(at, et)).reset_index(drop=True)

    # ------------------------------------------------------------------ output

    def _panes(self, panes: pd.DataFrame) -> pd.DataFrame:
        if not len(panes):
            return panes
        panes = panes.copy(deep=False)  # columns are replaced, never written into
        retraction = panes[IS_RETRACTION] if IS_RETRACTION in panes else pd.Series(False, index=panes.index)
        panes[IS_RETRACTION] = retraction.astype(bool)
        if FINAL not in panes:
            panes[FINAL] = _final(panes, list(self.keys), self.plan.mode)
        for output, total, count, sum_scale, scale in self.averages:
            sums = arrow_piece(panes[total], _decimal128(38, sum_scale))
            average, fits = decimal_average(sums, panes[count].to_numpy(np.int64), scale)
            panes[output] = pd.Series(pd.arrays.ArrowExtensionArray(average), index=panes.index)
            panes[overflow_column(output)] = ~fits
        return panes

    def _dropped(self, rows: pd.DataFrame, dropped: pd.DataFrame) -> pd.DataFrame:
        if not len(dropped):
            return dropped.iloc[:0]
        picked = rows.iloc[dropped["row"].to_numpy()].reset_index(drop=True)
        cols = [c for c in self.keys + self.args + (EVENT_TIME, ARRIVAL_TIME) if c in picked]
        out = picked[cols].copy()
        out[REASON] = dropped["reason"].to_numpy()
        out[WINDOW_START] = dropped["window_start"].array
        out[WINDOW_END] = dropped["window_end"].array
        return out


@dataclass
class ArrowBuckets:
    """The `mapInArrow` function of the engine path: one `BucketJob` over all batches of a partition.

    The Arrow batches become one pandas frame (`arrow_frame`) and the job's output one Arrow table
    of `schema` (`BucketJob.table`). Cheaper than PySpark's pandas conversion, which converts each
    batch of `spark.sql.execution.arrow.maxRecordsPerBatch` rows on its own, and exact (measured:
    2M rows handed over in 0.8 s instead of 1.0-1.3 s).

    A bucket of more than `job.chunk_rows` rows whose rows combine (`BucketJob.chunked`: a hot key
    of a replay) is read in chunks of that many rows instead, each combined into the groups of
    the chunks before (`ChunkedCombine`): one worker's memory then follows the combined groups and
    the rows that stay single, not the bucket's rows (benchmarks/hot_key.py)."""

    job: BucketJob
    schema: object  # pyarrow.Schema of the output (sqlflow.spark.engine_path.arrow_schema)

    def __call__(self, batches):
        import pyarrow as pa

        freeze_imports()
        job = self.job
        limit = job.chunk_rows if job.chunked is not None else 0
        held: list = []
        n = 0
        combined = None
        for batch in batches:
            held.append(batch)
            n += batch.num_rows
            if limit and n >= limit:  # a hot bucket: combine what is held, read on in chunks
                if combined is None:
                    combined = job.combiner()
                combined[1].add(arrow_frame(pa.Table.from_batches(held)))
                held, n = [], 0
        if combined is not None:
            if held:
                combined[1].add(arrow_frame(pa.Table.from_batches(held)))
            del held
            sub, combiner = combined
            if sub.weight is None:
                raise ValueError("combined elements need a weight column")
            out = sub.table(combiner.elements(sub.weight), self.schema)
        elif held:
            out = job.table(arrow_frame(pa.Table.from_batches(held)), self.schema)
        else:
            return
        yield from out.to_batches(max_chunksize=1 << 17)


def arrow_frame(table) -> pd.DataFrame:
    """An Arrow table as the pandas frame `BucketJob` takes (`engine_column`)."""
    return pd.DataFrame({name: engine_column(column) for name, column in zip(table.column_names, table.columns)},
                        index=pd.RangeIndex(table.num_rows))


def engine_column(column):
    """One Arrow column as the engine takes it (see the module doc): integers, and the integer
    count of dates, times and day-time intervals, exact with NULLs; FLOAT/DOUBLE masked when a
    NaN must stay apart from NULL; strings and booleans as pandas holds them; anything else
    Arrow-backed.

    >>> import pyarrow as pa
    >>> engine_column(pa.array([1.5, float("nan"), None])).isna().tolist()
    [False, False, True]
    >>> engine_column(pa.array([2**53 + 1, None])).tolist()
    [9007199254740993, <NA>]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    t = column.type
    if pa.types.is_date32(t):
        column, t = column.cast(pa.int32()), pa.int32()
    elif pa.types.is_temporal(t) and not pa.types.is_interval(t):  # timestamps, times, durations
        column, t = column.cast(pa.int64()), pa.int64()
    if pa.types.is_integer(t):
        if column.null_count:
            values = np.asarray(column.fill_null(0)).astype(np.int64)
            return pd.arrays.IntegerArray(values, np.asarray(column.is_null()))
        return column.to_numpy()
    if pa.types.is_floating(t):
        if pc.any(pc.is_nan(column)).as_py():  # pandas takes a NaN in a numpy column for NULL
            return pd.arrays.FloatingArray(np.asarray(column.fill_null(0)), np.asarray(column.is_null()))
        return column.to_numpy(zero_copy_only=False)  # no NaN: a NaN here is a NULL
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t) or pa.types.is_null(t):
        return column.to_pandas()
    return pd.arrays.ArrowExtensionArray(column)


def _decimal128(precision: int, scale: int):
    import pyarrow as pa

    return pa.decimal128(precision, scale)


def arrow_piece(values: pd.Series, arrow_type):
    """An output column's values (as the engine or the input gave them) as an Arrow array of
    `arrow_type`: Arrow-backed values as they are, masked numbers with their mask (NaN stays a
    number), integer counts of days and microseconds as dates and timestamps, Python objects
    exactly (None is NULL, NaN a number), plain numpy numbers with NaN as NULL.

    >>> import pyarrow as pa, numpy as np
    >>> arrow_piece(pd.Series([18000, None], dtype="Int64"), pa.date32()).to_pylist()
    [datetime.date(2019, 4, 14), None]
    >>> arrow_piece(pd.Series([[1.0, float("nan")], None], dtype=object), pa.list_(pa.float64())).to_pylist()
    [[1.0, nan], None]
    """
    import pyarrow as pa

    array = values.array
    if isinstance(array, pd.arrays.NumpyExtensionArray):
        array = None  # a numpy column: NaN is NULL there (below)
    if isinstance(array, pd.arrays.ArrowExtensionArray):
        out = array._pa_array  # the Arrow data, without a copy
        out = out.combine_chunks() if out.num_chunks != 1 else out.chunk(0)
    elif values.dtype == object:
        return pa.array(values.to_numpy(dtype=object), type=arrow_type, from_pandas=False)
    elif isinstance(array, pd.api.extensions.ExtensionArray):
        out = pa.array(array)
    else:
        numbers = values.to_numpy()
        if numbers.dtype.kind == "f" and not pa.types.is_floating(arrow_type):  # NaN: NULL of an integer type
            missing = np.isnan(numbers)
            out = pa.array(np.where(missing, 0, numbers).astype(np.int64), mask=missing)
        else:
            out = pa.array(numbers, from_pandas=True)
    if out.type == arrow_type:
        return out
    if pa.types.is_date32(arrow_type) and pa.types.is_integer(out.type):
        out = out.cast(pa.int32())
    return out.cast(arrow_type, safe=not pa.types.is_floating(arrow_type))


def arrow_stack(parts: list, schema):
    """The parts ((kind, frame) for panes, dropped rows, metrics; each frame with some of the
    schema's columns) one under the other as an Arrow table: each column chunked by part, a part's
    piece converted by `arrow_piece` or NULLs where the part lacks it, the kind column a repeated
    code."""
    import pyarrow as pa

    columns = []
    for field in schema:
        pieces = []
        for kind, part in parts:
            if field.name == KIND:
                pieces.append(pa.repeat(kind, len(part)).cast(field.type))
            elif field.name in part:
                pieces.append(arrow_piece(part[field.name], field.type))
            else:
                pieces.append(pa.nulls(len(part), field.type))
        columns.append(pa.chunked_array(pieces, type=field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _filled(values: pd.Series) -> np.ndarray:
    """Times (microseconds) as int64, NULL as the largest (last in time order)."""
    if pd.api.types.is_integer_dtype(values.dtype):  # int64, or Int64 with NULLs
        return values.to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).max)
    v = pd.to_numeric(values, errors="coerce")
    return v.fillna(np.iinfo(np.int64).max).to_numpy(dtype=np.float64)


def _final(panes: pd.DataFrame, keys: list[str], mode) -> np.ndarray:
    """Whether each pane row is its window's final value (see the module doc), in the discarding
    and accumulating modes (in retracting mode the engine marks them: `BucketJob._run`)."""
    n = len(panes)
    if not mode.accumulating:
        return np.ones(n, bool)
    if mode.retracting:
        raise AssertionError("in retracting mode the engine marks the final rows")
    ident = values.key_ids(panes, keys + [WINDOW_START, WINDOW_END])
    index = panes[PANE_INDEX].to_numpy()
    latest = np.full(int(ident.max()) + 1 if n else 0, np.iinfo(np.int64).min)
    np.maximum.at(latest, ident, index)
    return index >= latest[ident]
