"""The engine over one hash bucket of keys: the grouped function of the engine path.

Spark hash-partitions the input rows by `pmod(hash(keys), N)` and calls a `BucketJob` once per
partition (bucket) with all of its rows (`mapInArrow` via `ArrowBuckets`, or `mapInPandas`):
many keys per Python call, one `Engine.run` per call. One Python call per key is about 20x slower
(docs/spark-internals.md). The watermark timeline and the end of input are global: the driver
computed them with Spark and they travel inside the job, so every bucket sees the same watermark.

The output holds three kinds of rows (column `__sqlflow_kind`):

- `P`: a pane (or a retraction), with `__sqlflow_final` telling whether it is the window's final
  value: not retracted later (retracting mode), not followed by a later pane of the same window
  (accumulating mode), always (discarding mode);
- `D`: an input row the engine dropped, with the reason and the window it missed;
- `M`: one per bucket, the number of input rows (`__sqlflow_rows`), for metrics.

Runs on Spark's Python workers: imports only the engine (with its numba kernels), numpy, pandas and pyarrow.

>>> import numpy as np, pandas as pd
>>> from sqlflow import ast
>>> from sqlflow.engine.aggregates import Aggregate
>>> from sqlflow.engine.plan import EnginePlan, EVENT_TIME
>>> plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(10)))),
...                   (Aggregate("sum", "a0", "agg0"),), keys=("k0",))
>>> job = BucketJob(plan, columns=OUTPUT_COLUMNS + ("k0", "agg0", "a0"), keys=("k0",), args=("a0",),
...                 integral=("a0",), coerce=(("agg0", "int", 0),))
>>> rows = pd.DataFrame({"k0": ["x", "x", "y", "x"], "a0": [1.0, 2.0, np.nan, 4.0],
...                      EVENT_TIME: [3.0, 12.0, 5.0, np.nan]})
>>> out = job((0,), rows)
>>> panes = out[out[KIND] == "P"].sort_values(["k0", "window_start"])
>>> panes[["k0", "agg0", "window_start", "pane_timing", FINAL]].values.tolist()
[['x', 1, 0, 'ON_TIME', True], ['x', 2, 10, 'ON_TIME', True], ['y', <NA>, 0, 'ON_TIME', True]]
>>> out[out[KIND] == "D"][["k0", "a0", REASON]].values.tolist()
[['x', 4, 'null event time']]
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sqlflow.engine.plan import ARRIVAL_TIME, EVENT_TIME, EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.kernels import lex_order
from sqlflow.engine.watermarks import Timeline

KIND = "__sqlflow_kind"
REASON = "__sqlflow_reason"
FINAL = "__sqlflow_final"
ROWS = "__sqlflow_rows"
DROPPED_START = "__sqlflow_dropped_start"
DROPPED_END = "__sqlflow_dropped_end"
#: prefix of the NULL mask of a BIGINT input column (the column itself then holds 0 for NULL)
NULL_MASK = "__sqlflow_null_"
PANE, DROPPED, METRICS = "P", "D", "M"

#: columns every job outputs besides keys, aggregates and argument values
OUTPUT_COLUMNS = (KIND, REASON, FINAL, ROWS, "window_start", "window_end", "pane_index", "pane_timing",
                  "is_last", "emit_time", "is_retraction", EVENT_TIME, ARRIVAL_TIME, DROPPED_START,
                  DROPPED_END)


@dataclass
class BucketJob:
    """Runs one EnginePlan over the rows of a bucket (picklable: it travels to the executors).

    - `columns`: the output columns, in the order of the Spark schema;
    - `keys`, `args`: key and aggregate-argument input columns (args are echoed for dropped rows);
    - `integral`: input columns of an integer type (Spark hands them to pandas as float64 when
      they hold NULLs; the engine wants exact integers);
    - `masked`: BIGINT input columns shipped as value + NULL mask (`restore_nulls`): float64
      cannot hold every BIGINT;
    - `coerce`: (aggregate column, "int" | "float" | "decimal", scale) conversions to the Spark
      result type;
    - `timeline`, `p_end`, `replay`: the global watermark and end of input of a replay (or
      `shared`: the timeline as a broadcast variable, loaded once per Python worker);
    - `weight`: the column of how many input rows each element stands for when Spark combined
      rows before the shuffle (sqlflow/spark/engine_path.py), for the input-rows metric;
    - `kinds`: per output column, "long" or "bool" when its Spark type is BIGINT or BOOLEAN (the
      output then holds it as a nullable Int64 or boolean column), else "".
    """

    plan: EnginePlan
    columns: tuple
    keys: tuple = ()
    args: tuple = ()
    integral: tuple = ()
    coerce: tuple = ()
    masked: tuple = ()
    timeline: Timeline | None = None
    p_end: int | None = None
    replay: bool = False
    weight: str | None = None  # a column of how many input rows each element stands for
    shared: object = None  # the timeline as a Spark broadcast variable (instead of `timeline`)
    kinds: tuple = ()  # per output column: "long" (BIGINT), "bool" (BOOLEAN) or "" (other)

    def __call__(self, key, rows: pd.DataFrame) -> pd.DataFrame:
        rows, result = self._run(rows)
        parts = [self._panes(result.panes), self._dropped(rows, result.dropped), self._metrics(rows)]
        return _stack([p for p in parts if len(p)], self.columns, self.kinds)

    def table(self, rows: pd.DataFrame, schema):
        """The output as one Arrow table of `schema` (`ArrowBuckets`: plain types only), built
        column by column from the parts' arrays rather than through one stacked pandas frame."""
        rows, result = self._run(rows)
        parts = [self._panes(result.panes, kind=False), self._dropped(rows, result.dropped, kind=False),
                 self._metrics(rows, kind=False)]
        return _arrow_stack([(k, p) for k, p in zip((PANE, DROPPED, METRICS), parts) if len(p)], schema)

    def _run(self, rows: pd.DataFrame):
        rows = self._prepare(rows)
        # a broadcast value is loaded once per worker process and kept: every bucket job of the
        # process shares that Timeline (and the lookup lists it builds when first asked)
        timeline = self.timeline if self.shared is None else self.shared.value
        # in retracting mode the engine tells which rows are final from the panes' lineage
        final = FINAL if self.plan.mode.retracting else None
        return rows, Engine(self.plan).run(rows, timeline=timeline, replay=self.replay, p_end=self.p_end,
                                           ordered=False, final=final)

    def _metrics(self, rows: pd.DataFrame, kind: bool = True) -> pd.DataFrame:
        frame = pd.DataFrame({ROWS: [int(rows[self.weight].sum()) if self.weight else len(rows)]})
        if kind:
            frame[KIND] = METRICS
        return frame

    # ------------------------------------------------------------------ input

    def _prepare(self, rows: pd.DataFrame) -> pd.DataFrame:
        # time order (Spark's shuffle keeps none; it hands over a few runs in arrival order, which a
        # stable sort merges); the engine orders keys itself. `take` copies: the caller's frame stays
        et = _filled(rows[EVENT_TIME])
        at = _filled(rows[ARRIVAL_TIME]) if self.replay else et
        rows = restore_nulls(rows.take(lex_order(at, et)).reset_index(drop=True), self.masked)
        for column in self.integral + (EVENT_TIME,) + ((ARRIVAL_TIME,) if self.replay else ()):
            if column in rows and rows[column].dtype.kind == "f":
                rows[column] = rows[column].astype("Int64")
        return rows

    # ------------------------------------------------------------------ output

    def _panes(self, panes: pd.DataFrame, kind: bool = True) -> pd.DataFrame:
        if not len(panes):
            return panes
        panes = panes.copy(deep=False)  # columns are replaced, never written into
        retraction = panes["is_retraction"] if "is_retraction" in panes else pd.Series(False, index=panes.index)
        panes["is_retraction"] = retraction.astype(bool)
        if FINAL not in panes:
            panes[FINAL] = _final(panes, list(self.keys), self.plan.mode)
        for column, how, scale in self.coerce:
            panes[column] = _coerce(panes[column], how, scale)
        if kind:
            panes[KIND] = PANE
        return panes

    def _dropped(self, rows: pd.DataFrame, dropped: pd.DataFrame, kind: bool = True) -> pd.DataFrame:
        if not len(dropped):
            return dropped.iloc[:0]
        picked = rows.iloc[dropped["row"].to_numpy()].reset_index(drop=True)
        cols = [c for c in self.keys + self.args + (EVENT_TIME, ARRIVAL_TIME) if c in picked]
        out = picked[cols].copy()
        out[REASON] = dropped["reason"].to_numpy()
        out[DROPPED_START] = dropped["window_start"].to_numpy()
        out[DROPPED_END] = dropped["window_end"].to_numpy()
        if kind:
            out[KIND] = DROPPED
        return out


@dataclass
class ArrowBuckets:
    """The `mapInArrow` function of the engine path: one `BucketJob` over all batches of a partition.

    The Arrow batches become one pandas frame (`arrow_frame`) and the job's output one Arrow table
    of `schema` (`BucketJob.table`). Cheaper than PySpark's pandas conversion, which converts each batch of
    `spark.sql.execution.arrow.maxRecordsPerBatch` rows on its own, and exact for BIGINTs without
    NULL-mask columns (measured: 2M rows handed over in 0.8 s instead of 1.0-1.3 s)."""

    job: BucketJob
    schema: object  # pyarrow.Schema of the output (sqlflow.spark.engine_path.arrow_schema)

    def __call__(self, batches):
        import pyarrow as pa

        batches = list(batches)
        if batches:
            out = self.job.table(arrow_frame(pa.Table.from_batches(batches)), self.schema)
            yield from out.to_batches(max_chunksize=1 << 17)


def arrow_frame(table) -> pd.DataFrame:
    """An Arrow table as the pandas frame `BucketJob` takes: a BIGINT column with NULLs becomes an
    exact nullable Int64 column (PySpark would make it float64: 2^53 + 1 would become 2^53), every
    other column what PySpark's mapInPandas gives for these plain types (`arrow_ready`)."""
    import pyarrow as pa

    columns = {}
    for name, column in zip(table.column_names, table.columns):
        if pa.types.is_int64(column.type) and column.null_count:
            columns[name] = pd.arrays.IntegerArray(np.asarray(column.fill_null(0)), np.asarray(column.is_null()))
        else:
            columns[name] = column.to_pandas()
    return pd.DataFrame(columns, index=pd.RangeIndex(table.num_rows))


def _arrow_stack(parts: list, schema):
    """The parts ((kind, frame) for panes, dropped rows, metrics; each frame with some of the
    schema's columns) one under the other as an Arrow table: each column chunked by part, a part's
    piece converted from its pandas column (pyarrow's pandas conversion: NaN and None are NULL,
    as in `pa.Table.from_pandas`) or NULLs where the part lacks it, the kind column a repeated
    string."""
    import pyarrow as pa

    columns = []
    for field in schema:
        pieces = []
        for kind, part in parts:
            if field.name == KIND:
                pieces.append(pa.repeat(kind, len(part)).cast(field.type))
            elif field.name in part:
                pieces.append(pa.Array.from_pandas(part[field.name], type=field.type))
            else:
                pieces.append(pa.nulls(len(part), field.type))
        columns.append(pa.chunked_array(pieces, type=field.type))
    return pa.Table.from_arrays(columns, schema=schema)


#: pandas dtypes of the output columns whose Spark type is BIGINT or BOOLEAN (`BucketJob.kinds`)
_TYPED = {"long": "Int64", "bool": "boolean"}


def _stack(parts: list, columns, kinds) -> pd.DataFrame:
    """The parts (panes, dropped rows, metrics; each with some of `columns`) one under the other.

    A column is stacked on its own, each part's piece (or NULLs where the part lacks it) cast to
    the column's nullable dtype first: a pandas concat would turn an integer column next to a part
    without it into float64 (2^53 + 1 becomes 2^53), and Arrow converts nullable integer and
    boolean arrays without a Python object per value. Object columns get None for missing values
    (Spark wants None for arrays and structs)."""
    sizes = [len(p) for p in parts]
    index = pd.RangeIndex(sum(sizes))
    out = {}
    for i, column in enumerate(columns):
        dtype = _TYPED.get(kinds[i]) if i < len(kinds) else None
        if dtype is None:  # a nullable extension column (Int64 aggregates) keeps its dtype
            present = [p[column].dtype for p in parts if column in p]
            if present and all(d == present[0] for d in present) and pd.api.types.is_extension_array_dtype(present[0]):
                dtype = present[0]
        pieces = []
        for part, size in zip(parts, sizes):
            if column in part:
                piece = part[column].reset_index(drop=True)
                pieces.append(piece.astype(dtype) if dtype is not None else piece)
            else:
                pieces.append(_nulls(size, dtype))
        series = pieces[0] if len(pieces) == 1 else pd.concat(pieces, ignore_index=True)
        if series.dtype == object and series.hasnans:
            series = series.where(series.notna(), None)
        out[column] = series.set_axis(index)
    return pd.DataFrame(out, index=index)


def _nulls(size: int, dtype) -> pd.Series:
    """`size` NULLs of `dtype` (None: object), without a Python object per value."""
    if dtype is None:
        return pd.Series(np.empty(size, dtype=object))  # an empty object array holds None
    dtype = pd.api.types.pandas_dtype(dtype)
    if isinstance(dtype, pd.core.dtypes.dtypes.BaseMaskedDtype):  # Int64, boolean, Float64
        return pd.Series(dtype.construct_array_type()(np.zeros(size, dtype.numpy_dtype), np.ones(size, bool)))
    return pd.Series(np.full(size, np.nan)).astype(dtype)


def restore_nulls(rows: pd.DataFrame, columns) -> pd.DataFrame:
    """Rebuild each BIGINT column of `columns` from its value (0 for NULL) and its NULL mask
    column (dropped) as an exact nullable Int64 column."""
    for column in columns:
        mask = NULL_MASK + column
        if column in rows and mask in rows:
            values = rows[column].to_numpy(dtype=np.int64, na_value=0)
            rows[column] = pd.arrays.IntegerArray(values, rows.pop(mask).to_numpy(dtype=bool, na_value=True))
    return rows


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
    ident = keys + ["window_start", "window_end"]
    frame = panes[ident + ["pane_index"]].copy()
    frame["_row"] = np.arange(n)
    latest = frame.groupby(ident, dropna=False, sort=False)["pane_index"].transform("max")
    final = np.ones(n, bool)
    final[frame["_row"].to_numpy()[frame["pane_index"].to_numpy() < latest.to_numpy()]] = False
    return final


def _coerce(values: pd.Series, kind: str, scale: int) -> pd.Series:
    """An engine result column as the Spark type of the aggregate."""
    if kind == "int":
        if values.dtype == object:
            return pd.Series(pd.array([None if _missing(v) else int(v) for v in values], dtype="Int64"))
        return values.astype("Int64")
    if kind == "float":
        if values.dtype == object:
            return pd.Series(pd.array([None if _missing(v) else float(v) for v in values], dtype="Float64"))
        return values.astype("Float64")
    if kind == "decimal":
        quantum = decimal.Decimal(1).scaleb(-scale)
        return pd.Series([None if _missing(v) else decimal.Decimal(v).quantize(quantum, rounding=decimal.ROUND_HALF_UP)
                          for v in values], dtype=object)
    return values


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)
