"""The current-results table's apply logic (sqlflow/engine/current_table.py), without a database:
after every micro-batch, the table equals the current result re-aggregated from the whole
changelog so far, whatever the batches and the order of rows within them."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sqlflow.ast import AccumulationMode
from sqlflow.engine.current_table import apply_changes, batch_changes

from .changelogs import COLUMNS, current_result, normalised, shape, simulate
from tests.conftest import examples

MODES = list(AccumulationMode)

ops_strategy = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2), st.integers(0, 8), st.integers(1, 9)),
                        min_size=1, max_size=40)


def replay(ops, mode, cuts, seed, *, global_windows=False):
    """Apply the simulated changelog batch by batch (steps grouped at `cuts`, rows shuffled in each
    batch); after each batch, the table and the re-aggregation of everything so far, for the
    caller to compare."""
    steps = simulate(ops, mode, global_windows=global_windows)
    bounds = sorted({c % (len(steps) + 1) for c in cuts} | {0, len(steps)})
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(columns=list(COLUMNS))
    seen, compared = [], []
    for lo, hi in zip(bounds, bounds[1:]):
        batch = pd.concat(steps[lo:hi], ignore_index=True)
        seen.append(batch)
        shuffled = batch.iloc[rng.permutation(len(batch))].reset_index(drop=True)
        table = apply_changes(table, batch_changes(shuffled, shape(mode)), shape(mode))
        compared.append((normalised(table), normalised(current_result(pd.concat(seen, ignore_index=True), mode))))
    return compared


@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
@settings(max_examples=examples(60))
@given(ops=ops_strategy, cuts=st.lists(st.integers(0, 9), max_size=4), seed=st.integers(0, 2**32 - 1),
       global_windows=st.booleans())
# a session refined in place across two batches (its row updated), and one merged across them
@example(ops=[(0, 0, 1, 3), (1, 0, 1, 3)], cuts=[1], seed=0, global_windows=False)
@example(ops=[(0, 0, 0, 1), (0, 0, 0, 2), (1, 0, 2, 3), (2, 0, 1, 6)], cuts=[1, 2], seed=0, global_windows=False)
def test_table_equals_changelog_reaggregated(mode, ops, cuts, seed, global_windows):
    compared = replay(ops, mode, cuts, seed, global_windows=global_windows)
    assert compared and all(table == expected for table, expected in compared), compared


def test_merged_sessions_replace_their_parts():
    """Two sessions of user a, then a click between them: both rows go, the merged one comes, in
    one batch (retractions first) or across two."""
    mode = AccumulationMode.ACCUMULATING_AND_RETRACTING
    ops = [(0, 0, 0, 2), (0, 0, 0, 3), (1, 0, 2, 4)]
    steps = simulate(ops, mode)
    assert steps[1][["clicks", "window_start", "window_end", "is_retraction"]].values.tolist() == [
        [1, 100, 110, True], [1, 200, 210, True], [3, 100, 211, False]]
    for cuts in ([], [1]):
        assert all(table == expected for table, expected in replay(ops, mode, cuts, seed=1))
    changes = batch_changes(pd.concat(steps, ignore_index=True), shape(mode))
    assert changes.upserts[["user_id", "clicks", "total", "window_start", "window_end"]].values.tolist() == [
        ["a", 3, 9, 100, 211]]
    # retracted in the batch that inserted them: deleted (a no-op on a table that never held them)
    assert changes.deletes.values.tolist() == [["a", 100, 110], ["a", 200, 210]]


def test_discarding_adds_panes():
    mode = AccumulationMode.DISCARDING
    steps = simulate([(0, 1, 1, 5), (1, 1, 1, 3), (1, 1, 1, 3)], mode)
    table = pd.DataFrame(columns=list(COLUMNS))
    for step in steps:
        table = apply_changes(table, batch_changes(step, shape(mode)), shape(mode))
    assert table[["user_id", "clicks", "total", "pane_index"]].values.tolist() == [["b", 3, 11, 1]]
