"""The value fields of accumulators (`aggregates.py`): how a column's values become one, and back.

A batch's column arrives as pandas holds it: numpy numbers, masked numbers (Int64, Float64: a
FLOAT or DOUBLE column holds NaN apart from NULL), Arrow-backed arrays (decimals, binary, nested
values) or Python objects. Spark's semantics decide what each becomes:

- SUM of integers is BIGINT, of decimals exact (`exact.py`), of floating point DOUBLE;
- MIN and MAX order FLOAT/DOUBLE with NaN above every number (a NaN makes MAX NaN; MIN is NaN
  only when every value is); other values are ordered by `values.ranks`, column-wise;
- sets (COUNT(DISTINCT), collect_set) hold values as Spark compares them: -0.0 is 0.0, every
  NaN the same NaN, a MAP equal to the same entries in any order.

>>> import numpy as np, pandas as pd
>>> x = pd.Series(pd.arrays.FloatingArray(np.array([1.0, np.nan, 5.0]), np.array([False, False, True])))
>>> minmax_values(x, x.isna().to_numpy(), "max").tolist(), minmax_values(x, x.isna().to_numpy(), "min").tolist()
([1.0, nan, -inf], [1.0, nan, nan])
>>> hashable(-0.0) == hashable(0.0), hashable(float("nan")) == hashable(float("nan"))
(True, True)
"""
from __future__ import annotations

import decimal
import math

import numpy as np
import pandas as pd

from ..errors import SqlflowUnsupportedError
from . import exact
from .values import as_arrow, python_values, ranks

#: the 32-bit limbs of a decimal sum (sqlflow.engine.exact)
DECIMAL_LIMBS = ("d0", "d1", "d2", "d3")
I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


def floats(values: np.ndarray, null: np.ndarray) -> pd.Series:
    """A nullable DOUBLE column: NULL where `null`, NaN where a value is NaN (pandas would make
    a NaN NULL when building "Float64" from numbers)."""
    return pd.Series(pd.arrays.FloatingArray(np.asarray(values, np.float64), np.asarray(null, bool)))


def concat(arrays: list):
    """Accumulator fields of several tables one after the other: numpy arrays, or pandas
    extension arrays of one dtype (Arrow-backed values), else Python objects."""
    if all(isinstance(a, np.ndarray) for a in arrays):
        return np.concatenate(arrays)
    first = arrays[0]
    if all(isinstance(a, pd.api.extensions.ExtensionArray) and a.dtype == first.dtype for a in arrays):
        return type(first)._concat_same_type(arrays)
    return np.concatenate([python_values(a) for a in arrays])


# ---------------------------------------------------------------------- sums


def is_decimal(x: pd.Series, null: np.ndarray) -> bool:
    """A column of decimals: Arrow decimals, or Python Decimal objects."""
    if isinstance(x.dtype, pd.ArrowDtype):
        import pyarrow as pa

        return pa.types.is_decimal(x.dtype.pyarrow_dtype)
    if x.dtype != object or null.all():
        return False
    return pd.api.types.infer_dtype(x.to_numpy(dtype=object)[~null], skipna=False) == "decimal"


def decimal_input(x: pd.Series, null: np.ndarray) -> tuple[np.ndarray, int]:
    """The unscaled values of a decimal column as (n, 4) limbs (`exact.decimal_limbs`), and its
    scale. Python Decimals (Spark's decimals through pandas, all of the column's scale) go
    through Arrow, which reads them in C++."""
    import pyarrow as pa

    arr = as_arrow(x) if isinstance(x.dtype, pd.ArrowDtype) else None
    if arr is None or not pa.types.is_decimal(arr.type):
        objects = x.to_numpy(dtype=object, na_value=None)
        scale = pa.array(objects, from_pandas=True).type.scale  # the largest scale of the values
        arr = pa.array(objects, type=pa.decimal128(38, scale), from_pandas=True)
    elif not pa.types.is_decimal128(arr.type):
        arr = arr.cast(pa.decimal128(38, arr.type.scale))
    return exact.decimal_limbs(arr), arr.type.scale


def decimal_sums(acc: dict):
    """The Arrow decimal128(38, s) sums of a decimal accumulator; NULL without values or past 38
    digits (the overflow `Aggregate.overflow` reports)."""
    words, fits = exact.decimal_total(np.stack([acc[f] for f in DECIMAL_LIMBS], axis=1))
    scale = int(acc["scale"].max()) if len(acc["scale"]) else 0
    return exact.decimal_array(words, fits & (acc["cnt"] > 0), max(scale, 0))


def same_scale(parts: list[dict]) -> list[dict]:
    """Decimal sum tables at one scale, the largest (Spark gives every value of a column the
    column's scale; Python Decimals of other origins may differ from batch to batch)."""
    scales = [int(p["scale"].max()) for p in parts if len(p["scale"])]
    target = max(scales, default=-1)
    out = []
    for p in parts:
        short = (p["scale"] >= 0) & (p["scale"] < target)
        if short.any():
            limbs = np.stack([p[f] for f in DECIMAL_LIMBS], axis=1)
            limbs = exact.decimal_rescaled(limbs, np.where(short, target - p["scale"], 0))
            p = {**p, **{f: limbs[:, i] for i, f in enumerate(DECIMAL_LIMBS)},
                 "scale": np.where(p["scale"] >= 0, target, -1)}
        out.append(p)
    return out


def no_decimal(part: dict) -> dict:
    """A sum accumulator without values (a batch of NULLs, typed as pandas pleased) as an empty
    decimal accumulator."""
    if part["cnt"].any():
        raise SqlflowUnsupportedError("cannot sum decimals with other numbers", clause="SELECT")
    n = len(part["cnt"])
    zero = np.zeros(n, np.int64)
    return {"d0": zero, "d1": zero, "d2": zero, "d3": zero, "scale": np.full(n, -1, np.int64), "cnt": part["cnt"]}


def upper_bits(parts: list[dict]) -> list[dict]:
    """Integer sum tables, all with an `hb` field (`exact.py`) when one has it: from `s >> 32`
    where a table has none (its sums are exact: floor(T / 2^32) is then within its bounds);
    floating-point sums have none."""
    wanted = any("hb" in p for p in parts)
    out = []
    for p in parts:
        if p["s"].dtype == np.int64:
            if wanted and "hb" not in p:
                p = {**p, "hb": p["s"] >> 32}
        elif "hb" in p:
            p = {f: a for f, a in p.items() if f != "hb"}
        out.append(p)
    return out


def sum_values(x: pd.Series, null: np.ndarray, as_float: bool) -> np.ndarray:
    """The per-row sum field: Decimal objects for decimals (AVG), int64 for integers (Spark's
    bigint, NULLs or not, however pandas holds them), float64 otherwise (NaN kept). A column with
    no value holds no type: its rows are int64 zeros, the identity that merges with any of them."""
    n = len(x)
    if null.all():
        return np.zeros(n, np.int64)
    dtype = x.dtype
    kind = dtype.kind
    if kind == "O":  # Python objects (or an Arrow type numpy has no kind for, such as decimal)
        vals = x.to_numpy(dtype=object)
        present = vals[~null]
        inferred = pd.api.types.infer_dtype(present, skipna=False)
        if inferred == "decimal":
            zeroed = vals.copy()
            zeroed[null] = decimal.Decimal(0)
            return zeroed
        if inferred in ("integer", "boolean"):
            out = np.zeros(n, np.int64)
            out[~null] = present.astype(np.int64)
            return out.astype(np.float64) if as_float else out
        numbers = pd.to_numeric(pd.Series(present), errors="raise").to_numpy()
        if numbers.dtype == object:
            raise SqlflowUnsupportedError(f"cannot sum values of type {inferred}", clause="SELECT")
        out = np.zeros(n, numbers.dtype)
        out[~null] = numbers
        return out.astype(np.float64) if (as_float or kind == "f") else out
    if as_float or kind == "f":
        return x.to_numpy(dtype=np.float64, na_value=0.0)
    if kind in "iu":
        return x.to_numpy(dtype=np.int64, na_value=0)
    if kind == "b":
        return x.to_numpy(dtype=bool, na_value=False).astype(np.int64)
    raise SqlflowUnsupportedError(f"cannot sum values of type {dtype}", clause="SELECT")


def unify(parts: list[dict], field: str, kind: str) -> list[dict]:
    """`parts` with `field` of one type (see Aggregate.concat)."""
    typed = {p[field].dtype for p in parts if p["cnt"].any()} or {p[field].dtype for p in parts}
    if len(typed) == 1:
        target = typed.pop()
    elif any(not isinstance(d, np.dtype) or d == np.dtype(object) for d in typed) or len({d.kind == "M" for d in typed}) > 1:
        target = np.dtype(object)
    else:
        target = np.result_type(*typed)
    identity = 0 if kind in ("sum", "avg") else minmax_identity(target, kind)
    out = []
    for p in parts:
        v = p[field]
        if v.dtype != target:
            has = p["cnt"] > 0
            if isinstance(target, np.dtype):
                w = np.full(len(v), identity, dtype=target)
                w[has] = np.asarray(v[has], dtype=object if target.kind == "O" else None).astype(target)
            else:  # Arrow-backed values: rows without a value become NULLs of that type
                w = pd.array([None] * len(v), dtype=target)
                if has.any():
                    w[np.flatnonzero(has)] = pd.array(v[has], dtype=target)
            p = {**p, field: w}
        out.append(p)
    return out


# ---------------------------------------------------------------------- min and max


def minmax_values(x: pd.Series, null: np.ndarray, kind: str):
    """The per-row value field of MIN or MAX: numbers as numpy (a NULL as the identity: NaN for
    MIN, whose np.fmin skips it, -inf for MAX, whose np.maximum keeps a real NaN), times as
    datetime64, booleans as bool; anything else as ordered by rank (`by_rank`): Arrow-backed
    arrays as they are, Python objects with None for NULL."""
    dtype = x.dtype
    if dtype.kind == "f":
        return x.to_numpy(dtype=np.float64, na_value=np.nan if kind == "min" else -np.inf)
    if dtype.kind in "iu":
        fill = I64_MAX if kind == "min" else I64_MIN
        return x.to_numpy(dtype=np.int64, na_value=fill) if null.any() else x.to_numpy(dtype=np.int64)
    if dtype.kind == "M" and not isinstance(dtype, pd.ArrowDtype):
        return x.to_numpy()  # np.fmin/fmax skip NaT
    if dtype.kind == "b":
        return x.to_numpy(dtype=bool, na_value=kind == "min")
    if isinstance(x.array, pd.arrays.ArrowExtensionArray):
        return x.array.copy()
    vals = x.to_numpy(dtype=object).copy()
    vals[null] = None
    return vals


def by_rank(v) -> bool:
    """Whether MIN/MAX values are picked by `values.ranks` rather than a numpy ufunc."""
    return isinstance(v, pd.api.extensions.ExtensionArray) or v.dtype == object


def minmax_ufunc(dtype, kind: str):
    if kind == "min":
        return np.fmin
    return np.fmax if dtype.kind == "M" else np.maximum  # NaT is NULL; NaN is the largest number


def minmax_identity(dtype, kind: str):
    if dtype.kind == "f":
        return np.nan if kind == "min" else -np.inf
    if dtype.kind in "iu":
        return I64_MAX if kind == "min" else I64_MIN
    if dtype.kind == "M":
        return np.datetime64("NaT")
    if dtype.kind == "b":
        return kind == "min"
    return None


def pick_by_rank(v, grouping, n_groups: int, kind: str, reduce):
    """Per group, the value of smallest (MIN) or largest (MAX) rank: one ranking of all rows,
    one reduction per group; NULL for a group without values."""
    r = ranks(v)
    score = r if kind == "max" else np.where(r < 0, -1, int(r.max(initial=0)) + 1 - r)
    best = reduce(score, grouping, n_groups, np.maximum, -1)
    group = grouping.group
    hit = np.flatnonzero((score >= 0) & (score == best[group]))
    idx = np.full(n_groups, -1, np.int64)
    idx[group[hit]] = hit
    if isinstance(v, pd.api.extensions.ExtensionArray):
        return v.take(idx, allow_fill=True)
    out = np.full(n_groups, None, dtype=object)
    out[idx >= 0] = v[idx[idx >= 0]]
    return out


# ---------------------------------------------------------------------- sets


class _NaN:
    """Every NaN in a set (NaN != NaN would keep each one apart)."""

    def __eq__(self, other):
        return isinstance(other, _NaN)

    def __hash__(self):
        return 0x7FF8

    def __repr__(self):
        return "NaN"


_NAN = _NaN()


def hashable(v):
    """A value as sets hold it, compared as Spark compares it: a struct (dict) as the tuple of
    its fields, an array as a tuple, a MAP (a list of (key, value) pairs, as Arrow gives it) as
    the frozenset of its entries, -0.0 as 0.0 and every NaN alike."""
    if isinstance(v, float):
        return _NAN if math.isnan(v) else v + 0.0
    if isinstance(v, np.floating):
        return hashable(float(v))
    if isinstance(v, list):
        if v and all(isinstance(e, tuple) and len(e) == 2 for e in v):
            return frozenset((hashable(k), hashable(x)) for k, x in v)
        return tuple(hashable(x) for x in v)
    if isinstance(v, (np.ndarray, tuple)):
        return tuple(hashable(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v))
    if isinstance(v, dict):
        return tuple(hashable(x) for x in v.values())
    if v is pd.NA:
        return None
    return v


def sorted_list(s) -> list:
    """A set's values as a list (NaN back as a number, maps as lists of entries)."""
    values = [_back(v) for v in s]
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


def _back(v):
    if isinstance(v, _NaN):
        return math.nan
    if isinstance(v, frozenset):
        return sorted((_back(k), _back(x)) for k, x in v)
    if isinstance(v, tuple):
        return tuple(_back(x) for x in v)
    return v
