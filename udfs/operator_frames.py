"""The streaming operator's output and input frames (udfs/streaming.py): every output column in
order, one frame per call, state schemas built without the JVM, and exact NULLs of packed columns.

Runs on Spark's Python workers; imports pandas and numpy only (pyspark's types inside
`struct_type`, which only the stateful worker calls).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sqlflow.columns import NULL_MASK


def complete(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The frame with every output column, in order; missing ones all NULL (object None converts
    to any Arrow type, a float NaN column does not)."""
    n = len(frame)
    return pd.DataFrame({c: (frame[c] if c in frame else pd.Series([None] * n, dtype=object, index=frame.index))
                         for c in columns})


def one_frame(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """A call's output frames (panes, dropped rows, metrics) as one frame with every output
    column, in order: one Arrow conversion per call instead of one per frame. A column is typed
    as its frames give it (a number or boolean as its nullable pandas type, so an int64 stays
    exact beside the rows that lack it), NULL where a frame lacks it; all NULL (object None) where
    none has it.

    >>> panes = pd.DataFrame({"kind": np.array([1, 1], np.int32), "k": np.array([2**53 + 1, 5]),
    ...                       "t": ["ON_TIME", "LATE"]})
    >>> metrics = pd.DataFrame({"kind": np.array([3], np.int32), "n": [7]})
    >>> out = one_frame([panes, metrics], ["kind", "k", "t", "n", "x"])
    >>> out.to_dict("list")
    {'kind': [1, 1, 3], 'k': [9007199254740993, 5, None], 't': ['ON_TIME', 'LATE', None], 'n': [None, None, 7], 'x': [None, None, None]}
    >>> [str(out[c].dtype) for c in out]
    ['Int32', 'Int64', 'object', 'Int64', 'object']

    A NaN result stays a number, apart from the NULLs (a masked float, as the engine gives it):

    >>> sums = pd.DataFrame({"s": pd.arrays.FloatingArray(np.array([np.nan, 1.0]), np.array([False, True]))})
    >>> one_frame([sums, metrics], ["s"])["s"].isna().tolist()
    [False, True, True]
    """
    if len(frames) == 1:
        return complete(frames[0], columns)
    sizes = [len(f) for f in frames]
    out = {}
    for c in columns:
        parts = [f[c] if c in f else None for f in frames]
        first = next((p for p in parts if p is not None), None)
        if first is None:
            out[c] = np.full(sum(sizes), None, dtype=object)
        elif first.dtype.kind in "iubf" and not isinstance(first.dtype, pd.CategoricalDtype):
            out[c] = _masked(parts, sizes, first.dtype)
        elif first.dtype == object:
            out[c] = np.concatenate([np.full(k, None, dtype=object) if p is None else p.to_numpy(dtype=object)
                                     for p, k in zip(parts, sizes)])
        else:  # any other type (times, categories, ...): pandas' own concatenation
            dtype = first.dtype
            out[c] = pd.concat([p.reset_index(drop=True) if p is not None else
                                pd.Series(pd.array([None] * k, dtype=dtype), dtype=dtype)
                                for p, k in zip(parts, sizes)], ignore_index=True)
    return pd.DataFrame(out)


def arrow_output(frames: list, schema):
    """A call's output frames (or dicts of columns) as one Arrow table of `schema`, each one's
    columns converted straight to Arrow (pyarrow's conversion of a pandas column, as
    `Table.from_pandas` does it), a column a frame lacks all NULL: `one_frame` then
    `Table.from_pandas` without the concatenated pandas frame between them. A column pyarrow
    cannot convert on its own (say a categorical one) takes that way.

    >>> import pyarrow as pa
    >>> panes = pd.DataFrame({"kind": np.array([1, 1], np.int32), "k": np.array([2**53 + 1, 5]),
    ...                       "s": pd.arrays.FloatingArray(np.array([np.nan, 1.0]), np.array([False, True]))})
    >>> metrics = pd.DataFrame({"kind": np.array([3], np.int32), "n": [7]})
    >>> schema = pa.schema([("kind", pa.int32()), ("k", pa.int64()), ("s", pa.float64()), ("n", pa.int64())])
    >>> out = arrow_output([panes, metrics], schema)
    >>> out.to_pydict()
    {'kind': [1, 1, 3], 'k': [9007199254740993, 5, None], 's': [nan, None, None], 'n': [None, None, 7]}
    >>> slow = pa.Table.from_pandas(one_frame([panes, metrics], schema.names), schema=schema, preserve_index=False)
    >>> out.drop_columns(["s"]).equals(slow.drop_columns(["s"])), str(out["s"].to_pylist()) == str(slow["s"].to_pylist())
    (True, True)
    """
    import pyarrow as pa

    def size(f) -> int:
        return len(f) if isinstance(f, pd.DataFrame) else len(next(iter(f.values())))

    try:
        tables = [pa.Table.from_arrays([pa.array(f[field.name], type=field.type, from_pandas=True)
                                        if field.name in f else pa.nulls(size(f), field.type) for field in schema],
                                       schema=schema) for f in frames]
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        frames = [f if isinstance(f, pd.DataFrame) else
                  pd.DataFrame({k: (v.reset_index(drop=True) if isinstance(v, pd.Series) else v) for k, v in f.items()})
                  for f in frames]
        return pa.Table.from_pandas(one_frame(frames, schema.names), schema=schema, preserve_index=False)
    return pa.concat_tables(tables) if len(tables) != 1 else tables[0]


def _masked(parts: list, sizes: list[int], dtype):
    """Numbers or booleans of `parts` (None: NULL for that many rows) as one masked pandas array:
    values and NULL mask concatenated in numpy (a float's NaN stays apart from NULL where its
    part is a masked array; in a plain float64 part it is NULL, as PySpark's conversion reads it)."""
    base = np.dtype(getattr(dtype, "numpy_dtype", dtype))
    values = np.concatenate([np.zeros(k, base) if p is None else
                             p.to_numpy(dtype=base, na_value=np.nan if base.kind == "f" else 0)
                             for p, k in zip(parts, sizes)])
    mask = np.concatenate([np.ones(k, bool) if p is None else np.asarray(p.isna(), dtype=bool)
                           for p, k in zip(parts, sizes)])
    if base.kind == "b":
        return pd.arrays.BooleanArray(values, mask)
    if base.kind == "f":
        return pd.arrays.FloatingArray(values, mask)
    return pd.arrays.IntegerArray(values, mask)


def struct_type(ddl: str):
    """A flat DDL schema ("name type, ...") of a state variable as pyspark's StructType, built
    here: a DDL string would be parsed by the JVM, a round trip (twice per state, every task).

    >>> struct_type("wm long, finished boolean, blob binary").simpleString()
    'struct<wm:bigint,finished:boolean,blob:binary>'
    """
    from pyspark.sql.types import BinaryType, BooleanType, LongType, StringType, StructField, StructType

    kinds = {"long": LongType, "boolean": BooleanType, "string": StringType, "binary": BinaryType}
    fields = [field.split() for field in ddl.split(",")]
    return StructType([StructField(name, kinds[kind](), True) for name, kind in fields])


def restore_nulls(rows: pd.DataFrame, columns) -> pd.DataFrame:
    """Rebuild each column of `columns` from its value (0 for NULL) and its NULL mask column
    (dropped): an exact nullable Int64 column, or a masked float column whose NaN are numbers.

    >>> rows = pd.DataFrame({"x": [2.0**53 + 1, 0.0, float("nan")], NULL_MASK + "x": [False, True, False]})
    >>> restore_nulls(rows, ["x"])["x"].isna().tolist()
    [False, True, False]
    """
    for column in columns:
        mask = NULL_MASK + column
        if column in rows and mask in rows:
            null = rows.pop(mask).to_numpy(dtype=bool, na_value=True)
            if rows[column].dtype.kind == "f":  # a FLOAT or DOUBLE (a masked BIGINT has no NULL: int64)
                rows[column] = pd.arrays.FloatingArray(rows[column].to_numpy(dtype=np.float64), null)
            else:
                values = rows[column].to_numpy(dtype=np.int64, na_value=0)
                rows[column] = pd.arrays.IntegerArray(values, null)
    return rows
