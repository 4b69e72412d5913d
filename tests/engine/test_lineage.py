"""Accumulating totals over pane lineage: the chain-jumping evaluation equals the plain one,
generation by generation, on random lineage graphs (chains, merges of several panes, panes
without lineage), for aggregates of every accumulator shape."""
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow.engine import kernels
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.panes import lineage_by_generation, lineage_totals
from tests.conftest import examples

AGGS = [Aggregate("sum", "x", "o"), Aggregate("count_star", None, "o"), Aggregate("min", "x", "o"),
        Aggregate("max", "x", "o"), Aggregate("first", "x", "o"), Aggregate("last", "x", "o"),
        Aggregate("stddev_samp", "x", "o"), Aggregate("collect_list", "x", "o")]


@st.composite
def lineages(draw):
    """Panes in creation order; each builds on none, one or several earlier panes, each pane
    superseded at most once (a window's pane is followed by its next pane or by one merge)."""
    n = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    free: list[int] = []
    parents: list[list[int]] = []
    for p in range(n):
        k = min(len(free), int(rng.choice([0, 1, 1, 1, 1, 2, 3])))
        chosen = sorted(rng.choice(len(free), k, replace=False).tolist(), reverse=True) if k else []
        parents.append([free.pop(i) for i in chosen])
        free.append(p)
    gen = np.zeros(n, np.int64)
    for p, ps in enumerate(parents):
        gen[p] = 1 + max((gen[q] for q in ps), default=-1)
    indptr = np.r_[0, np.cumsum([len(ps) for ps in parents])].astype(np.int64)
    indices = np.asarray([q for ps in parents for q in ps], np.int64)
    x = pd.Series(rng.integers(-50, 50, n))
    return gen, indptr, indices, x, rng.integers(0, 4, n)


@settings(max_examples=examples(200))
@given(lineages(), st.sampled_from(AGGS))
def test_chain_jumping_equals_generation_order(lin, agg):
    gen, indptr, indices, x, group = lin
    acc = agg.create(pd.DataFrame({"x": x}), order_et=np.arange(len(x)) % 7, order_seq=np.arange(len(x)))
    chunk = agg.merge(acc, np.arange(len(x)), len(x))
    got = agg.extract(lineage_totals(agg, chunk, gen, indptr, indices))
    want = agg.extract(lineage_by_generation(agg, chunk, gen, indptr, indices))
    pd.testing.assert_series_equal(got, want)


def test_a_merge_of_two_chains_adds_both_and_its_chain_continues():
    agg = Aggregate("sum", "x", "o")
    # 0 <- 1 <- 2 ; 3 <- 4 ; 5 merges 2 and 4 ; 6 follows 5 ; 7 stands alone
    parents = [[], [0], [1], [], [3], [2, 4], [5], []]
    indptr = np.r_[0, np.cumsum([len(p) for p in parents])].astype(np.int64)
    indices = np.asarray([q for p in parents for q in p], np.int64)
    gen = np.array([0, 1, 2, 0, 1, 3, 4, 0])
    x = pd.Series([1, 2, 4, 8, 16, 32, 64, 128])
    chunk = agg.merge(agg.create(pd.DataFrame({"x": x}), np.zeros(8, np.int64), np.arange(8)), np.arange(8), 8)
    got = agg.extract(lineage_totals(agg, chunk, gen, indptr, indices)).tolist()
    assert got == [1, 3, 7, 8, 24, 63, 127, 128]


@settings(max_examples=examples(200))
@given(lineages(), st.sampled_from([Aggregate("sum", "x", "o"), Aggregate("min", "x", "o"),
                                    Aggregate("max", "x", "o"), Aggregate("avg", "x", "o")]))
def test_compiled_fold_equals_generation_order_on_floats_with_nulls(lin, agg):
    """Float sums merge in the same order as generation by generation (bit for bit), and a pane
    without values (all NULL: NaN in min and max) takes its lineage's value. (COMPILED_MIN_ROWS
    at 0: these few panes take the compiled fold.)"""
    gen, indptr, indices, x, _ = lin
    before, kernels.COMPILED_MIN_ROWS = kernels.COMPILED_MIN_ROWS, 0
    try:
        _check_fold(gen, indptr, indices, x, agg)
    finally:
        kernels.COMPILED_MIN_ROWS = before


def _check_fold(gen, indptr, indices, x, agg):
    x = pd.Series(np.where(x.to_numpy() % 3 == 0, np.nan, x.to_numpy() / 7.0))
    acc = agg.create(pd.DataFrame({"x": x}), order_et=np.zeros(len(x), np.int64), order_seq=np.arange(len(x)))
    chunk = agg.merge(acc, np.arange(len(x)), len(x))
    got = agg.extract(lineage_totals(agg, chunk, gen, indptr, indices))
    want = agg.extract(lineage_by_generation(agg, chunk, gen, indptr, indices))
    pd.testing.assert_series_equal(got, want, check_exact=True)
