"""Aggregates as combiners over column batches: create, merge, extract (docs/semantics.md, 7).

An accumulator table is a dict of equal-length arrays, one row per partial aggregate. `create`
turns input rows into one-row accumulators, `merge` combines rows by group id, `extract` gives
Spark's result for each row. Everything is vectorised over many groups at once; only the
object-valued aggregates (sets, lists) touch Python objects.

>>> import numpy as np, pandas as pd
>>> agg = Aggregate("sum", "x", "total")
>>> acc = agg.create(pd.DataFrame({"x": pd.array([5, 7, None, 3], dtype="Int64")}), order_et=np.zeros(4, np.int64), order_seq=np.arange(4))
>>> merged = agg.merge(acc, np.array([0, 0, 1, 1]), 2)
>>> agg.extract(merged).tolist()
[12, 3]
>>> agg.extract(agg.merge(acc, np.array([0, 1, 1, 0]), 2)).tolist()
[8, 7]
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import SqlflowUnsupportedError
from . import exact, fields, kernels
from .values import as_arrow, python_values

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min

#: aggregate function names (Spark spellings) -> canonical kind
KINDS = {
    "count_star": "count_star",
    "count": "count",
    "sum": "sum",
    "avg": "avg",
    "mean": "avg",
    "min": "min",
    "max": "max",
    "count_distinct": "count_distinct",
    "first": "first",
    "first_value": "first",
    "last": "last",
    "last_value": "last",
    "collect_list": "collect_list",
    "array_agg": "collect_list",
    "collect_set": "collect_set",
    "stddev": "stddev_samp",
    "std": "stddev_samp",
    "stddev_samp": "stddev_samp",
    "stddev_pop": "stddev_pop",
    "variance": "var_samp",
    "var_samp": "var_samp",
    "var_pop": "var_pop",
}

#: suffix of the column telling, per pane, whether a SUM overflowed its Spark type (`overflow_column`)
OVERFLOW_SUFFIX = "__overflow"


def overflow_column(output: str) -> str:
    """The output column of `Aggregate.overflow` for the aggregate output `output`."""
    return output + OVERFLOW_SUFFIX


#: kinds whose downstream application of a retraction is a subtraction (docs/pipelines.md)
INVERTIBLE = {"count_star", "count", "sum", "avg"}


class Grouping:
    """Rows ordered by group id, computed once (when first needed) and shared by every field of
    every aggregate. Large sums and counts scatter without it (`_reduce`)."""

    def __init__(self, group: np.ndarray):
        self.group = np.asarray(group, dtype=np.int64)
        self._sorted: tuple | None = None

    def _sort(self) -> tuple:
        if self._sorted is None:
            if len(self.group) and np.all(self.group[1:] >= self.group[:-1]):
                order, g = None, self.group  # already sorted
            else:
                order = np.argsort(self.group, kind="stable")
                g = self.group[order]
            starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.empty(0, np.int64)
            self._sorted = (order, starts, g[starts] if len(g) else np.empty(0, np.int64))
        return self._sorted

    @property
    def order(self):
        return self._sort()[0]

    @property
    def starts(self) -> np.ndarray:
        return self._sort()[1]

    @property
    def present(self) -> np.ndarray:
        return self._sort()[2]

    def sorted(self, values: np.ndarray) -> np.ndarray:
        order = self.order
        return values if order is None else values[order]


def _grouping(group) -> Grouping:
    return group if isinstance(group, Grouping) else Grouping(group)


def _reduce(values: np.ndarray, group, n_groups: int, ufunc, fill):
    """ufunc-reduce `values` per group id into an array of n_groups (missing groups get `fill`).
    Large int64 and float64 sums take one compiled scatter instead of a sort by group (a float
    sum then adds in row order, where reduceat may add pairwise: the last bits can differ)."""
    out = np.full(n_groups, fill, dtype=values.dtype)
    if len(values) == 0:
        return out
    gr = _grouping(group)
    if (ufunc is np.add and fill == 0 and values.dtype in (np.int64, np.float64)
            and len(values) >= kernels.COMPILED_MIN_ROWS):
        return kernels.scatter_add(gr.group, values, out)
    out[gr.present] = ufunc.reduceat(gr.sorted(values), gr.starts)
    return out


def _is_null(series: pd.Series) -> np.ndarray:
    return series.isna().to_numpy()


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call: `kind` over input column `column` (None for count(*)), named `output`."""

    kind: str
    column: str | None
    output: str
    ignore_nulls: bool = False

    def __post_init__(self):
        if self.kind not in KINDS.values():
            raise SqlflowUnsupportedError(
                f"aggregate {self.kind}() is not supported by the sqlflow engine; supported: "
                + ", ".join(sorted(set(KINDS))),
                clause="SELECT",
            )

    @property
    def may_overflow(self) -> bool:
        """Whether the result can overflow its type (SUM: BIGINT, DECIMAL): `overflow` says where."""
        return self.kind == "sum"

    # ------------------------------------------------------------------ create

    def create(self, rows: pd.DataFrame, order_et: np.ndarray, order_seq: np.ndarray) -> dict:
        """One accumulator per input row. `order_et`/`order_seq` order rows for first/last/collect_list."""
        k = self.kind
        n = len(rows)
        if k == "count_star":
            return {"cnt": np.ones(n, np.int64)}
        x = rows[self.column]
        null = _is_null(x)
        cnt = (~null).astype(np.int64)
        if k == "count":
            return {"cnt": cnt}
        if k == "sum" and fields.is_decimal(x, null):
            limbs, scale = fields.decimal_input(x, null)
            return {**{f: limbs[:, i] for i, f in enumerate(DECIMAL_LIMBS)}, "scale": np.full(n, scale, np.int64),
                    "cnt": cnt}
        if k in ("sum", "avg"):
            s = fields.sum_values(x, null, k == "avg")
            if k == "sum" and s.dtype == np.int64 and not exact.bigint_sums_fit(s):
                return {"s": s, "hb": s >> 32, "cnt": cnt}
            return {"s": s, "cnt": cnt}
        if k in ("min", "max"):
            return {"v": fields.minmax_values(x, null, k), "cnt": cnt}
        if k in ("count_distinct", "collect_set"):
            vals = python_values(x)
            sets = np.empty(n, dtype=object)
            for i in range(n):
                sets[i] = frozenset() if null[i] else frozenset((fields.hashable(vals[i]),))
            return {"set": sets}
        if k == "collect_list":
            vals = python_values(x)
            items = np.empty(n, dtype=object)
            for i in range(n):
                items[i] = () if null[i] else ((int(order_et[i]), int(order_seq[i]), vals[i]),)
            return {"items": items}
        if k in ("first", "last"):
            usable = ~null if self.ignore_nulls else np.ones(n, bool)
            return {
                "et": np.where(usable, order_et, I64_MAX if k == "first" else I64_MIN).astype(np.int64),
                "seq": np.where(usable, order_seq, I64_MAX if k == "first" else I64_MIN).astype(np.int64),
                "v": python_values(x),  # a NaN stays a number where it is one
                "has": usable.astype(np.int64),
            }
        # variance family: (n, mean, m2), and the range of the values (lo, hi) that tells when
        # their differences leave DOUBLE (_merge_moments)
        v = pd.to_numeric(x, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        return {"n": cnt.astype(np.float64), "mean": np.where(null, 0.0, v), "m2": np.zeros(n),
                "lo": np.where(null, np.inf, v), "hi": np.where(null, -np.inf, v)}

    # ------------------------------------------------------------------ concat

    def concat(self, parts: list[dict]) -> dict:
        """Accumulator tables of several batches as one (for `merge`).

        The value field of sum, avg, min and max takes its type from the batch's column, and
        pandas infers that per batch: a column with no value in a batch is of no particular type,
        an integer column with NULLs may come as float. Rows that hold no value (cnt == 0) carry
        no type, so they become the identity of the type the other rows agree on; rows with
        values of different types meet in their common type (object when one is object)."""
        if self.kind == "sum" and any("d0" in p for p in parts):
            parts = fields.same_scale([p if "d0" in p else fields.no_decimal(p) for p in parts])
        else:
            field = _VALUE_FIELD.get(self.kind)
            if field is not None and len({p[field].dtype for p in parts}) > 1:
                parts = fields.unify(parts, field, self.kind)
            if self.kind == "sum":
                parts = fields.upper_bits(parts)
        return {f: fields.concat([p[f] for p in parts]) for f in parts[0]}

    # ------------------------------------------------------------------ merge

    def merge(self, acc: dict, group, n_groups: int) -> dict:
        """Combine accumulator rows with the same group id (an array, or a shared Grouping);
        returns n_groups rows."""
        k = self.kind
        grouping = _grouping(group)
        group = grouping.group
        if k in ("count_star", "count"):
            return {"cnt": _reduce(acc["cnt"], grouping, n_groups, np.add, 0)}
        if "d0" in acc:  # decimal sum: limbs add up, every row has the column's scale
            limbs = {f: _reduce(acc[f], grouping, n_groups, np.add, 0) for f in DECIMAL_LIMBS}
            limbs["scale"] = _reduce(acc["scale"], grouping, n_groups, np.maximum, -1)
            limbs["cnt"] = _reduce(acc["cnt"], grouping, n_groups, np.add, 0)
            return limbs
        if k in ("sum", "avg"):
            s = acc["s"]
            if s.dtype == object:  # AVG of Python Decimals: exact (Spark's decimals have 38 digits)
                out = np.empty(n_groups, dtype=object)
                out[:] = 0
                with decimal.localcontext() as exactly:
                    exactly.prec = 100
                    for g, val in zip(group.tolist(), s.tolist()):
                        out[g] = out[g] + val
            else:
                out = _reduce(s, grouping, n_groups, np.add, 0)
            merged = {"s": out, "cnt": _reduce(acc["cnt"], grouping, n_groups, np.add, 0)}
            hb = acc.get("hb")
            if hb is None and k == "sum" and s.dtype == np.int64 and not exact.bigint_sums_fit(s):
                hb = s >> 32  # exact totals until now: their upper bits tell the new ones
            if hb is not None:
                merged["hb"] = _reduce(hb, grouping, n_groups, np.add, 0)
            return merged
        if k in ("min", "max"):
            v = acc["v"]
            if fields.by_rank(v):
                out = fields.pick_by_rank(v, grouping, n_groups, k, _reduce)
            else:
                out = _reduce(v, grouping, n_groups, fields.minmax_ufunc(v.dtype, k), fields.minmax_identity(v.dtype, k))
            return {"v": out, "cnt": _reduce(acc["cnt"], grouping, n_groups, np.add, 0)}
        if k in ("count_distinct", "collect_set"):
            out = np.empty(n_groups, dtype=object)
            out[:] = [frozenset()] * n_groups
            buckets: dict[int, list] = {}
            for g, s in zip(group.tolist(), acc["set"].tolist()):
                if s:
                    buckets.setdefault(g, []).append(s)
            for g, parts in buckets.items():
                out[g] = parts[0] if len(parts) == 1 else frozenset().union(*parts)
            return {"set": out}
        if k == "collect_list":
            out = np.empty(n_groups, dtype=object)
            out[:] = [()] * n_groups
            buckets = {}
            for g, items in zip(group.tolist(), acc["items"].tolist()):
                if items:
                    buckets.setdefault(g, []).append(items)
            for g, parts in buckets.items():
                out[g] = parts[0] if len(parts) == 1 else tuple(i for p in parts for i in p)
            return {"items": out}
        if k in ("first", "last"):
            n = len(group)
            if n == 0:
                return _empty_first_last(n_groups, k)
            # pick, per group, the row with the smallest (first) / largest (last) (et, seq)
            sign = 1 if k == "first" else -1
            order = np.lexsort((sign * _clip(acc["seq"]), sign * _clip(acc["et"]), group))
            g = group[order]
            take = order[np.r_[True, g[1:] != g[:-1]]]
            picked = _empty_first_last(n_groups, k)
            gs = group[take]
            picked["et"][gs] = acc["et"][take]
            picked["seq"][gs] = acc["seq"][take]
            picked["v"][gs] = acc["v"][take]
            picked["has"][gs] = _reduce(acc["has"], grouping, n_groups, np.add, 0)[gs]
            return picked
        return _merge_moments(acc, grouping, n_groups)

    # ------------------------------------------------------------------ extract

    def extract(self, acc: dict) -> pd.Series:
        """Spark's value of each accumulator row (nullable dtypes where Spark gives NULL; a
        floating-point result keeps NaN apart from NULL). An overflowed SUM gives its wrapped
        BIGINT (Spark's non-ANSI result) or a NULL decimal: `overflow` tells which rows."""
        k = self.kind
        if k in ("count_star", "count"):
            return pd.Series(acc["cnt"].astype(np.int64))
        if k == "count_distinct":
            return pd.Series(np.fromiter((len(s) for s in acc["set"]), np.int64, len(acc["set"])))
        if k == "collect_set":
            return pd.Series([fields.sorted_list(s) for s in acc["set"]], dtype=object)
        if k == "collect_list":
            return pd.Series([[v for _, _, v in sorted(items, key=lambda i: (i[0], i[1]))]
                              for items in acc["items"]], dtype=object)
        if k in ("first", "last"):
            vals = acc["v"].copy()
            vals[acc["has"] == 0] = None
            return pd.Series(vals, dtype=object)
        if "d0" in acc:
            return pd.Series(pd.arrays.ArrowExtensionArray(fields.decimal_sums(acc)))
        if k in ("sum", "avg", "min", "max"):
            cnt = acc["cnt"]
            if k == "avg":
                s = acc["s"]
                if s.dtype == object:
                    return pd.Series(_decimal_averages(s, cnt), dtype=object)
                out = np.divide(s.astype(np.float64), cnt, out=np.zeros(len(cnt)), where=cnt > 0)
                return fields.floats(out, cnt == 0)
            v = acc["s"] if k == "sum" else acc["v"]
            if isinstance(v, pd.arrays.ArrowExtensionArray):  # NULL where no value, by Arrow (pandas's
                import pyarrow as pa  # mask converts nested values to Python and fails on them)

                rows = pa.array(np.arange(len(v)), mask=np.asarray(cnt == 0))
                return pd.Series(pd.arrays.ArrowExtensionArray(as_arrow(v).take(rows)))
            if isinstance(v, pd.api.extensions.ExtensionArray):
                return pd.Series(v).mask(cnt == 0)
            if v.dtype == object:
                out = v.copy()
                out[cnt == 0] = None
                return pd.Series(out, dtype=object)
            if v.dtype.kind in "iu":
                return pd.Series(pd.arrays.IntegerArray(v.astype(np.int64), cnt == 0))
            if v.dtype.kind == "M":
                return pd.Series(v).mask(cnt == 0)
            if v.dtype.kind == "b":
                return pd.Series(pd.array(v, dtype="boolean")).mask(cnt == 0)
            return fields.floats(v, cnt == 0)
        # variance family
        n, m2 = acc["n"], acc["m2"]
        if k in ("var_samp", "stddev_samp"):
            ok = n >= 2
            var = np.divide(m2, n - 1, out=np.zeros(len(n)), where=ok)
        else:
            ok = n >= 1
            var = np.divide(m2, n, out=np.zeros(len(n)), where=ok)
        val = np.sqrt(var) if k.startswith("stddev") else var
        return fields.floats(val, ~ok)

    def overflow(self, acc: dict) -> np.ndarray | None:
        """Per accumulator row, whether the SUM overflowed its Spark type (BIGINT, or the 38
        digits of a DECIMAL); None for aggregates that cannot overflow."""
        if not self.may_overflow:
            return None
        has = acc["cnt"] > 0
        if "d0" in acc:
            return has & ~exact.decimal_total(np.stack([acc[f] for f in DECIMAL_LIMBS], axis=1))[1]
        if "hb" in acc:
            return has & exact.bigint_overflow(acc["s"], acc["hb"])
        return np.zeros(len(has), bool)


# ---------------------------------------------------------------------- helpers


def _decimal_averages(sums: np.ndarray, counts: np.ndarray) -> list:
    """AVG of a DECIMAL(p, s) column from its exact sums (Python Decimals of the column's scale s)
    as Spark's Average computes it: DECIMAL(p + 4, s + 4), at most 38 decimals, rounded half up
    (`exact.decimal_quotients`); None without values. (Its precision is Spark's to check.)"""
    present = counts > 0
    exponents = [v.as_tuple().exponent for v in sums[present] if isinstance(v, decimal.Decimal) and v.is_finite()]
    scale = max([0] + [-int(e) for e in exponents])
    target = min(scale + 4, 38)
    unscaled = np.array([int(v.scaleb(scale, decimal.Context(prec=100))) if c else 0
                         for v, c in zip(sums.tolist(), present.tolist())], dtype=object)
    q = exact.decimal_quotients(unscaled, np.where(present, counts, 1), scale, target)
    return [None if not c else decimal.Decimal((int(v < 0), tuple(map(int, str(abs(v)))), -target))
            for v, c in zip(q.tolist(), present.tolist())]

#: the field whose type follows the input column, per kind
_VALUE_FIELD = {"sum": "s", "avg": "s", "min": "v", "max": "v"}
DECIMAL_LIMBS = fields.DECIMAL_LIMBS

_ADD, _FMIN, _MAX = kernels.FOLD_ADD, kernels.FOLD_FMIN, kernels.FOLD_MAX
#: per kind, each accumulator field's merge when it is a ufunc of two rows (kernels.lineage_fold)
_FIELDWISE = {"count_star": {"cnt": _ADD}, "count": {"cnt": _ADD},
              "sum": {"s": _ADD, "hb": _ADD, "cnt": _ADD, **{f: _ADD for f in DECIMAL_LIMBS}, "scale": _MAX},
              "avg": {"s": _ADD, "cnt": _ADD}, "min": {"v": _FMIN, "cnt": _ADD}, "max": {"v": _MAX, "cnt": _ADD}}


def fieldwise_merges(agg: "Aggregate", acc: dict) -> dict | None:
    """{field: kernels.FOLD_ADD | FOLD_FMIN | FOLD_MAX} when `agg` merges every field of `acc` by
    that ufunc of two rows and the fields are int64 or float64 arrays (no objects, dates or
    booleans), else None."""
    ops = _FIELDWISE.get(agg.kind)
    if ops is None or any(f not in ops or not isinstance(a, np.ndarray) or a.dtype not in (np.int64, np.float64)
                          for f, a in acc.items()):
        return None
    return {f: ops[f] for f in acc}


def _merge_moments(acc: dict, grouping: Grouping, n_groups: int) -> dict:
    """(n, mean, m2) of the variance family merged per group, without overflow or cancellation:
    every group is shifted by the mean of one of its rows, so equal values give exactly 0 (two
    DOUBLEs of 1e308 have no spread, and their sum is never formed) and a large common offset
    costs no precision. Rows without values (n = 0) take no part.

    A group whose values lie further apart than the largest DOUBLE (1e308 and -1e308) has a NaN
    m2, whatever the order of its rows: no DOUBLE holds their difference, and Spark's moments
    turn NaN when they form it (docs/semantics.md 7.1). Its values' range (lo, hi) tells."""
    group = grouping.group
    n_row, mean_row, m2_row = acc["n"], acc["mean"], acc["m2"]
    has = n_row > 0
    shift = np.zeros(n_groups)
    shift[group[has]] = mean_row[has]
    n = _reduce(n_row, grouping, n_groups, np.add, 0.0)
    safe_n = np.where(n > 0, n, 1.0)
    weight = np.where(has, n_row / safe_n[group], 0.0)
    lo = _reduce(acc.get("lo", np.where(has, mean_row, np.inf)), grouping, n_groups, np.minimum, np.inf)
    hi = _reduce(acc.get("hi", np.where(has, mean_row, -np.inf)), grouping, n_groups, np.maximum, -np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        wide = np.isfinite(hi) & np.isfinite(lo) & np.isinf(hi - lo)
        offset = np.where(has & ~wide[group], mean_row - shift[group], 0.0)
        mean = shift + _reduce(weight * offset, grouping, n_groups, np.add, 0.0)
        dev = np.where(has, mean_row - mean[group], 0.0)
        m2 = _reduce(np.where(has, m2_row + n_row * dev * dev, 0.0), grouping, n_groups, np.add, 0.0)
    m2[wide] = np.nan
    return {"n": n, "mean": np.where(n > 0, mean, 0.0), "m2": m2, "lo": lo, "hi": hi}


def _clip(a: np.ndarray) -> np.ndarray:
    # keep negation of I64_MIN from overflowing in lexsort keys
    return np.clip(a, I64_MIN + 1, I64_MAX)


def _empty_first_last(n_groups: int, kind: str) -> dict:
    sentinel = I64_MAX if kind == "first" else I64_MIN
    return {
        "et": np.full(n_groups, sentinel, np.int64),
        "seq": np.full(n_groups, sentinel, np.int64),
        "v": np.full(n_groups, None, dtype=object),
        "has": np.zeros(n_groups, np.int64),
    }
