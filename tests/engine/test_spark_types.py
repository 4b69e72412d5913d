"""The engine follows Spark's type semantics (docs/semantics.md, 7.1), checked against independent
Python references: exact BIGINT and DECIMAL sums with their overflow, the variance family on
adversarial data, FLOAT/DOUBLE NaN apart from NULL, and Spark's order and equality of nested
values (`values.ranks`) for MIN, MAX and GROUP BY keys."""
from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate, overflow_column
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.values import key_ids, ranks
from tests.conftest import examples

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
D = decimal.Decimal


def merged(kind, values, batches=1, dtype=None):
    """`kind` over `values` created in `batches` parts (as micro-batches do) and merged in one group."""
    agg = Aggregate(kind, "x", "out")
    parts = np.array_split(np.arange(len(values)), batches)
    accs = []
    for idx in parts:
        column = pd.Series([values[i] for i in idx], dtype=dtype if dtype else None)
        accs.append(agg.create(pd.DataFrame({"x": column}), np.arange(len(idx)), np.zeros(len(idx), np.int64)))
    acc = agg.merge(agg.concat(accs), np.zeros(len(values), np.int64), 1)
    overflow = agg.overflow(acc)
    return agg.extract(acc).tolist()[0], None if overflow is None else bool(overflow[0])


# ---------------------------------------------------------------------- BIGINT sums


def _wrapped(total: int) -> int:
    return (total + 2**63) % 2**64 - 2**63


@settings(max_examples=examples(200))
@given(st.lists(st.one_of(st.integers(I64_MIN, I64_MAX), st.sampled_from([I64_MAX, I64_MIN, -1, 1])),
                min_size=1, max_size=12), st.integers(1, 4))
def test_a_bigint_sum_wraps_and_says_when_it_overflowed(values, batches):
    total = sum(values)
    got, overflow = merged("sum", values, min(batches, len(values)), dtype="Int64")
    assert got == _wrapped(total)
    assert overflow == (not I64_MIN <= total <= I64_MAX)


def test_two_largest_bigints_overflow_and_smaller_sums_do_not():
    assert merged("sum", [I64_MAX, I64_MAX], dtype="Int64") == (-2, True)
    assert merged("sum", [I64_MAX, I64_MIN, I64_MAX], dtype="Int64") == (I64_MAX - 1, False)
    assert merged("sum", [None, None], dtype="Int64") == (pd.NA, False)


@pytest.mark.parametrize("mode", list(ast.AccumulationMode))
def test_an_overflow_column_follows_every_pane(mode):
    """Accumulating panes add their lineage's totals: the overflow of a total shows on the pane
    that reaches it (the compiled lineage fold and the merges agree)."""
    plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Global()), ast.Repeat(ast.Count(1)), None, ast.Emit(mode)),
                      (Aggregate("sum", "x", "s"),), keys=("k",))
    rows = pd.DataFrame({"k": ["a"] * 3, EVENT_TIME: [1, 2, 3], "x": pd.array([I64_MAX, 1, -5], dtype="Int64")})
    panes = Engine(plan).run(rows).panes
    panes = panes[~panes.get("is_retraction", pd.Series(False, index=panes.index))]
    got = panes[["s", overflow_column("s")]].values.tolist()
    if mode.accumulating:
        assert got == [[I64_MAX, False], [I64_MIN, True], [I64_MAX - 4, False]]
    else:
        assert got == [[I64_MAX, False], [1, False], [-5, False]]


# ---------------------------------------------------------------------- DECIMAL sums


@settings(max_examples=examples(200))
@given(st.integers(0, 38).flatmap(lambda s: st.tuples(st.just(s), st.lists(
    st.one_of(st.none(), st.integers(-(10**38) + 1, 10**38 - 1), st.integers(-999, 999)), min_size=1, max_size=8))),
    st.integers(1, 3))
def test_a_decimal_sum_is_exact_to_38_digits(scale_values, batches):
    scale, units = scale_values
    with decimal.localcontext() as c:
        c.prec = 80
        values = [None if u is None else D(u).scaleb(-scale) for u in units]
    column = pa.array(values, pa.decimal128(38, scale))
    agg = Aggregate("sum", "x", "out")
    accs = [agg.create(pd.DataFrame({"x": pd.arrays.ArrowExtensionArray(column[i:j])}), np.zeros(j - i, np.int64),
                       np.zeros(j - i, np.int64))
            for i, j in _cuts(len(values), batches)]
    acc = agg.merge(agg.concat(accs), np.zeros(len(values), np.int64), 1)
    total = sum(u for u in units if u is not None)
    fits = abs(total) < 10**38
    got = agg.extract(acc).tolist()[0]
    assert bool(agg.overflow(acc)[0]) == (not fits and any(u is not None for u in units))
    if all(u is None for u in units) or not fits:
        assert got is None or pd.isna(got)
    else:
        with decimal.localcontext() as c:
            c.prec = 80
            assert got == D(total).scaleb(-scale)


def _cuts(n, parts):
    bounds = np.linspace(0, n, min(parts, n) + 1).astype(int)
    return list(zip(bounds[:-1], bounds[1:]))


def test_decimals_near_1e20_add_up_or_overflow():
    near = D("99999999999999999999.999999999999999999")
    got, overflow = merged("sum", [near, near])
    assert overflow and got is pd.NA
    got, overflow = merged("sum", [near, near.copy_negate(), D("1E-18")])
    assert (got, overflow) == (D("1E-18"), False)
    assert merged("max", [near, D(1)]) == (near, None)


# ---------------------------------------------------------------------- variance family


def _exact_moments(xs):
    n = len(xs)
    mean = sum(map(Fraction, xs)) / n
    m2 = sum((Fraction(x) - mean) ** 2 for x in xs)
    return n, m2


@pytest.mark.parametrize("values", [
    [1e308, 1e308], [1e308, 1e308, 1e308], [-1e308, -1e308], [0.1, 0.1, 0.1], [1e9 + 1, 1e9 + 2, 1e9 + 3],
    [1e15 + 0.5, 1e15 + 1.5], [5.0], [2.5, None, 2.5], [1e-300, 3e-300], [1e154, -1e154, 3.0],
], ids=["two 1e308", "three 1e308", "two -1e308", "constant 0.1", "offset 1e9", "offset 1e15", "one row",
        "constant with NULL", "tiny", "huge spread"])
@pytest.mark.parametrize("kind", ["var_samp", "var_pop", "stddev_samp", "stddev_pop"])
@pytest.mark.parametrize("batches", [1, 2])
def test_the_variance_family_is_stable(values, kind, batches):
    xs = [x for x in values if x is not None]
    n, m2 = _exact_moments(xs)
    divisor = n - 1 if kind.endswith("samp") else n
    got, _ = merged(kind, values, min(batches, len(values)))
    if divisor == 0:
        assert got is pd.NA
        return
    exact = m2 / divisor
    expected = math.sqrt(exact) if kind.startswith("stddev") else float(exact)
    if exact == 0:
        assert got == 0.0  # constants have no spread: exactly 0, as in Spark
    elif m2 > Fraction(1.7976931348623157e308):
        assert math.isinf(got)  # the sum of squares is a DOUBLE, in Spark too: past the largest, inf
    else:
        assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("values", [[1e308, -1e308], [1e308, 0.0, -1e308], [-1e308, 5.0, 1e308, 1e308]])
@pytest.mark.parametrize("batches", [1, 2, 3])
def test_values_further_apart_than_the_largest_double_have_a_nan_variance(values, batches):
    # no DOUBLE holds their difference: NaN in any order, as Spark's moments when they form it
    for kind in ("var_samp", "var_pop", "stddev_samp", "stddev_pop"):
        agg = Aggregate(kind, "x", "out")
        for order in (values, values[::-1]):
            partials = []  # each batch merged into one row first, as panes and micro-batches are
            for idx in np.array_split(np.arange(len(order)), min(batches, len(order))):
                acc = agg.create(pd.DataFrame({"x": [order[i] for i in idx]}), np.arange(len(idx)),
                                 np.zeros(len(idx), np.int64))
                partials.append(agg.merge(acc, np.zeros(len(idx), np.int64), 1))
            acc = agg.merge(agg.concat(partials), np.zeros(len(partials), np.int64), 1)
            assert math.isnan(agg.extract(acc).tolist()[0]), (kind, order, batches)


def test_the_variance_of_infinities_and_nan_is_nan():
    assert math.isnan(merged("stddev_samp", [math.inf, 1.0])[0])
    assert math.isnan(merged("var_pop", [math.inf, math.inf])[0])
    agg = Aggregate("var_pop", "x", "out")
    acc = agg.create(pd.DataFrame({"x": _floats(1.0, math.nan, None)}), np.arange(3), np.zeros(3, np.int64))
    assert math.isnan(agg.extract(agg.merge(acc, np.zeros(3, np.int64), 1)).tolist()[0])


# ---------------------------------------------------------------------- NaN is a value


def _floats(*values):
    """A DOUBLE column as the engine path hands it over: None is NULL, NaN a number."""
    mask = np.array([v is None for v in values])
    return pd.arrays.FloatingArray(np.array([0.0 if v is None else v for v in values]), mask)


@pytest.mark.parametrize("kind, expected", [
    ("count", 4), ("max", "nan"), ("min", -1.0), ("sum", "nan"), ("count_distinct", 3),
])
def test_nan_is_a_value_not_null(kind, expected):
    column = _floats(1.0, math.nan, None, -1.0, math.nan)
    agg = Aggregate(kind, "x", "out")
    acc = agg.create(pd.DataFrame({"x": column}), np.arange(5), np.zeros(5, np.int64))
    got = agg.extract(agg.merge(acc, np.zeros(5, np.int64), 1)).tolist()[0]
    if expected == "nan":
        assert isinstance(got, float) and math.isnan(got)
    else:
        assert got == expected


def test_min_is_nan_only_when_every_value_is():
    for values, expected in [((math.nan, None), "nan"), ((math.nan, 2.0), 2.0), ((None, None), None)]:
        agg = Aggregate("min", "x", "out")
        acc = agg.create(pd.DataFrame({"x": _floats(*values)}), np.arange(2), np.zeros(2, np.int64))
        got = agg.extract(agg.merge(acc, np.zeros(2, np.int64), 1)).tolist()[0]
        assert (math.isnan(got) if expected == "nan" else (got is pd.NA if expected is None else got == expected))


def test_distinct_doubles_as_spark_compares_them():
    column = _floats(0.0, -0.0, math.nan, -math.nan, None, 1.5)
    agg = Aggregate("collect_set", "x", "out")
    acc = agg.create(pd.DataFrame({"x": column}), np.arange(6), np.zeros(6, np.int64))
    got = agg.extract(agg.merge(acc, np.zeros(6, np.int64), 1)).tolist()[0]
    assert len(got) == 3 and 0.0 in got and 1.5 in got and sum(math.isnan(v) for v in got) == 1


# ---------------------------------------------------------------------- order and equality of nested values


def _spark_cmp(a, b) -> int:
    """Spark's comparison of two non-NULL values (ArrayType / StructType interpretedOrdering): NULL
    elements and fields first, element by element, a shorter prefix first; floats with NaN the
    largest and -0.0 equal to 0.0."""
    if isinstance(a, dict):
        for x, y in zip(a.values(), b.values()):
            c = _null_first(x, y)
            if c:
                return c
        return 0
    if isinstance(a, list):
        for x, y in zip(a, b):
            c = _null_first(x, y)
            if c:
                return c
        return (len(a) > len(b)) - (len(a) < len(b))
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) - math.isnan(b)
    return (a > b) - (a < b)


def _null_first(x, y) -> int:
    if x is None or y is None:
        return (x is not None) - (y is not None)
    return _spark_cmp(x, y)


_scalars = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, -2.0, math.nan, math.inf]))
_lists = st.lists(_scalars, max_size=3)
_structs = st.builds(lambda a, b: {"a": a, "b": b}, st.one_of(st.none(), st.integers(-2, 2)), st.one_of(st.none(), _lists))


@settings(max_examples=examples(200))
@given(st.one_of(st.lists(st.one_of(st.none(), _lists), min_size=1, max_size=8),
                 st.lists(st.one_of(st.none(), _structs), min_size=1, max_size=8)))
def test_ranks_are_sparks_order(values):
    r = ranks(pa.array(values))
    for i, a in enumerate(values):
        assert (r[i] < 0) == (a is None)
        for j, b in enumerate(values):
            if a is not None and b is not None:
                assert np.sign(r[i] - r[j]) == _spark_cmp(a, b), (a, b)
    present = sorted({int(x) for x in r if x >= 0})
    assert present == list(range(len(present)))  # dense


def test_maps_are_equal_whatever_the_order_of_their_entries():
    maps = pa.array([[(1, 2.0), (3, 4.0)], [(3, 4.0), (1, 2.0)], [(1, 2.0)], None, [(1, -0.0)], [(1, 0.0)]],
                    pa.map_(pa.int32(), pa.float64()))
    r = ranks(maps)
    assert r[0] == r[1] and r[2] != r[0] and r[3] == -1 and r[4] == r[5]


def test_nested_keys_group_as_spark_groups_them():
    keys = pd.Series(pd.arrays.ArrowExtensionArray(pa.array(
        [{"a": 1, "b": [1.0, -0.0]}, None, {"a": 1, "b": [1.0, 0.0]}, {"a": None, "b": None}, None])))
    ids = key_ids(pd.DataFrame({"k": keys}), ["k"])
    assert ids[0] == ids[2] and ids[1] == ids[4] and len(set(ids.tolist())) == 3
    assert ids[1] == ids.max()  # a NULL key comes last


@functools.lru_cache
def _engine(kind):
    return Engine(EnginePlan(ast.Windowing(ast.WindowClause(ast.Global())), (Aggregate(kind, "x", "out"),),
                             keys=("k",)))


@pytest.mark.parametrize("kind, expected", [("min", [None]), ("max", [1, 2])])
def test_min_and_max_of_arrays_per_key(kind, expected):
    rows = pd.DataFrame({
        "k": ["a", "a", "a", "b"], EVENT_TIME: [1, 2, 3, 4],
        "x": pd.arrays.ArrowExtensionArray(pa.array([[1, None], [None], [1, 2], None]))})
    panes = _engine(kind).run(rows).panes.sort_values("k")
    assert panes["out"].tolist()[0] == expected
    assert pd.isna(panes["out"].tolist()[1])


BIG = 2**53 + 1  # the first integer a DOUBLE cannot hold


@pytest.mark.parametrize("kind", ["collect_list", "collect_set", "first", "last", "max", "min"])
def test_nested_values_keep_every_digit_of_their_bigints(kind):
    # pandas converts a struct's fields as columns: a BIGINT field beside a NULL became a float
    t = pa.list_(pa.struct([("a", pa.int64()), ("b", pa.float64())]))
    values = [[None, {"a": BIG, "b": None}], [{"a": None, "b": 1.0}, {"a": -BIG, "b": None}]]  # each has one
    rows = pd.DataFrame({"k": ["a", "a"], EVENT_TIME: [1, 2], "x": pd.arrays.ArrowExtensionArray(pa.array(values, t))})
    out = _engine(kind).run(rows).panes["out"].tolist()[0]
    got = [v for v in (out if kind.startswith("collect") else [out])]
    held = [e["a"] if isinstance(e, dict) else e[0] for v in got for e in v if e is not None]
    assert {abs(a) for a in held if a is not None} == {BIG} and all(type(a) is int for a in held if a is not None), got


def test_replayed_rows_combine_per_key_as_spark_groups_keys():
    # the replay's combining numbered keys by pandas: a STRUCT key failed, NaN met NULL
    from sqlflow.engine.arrival_combine import combine
    from sqlflow.columns import ARRIVAL_TIME
    from sqlflow.engine.watermarks import bounded_delay

    keys = {"struct": pd.arrays.ArrowExtensionArray(pa.array([{"a": 1}, {"a": 1}, None, None])),
            "double": pd.arrays.FloatingArray(np.array([math.nan, math.nan, 0.0, 0.0]),
                                              np.array([False, False, True, True]))}
    for name, k in keys.items():
        rows = pd.DataFrame({"k": k, "v": [1, 2, 3, 4], EVENT_TIME: [100, 101, 100, 101], ARRIVAL_TIME: [101] * 4})
        tl = bounded_delay(rows[ARRIVAL_TIME], rows[EVENT_TIME], 50)
        out = combine(rows, keys=("k",), gap=60, period=60, timeline=tl, parts=(("s", "sum", "v"),), weight="w")
        assert sorted(np.asarray(out["s"], dtype=object)[np.asarray(out["w"]) > 0].tolist()) == [3, 7], name
