"""NULLs and value types through the engine: NULL keys, NULL predicates, and aggregate types that
must not depend on how pandas happened to type one micro-batch's column."""
import decimal

import numpy as np
import pandas as pd
import pytest

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, when_column
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF

D = ast.Duration
Dec = decimal.Decimal
MODES = list(ast.AccumulationMode)


def engine(aggs, *, window=None, trigger=None, mode=ast.AccumulationMode.ACCUMULATING, keys=("k",)):
    w = ast.Windowing(ast.WindowClause(window or ast.Fixed(D(10))), trigger, None, ast.Emit(mode))
    return Engine(EnginePlan(w, tuple(aggs), keys=keys))


def stream(e, batches, *, reference=False, concat=True):
    """Run frames through Engine.advance, one micro-batch each at p = 100, 200, ...; each batch is
    (frame, watermark after it). Returns the panes of every batch, concatenated (or a list)."""
    state, out, wm = None, [], NEG_INF
    for i, (rows, new_wm) in enumerate(batches):
        result, state = e.advance(state, rows, p=100 * (i + 1), wm_prev=wm, wm_new=new_wm, reference=reference)
        out.append(result.panes)
        wm = new_wm
    return pd.concat(out, ignore_index=True) if concat else out


# ---------------------------------------------------------------------- NULL keys


@pytest.mark.parametrize("reference", [False, True], ids=["vectorised step", "per-key loop"])
def test_null_keys_are_emitted_last_within_an_instant(reference):
    e = engine([Aggregate("count_star", None, "n")])
    rows = pd.DataFrame({"k": pd.Series(["b", None, "a", None], dtype=object), EVENT_TIME: [1, 2, 3, 12]})
    panes = stream(e, [(rows, 50)], reference=reference)
    assert panes[["k", "window_start", "n"]].values.tolist() == [
        ["a", 0, 1], ["b", 0, 1], [None, 0, 1], [None, 10, 1]]


@pytest.mark.parametrize("column", [
    pd.Series([None, "b", "a"], dtype=object),
    pd.Series([None, 1, 0], dtype=object),  # pandas sorts this NULL first
    pd.array([None, 1, 0], dtype="Int64"),
    pd.Series([np.nan, 1.0, 0.0]),
], ids=["strings", "objects", "Int64", "float"])
@pytest.mark.parametrize("reference", [False, True], ids=["engine", "per-key loop"])
def test_null_keys_are_emitted_last_in_a_bounded_run(column, reference):
    e = engine([Aggregate("count_star", None, "n")])
    rows = pd.DataFrame({"k": column, EVENT_TIME: [1, 2, 3]})
    keys = e.run(rows, reference=reference).panes["k"].tolist()
    assert [None if pd.isna(k) else k for k in keys] == list(column[1:][::-1]) + [None]


def test_null_keys_are_emitted_last_with_several_key_columns():
    e = engine([Aggregate("count_star", None, "n")], keys=("k", "j"))
    rows = pd.DataFrame({"k": pd.Series([None, 0, 1, 0, None], dtype=object),
                         "j": pd.Series(["x", None, "y", "a", "x"], dtype=object), EVENT_TIME: [1, 2, 3, 4, 5]})
    panes = e.run(rows).panes
    assert [tuple(None if pd.isna(v) else v for v in r) for r in panes[["k", "j", "n"]].values.tolist()] == [
        (0, "a", 1), (0, None, 1), (1, "y", 1), (None, "x", 2)]


@pytest.mark.parametrize("reference", [False, True], ids=["vectorised step", "per-key loop"])
def test_a_null_key_is_one_key_however_a_batch_holds_it(reference):
    """pd.NA (string or nullable columns), NaN and None are the same NULL key across micro-batches."""
    e = engine([Aggregate("count_star", None, "n")], mode=ast.AccumulationMode.ACCUMULATING)
    b1 = pd.DataFrame({"k": pd.array(["x", pd.NA], dtype="string"), EVENT_TIME: [1, 2]})
    b2 = pd.DataFrame({"k": pd.Series([None, "x"], dtype=object), EVENT_TIME: [3, 4]})
    b3 = pd.DataFrame({"k": pd.Series([np.nan], dtype=object), EVENT_TIME: [5]})
    panes = stream(e, [(b1, NEG_INF), (b2, NEG_INF), (b3, 10)], reference=reference)
    assert [(None if pd.isna(k) else k, n) for k, n in panes[["k", "n"]].values.tolist()] == [("x", 2), (None, 3)]


# ---------------------------------------------------------------------- WHEN over NULL predicates


@pytest.mark.parametrize("flags", [
    pd.array([None, True, False, None], dtype="boolean"),
    pd.Series([None, True, False, np.nan], dtype=object),
    pd.Series([np.nan, 1.0, 0.0, np.nan]),
], ids=["nullable boolean", "object", "float"])
@pytest.mark.parametrize("reference", [False, True], ids=["engine", "per-key loop"])
def test_when_treats_a_null_predicate_as_false(flags, reference):
    e = engine([Aggregate("count_star", None, "n")], trigger=ast.Repeat(ast.When(ast.SqlExpr("flag"))),
               mode=ast.AccumulationMode.DISCARDING)
    rows = pd.DataFrame({"k": ["a"] * 4, EVENT_TIME: [1, 2, 3, 4], ARRIVAL_TIME: [1, 2, 3, 4],
                         when_column(0): flags})
    panes = e.run(rows, timeline=Timeline.from_steps([], []), replay=True, reference=reference).panes
    assert panes[["emit_time", "n", "pane_timing"]].values.tolist() == [[2, 2, "EARLY"], [4, 2, "ON_TIME"]]


def test_when_with_a_null_predicate_in_a_micro_batch():
    e = engine([Aggregate("count_star", None, "n")], trigger=ast.Repeat(ast.When(ast.SqlExpr("flag"))),
               mode=ast.AccumulationMode.DISCARDING)
    b1 = pd.DataFrame({"k": ["a", "a"], EVENT_TIME: [1, 2], when_column(0): pd.array([None, None], dtype="boolean")})
    b2 = pd.DataFrame({"k": ["a"], EVENT_TIME: [3], when_column(0): pd.array([True], dtype="boolean")})
    panes = stream(e, [(b1, NEG_INF), (b2, NEG_INF)])
    assert panes[["emit_time", "n"]].values.tolist() == [[200, 3]]


# ---------------------------------------------------------------------- sums keep their type


def test_integer_sums_stay_integers_however_pandas_holds_the_column():
    """Spark's sum of an integer column is a bigint: exact, NULLs or not."""
    big = 2**60 + 1  # not a float
    for column in (pd.Series([big, None, 2], dtype=object), pd.Series([big, None, 2], dtype="int64[pyarrow]"),
                   pd.array([big, None, 2], dtype="Int64")):
        rows = pd.DataFrame({"k": ["a"] * 3, EVENT_TIME: [1, 2, 3], "v": column})
        panes = engine([Aggregate("sum", "v", "s")]).run(rows).panes
        assert panes["s"].tolist() == [big + 2]
        assert panes["s"].dtype == "Int64"


def test_decimal_sums_from_arrow_stay_decimal():
    import pyarrow as pa

    column = pd.Series([Dec("1.25"), None, Dec("2.50")], dtype=pd.ArrowDtype(pa.decimal128(10, 2)))
    rows = pd.DataFrame({"k": ["a"] * 3, EVENT_TIME: [1, 2, 3], "v": column})
    assert engine([Aggregate("sum", "v", "s")]).run(rows).panes["s"].tolist() == [Dec("3.75")]


def _dec_batches(values_per_batch, wm_last=50):
    """One frame per batch, typed as pandas types it by itself (a column of NULLs is object)."""
    out = []
    for i, values in enumerate(values_per_batch):
        out.append((pd.DataFrame({"k": ["a"] * len(values), EVENT_TIME: list(range(1, len(values) + 1)),
                                  "v": pd.Series(values, dtype=object)}),
                    wm_last if i == len(values_per_batch) - 1 else NEG_INF))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reference", [False, True], ids=["vectorised step", "per-key loop"])
@pytest.mark.parametrize("order", ["decimal first", "nulls first"])
def test_decimal_sum_over_micro_batches_with_an_all_null_batch(mode, reference, order):
    """A later (or earlier) batch whose decimal column is all NULL neither breaks nor retypes the sum."""
    e = engine([Aggregate("sum", "v", "s"), Aggregate("avg", "v", "m"), Aggregate("count", "v", "c")], mode=mode)
    batches = [[Dec("1.5"), Dec("2.25")], [None]]
    if order == "nulls first":
        batches.reverse()
    panes = stream(e, _dec_batches(batches), reference=reference)
    panes = panes[~panes.get("is_retraction", pd.Series(False, index=panes.index))]
    assert panes[["s", "m", "c"]].values.tolist() == [[Dec("3.75"), Dec("1.875"), 2]]
    assert isinstance(panes["s"].iloc[0], Dec) and isinstance(panes["m"].iloc[0], Dec)


@pytest.mark.parametrize("mode", MODES)
def test_decimal_panes_after_an_all_null_pane(mode):
    """COUNT(1): a pane per batch; the all-NULL batch's pane is NULL (discarding) or the decimal
    total so far (accumulating), and later panes stay decimal."""
    e = engine([Aggregate("sum", "v", "s")], trigger=ast.Repeat(ast.Count(1)), mode=mode)
    panes = stream(e, _dec_batches([[Dec("1.5")], [None], [Dec("0.25")]], wm_last=NEG_INF))
    if mode.retracting:
        panes = panes[~panes["is_retraction"]]
    got = [None if pd.isna(v) else v for v in panes["s"]]
    if mode.accumulating:
        assert got == [Dec("1.5"), Dec("1.5"), Dec("1.75")]
    else:
        assert got == [Dec("1.5"), None, Dec("0.25")]
    assert all(isinstance(v, Dec) for v in got if v is not None)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("trigger,reference", [(None, False), (None, True), (ast.Repeat(ast.Count(1)), False)],
                         ids=["default, vectorised step", "default, per-key loop", "count"])
def test_stored_totals_with_nulls_are_not_cast_into_integers(mode, trigger, reference):
    """An integer column that pandas typed float64 (all NULL) in one batch and Int64 in the next:
    the stored NaN of max() is no value, not an integer, and the results stay integers."""
    aggs = [Aggregate("max", "v", "top"), Aggregate("min", "v", "low"), Aggregate("sum", "v", "s")]
    e = engine(aggs, trigger=trigger, mode=mode)
    b1 = pd.DataFrame({"k": ["a"], EVENT_TIME: [1], "v": [np.nan]})
    b2 = pd.DataFrame({"k": ["a"], EVENT_TIME: [2], "v": pd.array([5], dtype="Int64")})
    b3 = pd.DataFrame({"k": ["a"], EVENT_TIME: [3], "v": [np.nan]})
    got = {}
    for panes in stream(e, [(b1, NEG_INF), (b2, NEG_INF), (b3, 50)], reference=reference, concat=False):
        panes = panes[~panes["is_retraction"]] if mode.retracting else panes
        for _, pane in panes.iterrows():
            values = [None if pd.isna(pane[c]) else pane[c] for c in ("top", "low", "s")]
            assert all(isinstance(v, (int, np.integer)) for v in values if v is not None), values
            got[pane["emit_time"]] = values
    if trigger is None:
        assert got == {300: [5, 5, 5]}
    elif mode.accumulating:
        assert got == {100: [None, None, None], 200: [5, 5, 5], 300: [5, 5, 5]}
    else:
        assert got == {100: [None, None, None], 200: [5, 5, 5], 300: [None, None, None]}


@pytest.mark.parametrize("column", [pd.array([1, None, 2], dtype="Int64"), pd.Series([1, None, 2], dtype=object)],
                         ids=["Int64", "object"])
@pytest.mark.parametrize("reference", [False, True], ids=["vectorised step", "per-key loop"])
def test_integer_keys_with_a_null_key_stay_integers(column, reference):
    e = engine([Aggregate("count_star", None, "n")])
    rows = pd.DataFrame({"k": column, EVENT_TIME: [1, 2, 3]})
    panes = stream(e, [(rows, 50)], reference=reference)
    keys = panes["k"].tolist()
    assert keys[:2] == [1, 2] and pd.isna(keys[2])
    assert all(isinstance(k, (int, np.integer)) for k in keys[:2]), keys
