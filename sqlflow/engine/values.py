"""Spark's equality and order of values, over whole columns: dense ranks.

The engine groups keys and picks MIN and MAX by value, for every type Spark can group or order:
numbers (FLOAT and DOUBLE as Spark orders them: -0.0 equals 0.0, NaN equals NaN and is above
every other number), strings (by their UTF-8 bytes), binary, booleans, decimals, dates, times,
ARRAY (element by element, a NULL element first, a shorter prefix first), STRUCT (field by field,
NULL first) and MAP (equality only: entries compared by key, whatever their order). `ranks`
gives each value its dense rank in that order (equal values, equal ranks; NULL -1), computed by
Arrow column by column, nested values from their children's ranks: never a Python loop per value.

>>> import pyarrow as pa
>>> ranks(pa.array([[1, None], [1], None, [1, 2], [None], [1]])).tolist()
[2, 1, -1, 3, 0, 1]
>>> ranks(pa.array([0.0, float("nan"), -0.0, None, float("-inf"), float("nan")])).tolist()
[1, 2, 1, -1, 0, 2]
>>> ranks(pa.array([{"a": 1, "b": "y"}, {"a": None, "b": "z"}, {"a": 1, "b": "x"}])).tolist()
[2, 0, 1]
>>> ranks(pa.array([[(3, 4), (1, 2)], [(1, 2), (3, 4)], [(1, 2)]], pa.map_(pa.int32(), pa.int32()))).tolist()
[1, 1, 0]
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def ranks(values) -> np.ndarray:
    """Dense ranks (0, 1, ...) of `values` in Spark's order, -1 for NULL (see the module doc).

    `values`: a pyarrow Array or ChunkedArray, a pandas Series or array (Arrow-backed, masked,
    numpy, or Python objects of one orderable kind: str, bytes, Decimal, date, datetime), or a
    numpy array. Python objects that pandas cannot order (dicts, lists) must come as Arrow."""
    arr = as_arrow(values)
    out = _ranks(arr) - 1
    return out


def as_arrow(values):
    """`values` as one pyarrow Array (NaN stays a number where the input tells it from NULL)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if isinstance(values, pa.Array):
        return values
    if isinstance(values, pd.Series):
        values = values.array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return as_arrow(values._pa_array)  # the Arrow data, without a copy
    if isinstance(values, pd.api.extensions.ExtensionArray):
        # masked numbers and booleans: pyarrow keeps NaN a number and takes NULLs from the mask
        return pa.array(values)
    values = np.asarray(values)
    if values.dtype == object:
        return pa.array(values, from_pandas=True)
    return pa.array(values)  # numpy numbers: NaN is a number


def python_values(values) -> np.ndarray:
    """A column (Series or extension array) as Python objects, None for NULL, exactly: nested
    Arrow values (ARRAY, STRUCT, MAP) by Arrow's own conversion, since pandas converts a struct's
    fields as pandas columns (a BIGINT field beside a NULL would become a float, its digits past
    2^53 lost).

    >>> import pyarrow as pa
    >>> t = pa.struct([("a", pa.int64())])
    >>> python_values(pd.Series(pd.arrays.ArrowExtensionArray(pa.array([{"a": 2**53 + 1}, {"a": None}], t)))).tolist()
    [{'a': 9007199254740993}, {'a': None}]
    """
    import pyarrow as pa

    array = values.array if isinstance(values, pd.Series) else values
    if isinstance(array, pd.arrays.ArrowExtensionArray) and pa.types.is_nested(array.dtype.pyarrow_dtype):
        return np.fromiter(as_arrow(array).to_pylist(), dtype=object, count=len(array))
    if isinstance(array, np.ndarray):
        return array.astype(object)
    return array.to_numpy(dtype=object, na_value=None)


def _normalised(arr):
    """A list-like Arrow array with offsets from 0 (a slice keeps its parent's offsets)."""
    import pyarrow as pa

    return pa.concat_arrays([arr]) if arr.offset else arr


def _ranks(arr) -> np.ndarray:
    """1-based dense ranks, 0 for NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(arr)
    t = arr.type
    valid = _valid(arr)
    if n == 0:
        return np.zeros(0, np.int64)
    if pa.types.is_null(t):
        return np.zeros(n, np.int64)
    if pa.types.is_dictionary(t):
        return _ranks(arr.cast(t.value_type))
    if pa.types.is_struct(t):
        children = [_ranks(child) for child in arr.flatten()]
        out = _combine(children, n) if children else np.ones(n, np.int64)
    elif pa.types.is_map(t):
        out = _map_ranks(_normalised(arr))
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        lists = _normalised(arr) if not pa.types.is_fixed_size_list(t) else arr
        lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        out = _sequence_ranks(_ranks(lists.flatten()), lengths)
    else:
        r = pc.rank(arr, sort_keys="ascending", tiebreaker="dense")
        return np.where(valid, r.to_numpy(zero_copy_only=False).astype(np.int64), 0)  # NULLs rank last
    if valid.all():
        return out
    # a NULL struct or list took some rank among the others: drop it, keep the ranks dense
    return np.unique(np.where(valid, out, 0), return_inverse=True)[1].reshape(-1).astype(np.int64)


def _valid(arr) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _combine(children: list[np.ndarray], n: int) -> np.ndarray:
    """1-based dense ranks of tuples, ordered by the first child, then the second, ..."""
    order = np.lexsort(children[::-1])
    stacked = np.stack([c[order] for c in children])
    new = np.r_[True, (stacked[:, 1:] != stacked[:, :-1]).any(axis=0)] if n else np.zeros(0, bool)
    out = np.empty(n, np.int64)
    out[order] = np.cumsum(new)
    return out


def _sequence_ranks(element: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """1-based dense ranks of sequences of element ranks (0 = NULL element), compared element by
    element, a prefix first: as big-endian bytes, which Arrow compares that way."""
    import pyarrow as pa
    import pyarrow.compute as pc

    width, dtype = (4, ">u4") if (len(element) == 0 or element.max() < 2**32) else (8, ">u8")
    offsets = np.r_[0, np.cumsum(lengths)] * width
    data = pa.py_buffer(element.astype(dtype).tobytes())
    binary = pa.Array.from_buffers(pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int64)), data])
    return pc.rank(binary, sort_keys="ascending", tiebreaker="dense").to_numpy(zero_copy_only=False).astype(np.int64)


def _map_ranks(maps) -> np.ndarray:
    """Ranks of maps by equality (Spark compares maps with their entries sorted by key): the
    entries of each map sorted by key rank, then ranked as sequences of (key, value) pairs."""
    keys, items = _ranks(maps.keys), _ranks(maps.items)
    n = len(maps)
    lengths = np.diff(maps.offsets.to_numpy(zero_copy_only=False).astype(np.int64))
    owner = np.repeat(np.arange(n), lengths)
    order = np.lexsort((items, keys, owner))
    entry = _combine([keys[order], items[order]], len(order)) if len(order) else np.zeros(0, np.int64)
    return _sequence_ranks(entry, lengths)


def key_ids(rows: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Dense ids of the rows' keys (the columns `keys`), numbered in key order (so output order does
    not depend on input order; NULL keys are a key of their own, as in GROUP BY, and come last).

    (pandas itself puts NULL first or last depending on the dtype, so NULLs are numbered here.)
    Keys of every type Spark groups by: Arrow-backed ones (decimals, binary, ARRAY, STRUCT, MAP)
    and Python values pandas cannot order or hash are numbered by `ranks`, Spark's equality.

    >>> key_ids(pd.DataFrame({"k": pd.Series([None, 1, 0, 1], dtype=object)}), ["k"]).tolist()
    [2, 1, 0, 1]
    >>> key_ids(pd.DataFrame({"k": pd.Series([{"a": 1}, None, {"a": 1}]), "j": [2, 2, 1]}), ["k", "j"]).tolist()
    [1, 2, 0]
    """
    per_column = [_key_codes(rows[k]) for k in keys]
    codes, size = per_column[0]
    for c, n in per_column[1:]:
        if size * n < (1 << 62):
            codes, size = codes * n + c, size * n
        else:  # too many combinations to number densely: rank the pairs
            pairs = np.stack([codes, c], axis=1)
            codes = np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1)
            size = int(codes.max()) + 1 if len(codes) else 1
    if len(per_column) > 1:  # dense ids, in the same order
        codes = pd.factorize(codes, sort=True)[0]
    return np.asarray(codes, np.int64)


def _key_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Codes of one key column in key order, NULL last, and how many codes there can be."""
    if not isinstance(column.dtype, pd.ArrowDtype):
        try:
            codes, uniques = pd.factorize(column, sort=True)
            return np.where(codes < 0, len(uniques), codes).astype(np.int64), len(uniques) + 1
        except TypeError:  # unhashable or unorderable Python values (dicts, arrays): as Arrow
            pass
    r = ranks(column)
    n = int(r.max(initial=-1)) + 1
    return np.where(r < 0, n, r), n + 1
