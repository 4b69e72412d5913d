"""Properties of the engine on random inputs and random triggers."""
from collections import Counter

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.sessions import final_sessions
from sqlflow.engine.windows import window_fn

from .strategies import D, durations, inputs, output_times, schedule_triggers, triggers, windows
from tests.conftest import examples

SETTINGS = settings(max_examples=examples(150))
AGGS = (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n"), Aggregate("max", "v", "top"))


def oracle_lateness(window, lateness):
    """The per-final-window oracles below merge all elements of a session; a session that is
    garbage-collected and reopened by later data is two windows in the engine (as in Beam), so for
    sessions they run with lateness that keeps every window until the end of input."""
    return 1000 if isinstance(window, ast.Sessions) else lateness


def engine(window, trigger, mode, lateness, output=None):
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode),
                      output=output)
    return Engine(EnginePlan(w, AGGS, keys=("k",)))


def kept_assignments(rows, window, result):
    """(key, start, end, v) of every (row, window) assignment that was not dropped."""
    from sqlflow.columns import EVENT_TIME
    row, start, end = window_fn(window).assign(rows[EVENT_TIME].to_numpy())
    frame = pd.DataFrame({"row": row, "k": rows["k"].to_numpy()[row], "start": start, "end": end,
                          "v": rows["v"].to_numpy()[row]})
    dropped = result.dropped[["row", "window_start", "window_end"]].rename(
        columns={"window_start": "start", "window_end": "end"}).astype("int64")
    merged = frame.merge(dropped.assign(gone=True), on=["row", "start", "end"], how="left")
    return merged[merged["gone"].isna()].drop(columns=["gone"])


def final_windows(kept, window):
    """Final window of each kept assignment: itself, or its final session."""
    if isinstance(window, ast.Sessions):
        sid, s, e = final_sessions(kept["k"].to_numpy(), kept["start"].to_numpy(), kept["end"].to_numpy())
        return kept.assign(fs=s[sid], fe=e[sid])
    return kept.assign(fs=kept["start"], fe=kept["end"])


def pane_final_window(panes, finals, window):
    """Attach to each pane its final window: its own window, or the final session containing it."""
    out = []
    wins = finals[["k", "fs", "fe"]].drop_duplicates()
    for _, p in panes.iterrows():
        if pd.isna(p["window_start"]):
            out.append((p["k"], None, None))
            continue
        if not isinstance(window, ast.Sessions):
            out.append((p["k"], int(p["window_start"]), int(p["window_end"])))
            continue
        m = wins[(wins.k == p["k"]) & (wins.fs <= p["window_start"]) & (wins.fe >= p["window_end"])]
        assert len(m) == 1, (p, m)
        out.append((p["k"], int(m.fs.iloc[0]), int(m.fe.iloc[0])))
    return out


def totals(kept_final):
    g = kept_final.groupby(["k", "fs", "fe"])["v"].sum()
    return {(k, int(s) if s > -2**62 else None, int(e) if e < 2**62 else None): int(v) for (k, s, e), v in g.items()}


def assert_paths_agree(data, window, trigger, mode, lateness, replay, output=None):
    """The engine as dispatched (vectorised paths) gives the per-key loop's panes, in the same
    order, with the same metrics and dropped rows."""
    rows, tl = data
    e = engine(window, trigger, mode, lateness, output)
    ref = e.run(rows, timeline=tl, replay=replay, reference=True)
    got = e.run(rows, timeline=tl, replay=replay)
    pd.testing.assert_frame_equal(got.panes, ref.panes)
    assert got.metrics == ref.metrics
    pd.testing.assert_frame_equal(got.dropped, ref.dropped)


@SETTINGS
@given(inputs(), windows, triggers, st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]),
       st.booleans(), output_times)
def test_vectorised_paths_equal_the_reference(data, window, trigger, mode, lateness, replay, output):
    assert_paths_agree(data, window, trigger, mode, lateness, replay, output)


@SETTINGS
@given(inputs(max_rows=60), windows, schedule_triggers, st.sampled_from(list(ast.AccumulationMode)),
       st.sampled_from([0, 25, 1000]), output_times)
def test_watermark_schedule_equals_the_reference(data, window, trigger, mode, lateness, output):
    rows, tl = data
    e = engine(window, trigger, mode, lateness, output)
    ref = e.run(rows, timeline=tl, replay=True, reference=True)
    got = e.run(rows, timeline=tl, replay=True)
    pd.testing.assert_frame_equal(got.panes, ref.panes)
    assert got.metrics == ref.metrics


@SETTINGS
@given(inputs(), windows, triggers, st.sampled_from([0, 25, 1000]))
def test_discarding_panes_add_up_to_the_window_total(data, window, trigger, lateness):
    rows, tl = data
    result = engine(window, trigger, ast.AccumulationMode.DISCARDING, lateness).run(rows, timeline=tl, replay=True)
    kept = final_windows(kept_assignments(rows, window, result), window)
    by_window = Counter()
    for fw, v in zip(pane_final_window(result.panes, kept, window), result.panes["total"]):
        by_window[fw] += int(v)
    assert dict(by_window) == {w: v for w, v in totals(kept).items()}


@SETTINGS
@given(inputs(), windows, triggers, st.sampled_from([0, 25, 1000]))
def test_accumulating_last_pane_is_the_final_value(data, window, trigger, lateness):
    rows, tl = data
    lateness = oracle_lateness(window, lateness)
    result = engine(window, trigger, ast.AccumulationMode.ACCUMULATING, lateness).run(rows, timeline=tl, replay=True)
    kept = final_windows(kept_assignments(rows, window, result), window)
    last = {}
    for fw, (_, p) in zip(pane_final_window(result.panes, kept, window), result.panes.iterrows()):
        last[fw] = p
    expected = totals(kept)
    assert set(last) == set(expected)
    for fw, p in last.items():
        assert int(p["total"]) == expected[fw]
        if fw[1] is not None:
            assert (int(p["window_start"]), int(p["window_end"])) == (fw[1], fw[2])


@SETTINGS
@given(inputs(), windows, triggers, st.sampled_from([0, 25, 1000]))
def test_retractions_net_out_to_the_final_values(data, window, trigger, lateness):
    rows, tl = data
    lateness = oracle_lateness(window, lateness)
    result = engine(window, trigger, ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, lateness).run(
        rows, timeline=tl, replay=True)
    live = Counter()
    for _, p in result.panes.iterrows():
        row = (p["k"], p["window_start"], p["window_end"], int(p["total"]), int(p["n"]))
        if p["is_retraction"]:
            assert live[row] > 0, "a retraction withdraws a row that was emitted"
            live[row] -= 1
        else:
            live[row] += 1
    live = {r for r, c in live.items() if c}
    kept = final_windows(kept_assignments(rows, window, result), window)
    expected = totals(kept)
    assert {(r[0], None if pd.isna(r[1]) else int(r[1]), None if pd.isna(r[2]) else int(r[2])): r[3]
            for r in live} == expected
    assert sum(int(v) * (-1 if r else 1) for v, r in zip(result.panes["total"], result.panes["is_retraction"])) \
        == sum(expected.values())


@SETTINGS
@given(st.booleans().flatmap(lambda n: inputs(nulls=n)), windows, triggers, st.sampled_from(list(ast.AccumulationMode)),
       st.integers(0, 2**32 - 1))
def test_order_of_simultaneous_arrivals_does_not_matter(data, window, trigger, mode, seed):
    rows, tl = data
    e = engine(window, trigger, mode, 25)
    shuffled = rows.sample(frac=1.0, random_state=seed % (2**31)).reset_index(drop=True)
    a = e.run(rows, timeline=tl, replay=True).panes
    b = e.run(shuffled, timeline=tl, replay=True).panes
    pd.testing.assert_frame_equal(a, b)


@SETTINGS
@given(st.booleans().flatmap(lambda d: inputs(nulls=True, decimals=d)), windows, triggers,
       st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]), st.booleans())
def test_vectorised_paths_equal_the_reference_with_nulls(data, window, trigger, mode, lateness, replay):
    """NULL keys, NULL values, NULL WHEN predicates and decimal values: the same panes, in the
    same order, on every path."""
    assert_paths_agree(data, window, trigger, mode, lateness, replay)


@settings(max_examples=examples(300))
@given(inputs(max_rows=80), st.builds(ast.Sessions, durations(1, 4)),
       st.builds(lambda p: ast.WatermarkEarlyLate(early=ast.Period(p)), durations(2, 12)),
       st.sampled_from(list(ast.AccumulationMode)), st.sampled_from([0, 25, 1000]))
def test_bridged_sessions_share_their_keys_end_of_input(data, window, trigger, mode, lateness):
    """Sessions that late elements bridge run in the per-key loop, the others of the same key in
    the schedule; the key's input still ends after its last timer in either part (long periods
    put timers past the last arrival)."""
    assert_paths_agree(data, window, trigger, mode, lateness, replay=True)
