"""Grouping keys over batches of rows: ids numbered in key order, and keys as tuples that hash the
same whichever batch and pandas dtype they came in (the engine's runner)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import values


def factorize_keys(rows: pd.DataFrame, keys: list[str]):
    """Key id per row, numbered in key order, and a row index per key id (`values.key_ids`).

    >>> codes, first = factorize_keys(pd.DataFrame({"k": pd.Series([None, 1, 0, 1], dtype=object)}), ["k"])
    >>> codes.tolist(), first.tolist()
    ([2, 1, 0, 1], [2, 1, 0])
    """
    codes = values.key_ids(rows, keys)
    first = np.full(codes.max() + 1 if len(codes) else 0, -1, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return codes, first


def key_tuples(rows: pd.DataFrame, keys: list[str]) -> list[tuple]:
    """The key of each row as a tuple, every NULL (None, NaN, pd.NA, NaT) as None, so that a key
    hashes and compares the same whichever batch, and whichever pandas dtype, it came in."""
    if not keys:
        return [()] * len(rows)
    cols = []
    for k in keys:
        col = rows[k].to_numpy(dtype=object)
        null = pd.isna(rows[k]).to_numpy()
        if null.any():
            col = col.copy()
            col[null] = None
        cols.append(col)
    return list(zip(*cols))


def key_columns(key_tuples: list[tuple], keys: list[str], rows: pd.DataFrame) -> pd.DataFrame:
    """Key columns from key tuples, typed as the batch's key columns where the values allow it
    (an integer key with a NULL stays integer, not float as pandas would infer)."""
    cols = {}
    for i, k in enumerate(keys):
        col = pd.Series([t[i] for t in key_tuples], dtype=object)
        typed, dtype = None, rows[k].dtype
        if dtype != np.dtype(object):
            try:
                typed = col.astype(dtype)
                if not typed.astype(object).where(typed.notna(), None).equals(col):
                    typed = None  # the values do not fit the batch's type (keys of earlier batches)
            except (TypeError, ValueError, OverflowError):
                typed = None
        cols[k] = typed if typed is not None else (col if col.isna().any() else col.infer_objects())
    return pd.DataFrame(cols, index=pd.RangeIndex(len(key_tuples)))


def sortable_key(key: tuple) -> tuple:
    """A key tuple as a sort key: NULLs (None) last, in every position.

    >>> sorted([(None,), (2,), (1,)], key=sortable_key)
    [(1,), (2,), (None,)]
    """
    return tuple((v is None, v) for v in key)
