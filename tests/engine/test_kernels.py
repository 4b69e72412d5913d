"""The engine's compiled primitives give exactly what the numpy and pandas expressions they
replace give (sqlflow/engine/kernels.py), including the infinities, ties and empty inputs, and the
engine gives the per-key loop's panes through them. Inputs here are small: the module lowers
`COMPILED_MIN_ROWS` to 0 so that they take the compiled loops."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine import kernels
from sqlflow.engine.kernels import SortedIndex, order_by, segment_cummax, segment_cummin
from sqlflow.time import NEG_INF, POS_INF

from .test_properties import SETTINGS, assert_paths_agree, inputs, triggers, windows
from tests.conftest import examples


@pytest.fixture(autouse=True, scope="module")
def compiled_everywhere():
    before = kernels.COMPILED_MIN_ROWS
    kernels.COMPILED_MIN_ROWS = 0
    yield
    kernels.COMPILED_MIN_ROWS = before

values = st.one_of(st.integers(-1000, 1000), st.sampled_from([NEG_INF, POS_INF, NEG_INF + 1, POS_INF - 1,
                                                                -(1 << 62), 1 << 62, (1 << 62) + 1]))


@settings(max_examples=examples(400))
@given(st.lists(values, max_size=40), st.lists(values, max_size=40))
def test_sorted_index_is_searchsorted(a, q):
    a = np.sort(np.array(a, np.int64))
    q = np.array(q, np.int64)
    index = SortedIndex(a)
    for side in ("left", "right"):
        assert index.search(q, right=side == "right").tolist() == np.searchsorted(a, q, side=side).tolist()


@pytest.mark.parametrize("spread", [1, 7, 10**6, 10**15])
def test_sorted_index_on_a_large_timeline(spread):
    rng = np.random.default_rng(spread)
    a = np.sort(rng.integers(0, spread, 50_000)) + 1_700_000_000_000_000
    q = np.r_[rng.choice(a, 20_000), a[0] + rng.integers(-5, spread + 5, 20_000), NEG_INF, POS_INF]
    index = SortedIndex(a)
    assert np.array_equal(index.search(q), np.searchsorted(a, q, side="left"))
    assert np.array_equal(index.search(q, right=True), np.searchsorted(a, q, side="right"))


@settings(max_examples=examples(300))
@given(st.lists(st.tuples(st.booleans(), st.integers(-50, 50)), min_size=1, max_size=40))
def test_segment_scans_are_groupby_cummax_and_cummin(pairs):
    starts = np.array([True] + [s for s, _ in pairs[1:]])
    v = np.array([x for _, x in pairs], np.int64)
    groups = pd.Series(v).groupby(np.cumsum(starts))
    assert segment_cummax(v, starts).tolist() == groups.cummax().tolist()
    assert segment_cummin(v, starts).tolist() == groups.cummin().tolist()


@settings(max_examples=examples(300))
@given(st.lists(st.tuples(st.integers(0, 5), values), max_size=30))
def test_order_by_sorts_by_major_then_minor(pairs):
    major = np.array([m for m, _ in pairs], np.int64)
    minor = np.array([x for _, x in pairs], np.int64)
    order = order_by(major, minor)
    assert sorted(order.tolist()) == list(range(len(pairs)))
    assert list(zip(major[order].tolist(), minor[order].tolist())) == sorted(zip(major.tolist(), minor.tolist()))


@SETTINGS
@given(inputs(), windows, triggers, st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]),
       st.booleans())
def test_the_vectorised_paths_through_compiled_loops_equal_the_reference(data, window, trigger, mode, lateness,
                                                                        replay):
    assert kernels.COMPILED_MIN_ROWS == 0
    assert_paths_agree(data, window, trigger, mode, lateness, replay)


def test_small_inputs_take_numpy_and_large_ones_the_compiled_loops(monkeypatch):
    calls = []
    monkeypatch.setattr(kernels, "_search", lambda *a: calls.append(len(a[-2])) or np.zeros(len(a[-2]), np.int64))
    monkeypatch.setattr(kernels, "COMPILED_MIN_ROWS", 100)
    index = SortedIndex(np.arange(200))
    assert index.search(np.arange(99)).tolist() == list(range(99))  # numpy: 99 queries
    index.search(np.arange(100))
    assert calls == [100]


@settings(max_examples=examples(200))
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-(2**62), 2**62)), max_size=40), st.booleans())
def test_scatter_add_is_np_add_at(pairs, floats):
    group = np.array([g for g, _ in pairs], np.int64)
    values = np.array([v for _, v in pairs], np.float64 if floats else np.int64)
    if floats:
        values = values / 3.0
    want = np.zeros(7, values.dtype)
    np.add.at(want, group, values)
    assert kernels.scatter_add(group, values, np.zeros(7, values.dtype)).tolist() == want.tolist()
