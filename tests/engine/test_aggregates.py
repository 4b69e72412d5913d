"""Aggregates as combiners, with Spark's semantics for NULLs and types."""
import decimal
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow.engine.aggregates import Aggregate
from sqlflow.errors import SqlflowUnsupportedError
from tests.conftest import examples


def run(kind, values, groups=None, *, et=None, seq=None, ignore_nulls=False, dtype=None):
    """Aggregate `values` per group (default: one group) in one shot."""
    values = pd.Series(values, dtype=dtype) if dtype else pd.Series(values)
    n = len(values)
    groups = np.zeros(n, np.int64) if groups is None else np.asarray(groups)
    agg = Aggregate(kind, None if kind == "count_star" else "x", "out", ignore_nulls)
    acc = agg.create(pd.DataFrame({"x": values}), np.arange(n) if et is None else np.asarray(et),
                     np.zeros(n, np.int64) if seq is None else np.asarray(seq))
    return agg.extract(agg.merge(acc, groups, int(groups.max()) + 1 if n else 1)).tolist()


def test_counts():
    assert run("count_star", [1, None, 3]) == [3]
    assert run("count", [1, None, 3]) == [2]
    assert run("count", [None, None]) == [0]


def test_sum_is_null_without_non_null_input_and_keeps_integer_type():
    assert run("sum", [5, None, 7], dtype="Int64") == [12]
    assert run("sum", [None, None], dtype="Int64") == [pd.NA]
    assert run("sum", [1.5, None, 2.0]) == [3.5]
    assert run("sum", [decimal.Decimal("1.10"), None, decimal.Decimal("2.25")]) == [decimal.Decimal("3.35")]


def test_sum_of_a_string_is_a_clear_error():
    with pytest.raises(ValueError):
        run("sum", ["a", "b"])


def test_avg():
    assert run("avg", [1, None, 4], dtype="Int64") == [2.5]
    assert run("avg", [None], dtype="Int64") == [pd.NA]


def test_min_max_skip_nulls_for_every_type():
    assert run("min", [3, None, 1], dtype="Int64") == [1]
    assert run("max", [3, None, 1], dtype="Int64") == [3]
    assert run("max", [None], dtype="Int64") == [pd.NA]
    assert run("min", [2.5, None, -1.0]) == [-1.0]
    assert run("max", ["pear", None, "apple"]) == ["pear"]
    assert run("min", ["pear", None, "apple"]) == ["apple"]
    ts = pd.to_datetime(["2024-01-02", None, "2024-01-01"])
    assert run("min", ts) == [pd.Timestamp("2024-01-01")]
    assert run("max", [True, None, False], dtype="boolean") == [True]


def test_count_distinct_and_collect_set_ignore_nulls():
    assert run("count_distinct", [1, 2, None, 2, 1]) == [2]
    assert run("collect_set", ["b", None, "a", "b"]) == [["a", "b"]]


def test_collect_list_is_in_event_time_order_without_nulls():
    assert run("collect_list", ["c", None, "a", "b"], et=[30, 5, 10, 20]) == [["a", "b", "c"]]


def test_first_and_last_by_event_time_then_arrival():
    values = ["late", "early", None, "mid"]
    et = [30, 10, 5, 20]
    assert run("first", values, et=et) == [None]  # the NULL at t=5 comes first
    assert run("first", values, et=et, ignore_nulls=True) == ["early"]
    assert run("last", values, et=et) == ["late"]
    assert run("first", ["b", "a"], et=[10, 10], seq=[2, 1]) == ["a"]  # tie on event time: arrival


def test_variance_family():
    assert run("var_samp", [1.0, 2.0, 3.0, 4.0]) == pytest.approx([1.6666666666666667])
    assert run("var_pop", [1.0, 2.0, 3.0, 4.0]) == pytest.approx([1.25])
    assert run("stddev_samp", [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx([2.138089935299395])
    assert run("stddev_pop", [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx([2.0])
    assert run("stddev_samp", [1.0]) == [pd.NA]  # Spark: NULL for one row
    assert run("var_pop", [3.0, None]) == [0.0]


def test_groups_that_get_no_rows_are_empty():
    assert run("sum", [1, 2], groups=[2, 2], dtype="Int64") == [pd.NA, pd.NA, 3]
    assert run("count_star", [1, 2], groups=[0, 2]) == [1, 0, 1]


def test_unknown_aggregate_is_a_sqlflow_error():
    with pytest.raises(SqlflowUnsupportedError, match="percentile_approx"):
        Aggregate("percentile_approx", "x", "p")


KINDS = ["count_star", "count", "sum", "avg", "min", "max", "count_distinct", "collect_list",
         "collect_set", "first", "last", "var_samp", "stddev_pop"]


@settings(max_examples=examples(200))
@given(st.sampled_from(KINDS), st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=25),
       st.integers(0, 2**32 - 1))
def test_merging_partial_accumulators_in_any_grouping_equals_one_shot(kind, values, seed):
    """Combiners are associative: aggregate in random chunks, merge the chunks, same result."""
    rng = np.random.default_rng(seed)
    n = len(values)
    x = pd.Series(values, dtype="Float64" if kind in ("var_samp", "stddev_pop", "avg") else "Int64")
    agg = Aggregate(kind, None if kind == "count_star" else "x", "out")
    et = rng.permutation(n).astype(np.int64)
    acc = agg.create(pd.DataFrame({"x": x}), et, np.zeros(n, np.int64))
    whole = agg.extract(agg.merge(acc, np.zeros(n, np.int64), 1)).tolist()
    chunks = rng.integers(0, 4, n)
    partial = agg.merge(acc, chunks, 4)
    merged = agg.extract(agg.merge(partial, np.zeros(4, np.int64), 1)).tolist()
    a, b = whole[0], merged[0]
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    elif isinstance(a, list) and kind == "collect_set":
        assert sorted(a) == sorted(b)
    elif a is pd.NA or b is pd.NA or a is None or b is None:
        assert (a is pd.NA or a is None) and (b is pd.NA or b is None)
    else:
        assert a == b
