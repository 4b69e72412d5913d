"""Hypothesis strategies: random inputs, watermarks, windows and triggers for the engine."""
from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, when_column
from sqlflow.engine.watermarks import EMPTY_TIMELINE, ProcessingClock, Timeline, bounded_delay, perfect

D = ast.Duration


def durations(lo=1, hi=8, unit=10):
    return st.integers(lo, hi).map(lambda k: D(k * unit))


windows = st.one_of(
    st.builds(ast.Fixed, durations(5, 15), st.just(D(0))),
    st.builds(lambda s, k: ast.Sliding(D(s.micros * k), s), durations(3, 8), st.integers(1, 3)),
    st.builds(ast.Sessions, durations(1, 8)),
    st.just(ast.Global()),
    st.builds(lambda s, k: ast.Cumulate(s, D(s.micros * k)), durations(3, 6), st.integers(1, 3)),
)

#: PERIOD d [OFFSET o]: boundaries aligned to the epoch or shifted (Beam's alignedTo)
periods = durations(1, 6).flatmap(
    lambda d: st.one_of(st.just(D(0)), st.integers(1, d.micros - 1).map(D)).map(lambda o: ast.Period(d, o)))

primitives = st.one_of(
    st.just(ast.Watermark()),
    periods,
    st.builds(ast.Delay, durations(1, 6)),
    st.builds(ast.Count, st.integers(1, 4)),
    st.builds(ast.When, st.just(ast.SqlExpr("flag"))),
)


def _extend(children):
    pairs = st.lists(children, min_size=2, max_size=3).map(tuple)
    return st.one_of(
        st.builds(ast.Repeat, children),
        st.builds(ast.RepeatUntil, children, children),
        st.builds(ast.Sequence, pairs),
        st.builds(ast.FirstOf, pairs),
        st.builds(ast.AllOf, pairs),
    )


triggers = st.one_of(st.none(), st.recursive(primitives, _extend, max_leaves=5),
                     st.builds(ast.WatermarkEarlyLate, st.one_of(st.none(), primitives), st.one_of(st.none(), primitives)))

#: output timestamps (OUTPUT TIMESTAMP ...): None is the default, END OF WINDOW
output_times = st.one_of(st.none(), st.sampled_from(list(ast.OutputTime)).map(ast.OutputTimestamp))

#: triggers the vectorised watermark-schedule path handles
schedule_triggers = st.one_of(
    st.none(),
    st.just(ast.Sequence((ast.Watermark(), ast.Repeat(ast.Watermark())))),
    st.builds(lambda p: ast.WatermarkEarlyLate(early=p), periods),
    st.builds(lambda p: ast.WatermarkEarlyLate(early=ast.Repeat(p)), periods),
)


@st.composite
def inputs(draw, max_rows=40, nulls=False, decimals=False):
    """(rows, watermark timeline): keys k, values v, WHEN flag, event and arrival times.

    nulls=True also draws NULLs where SQL has them: NULL keys (a group of their own), NULL values
    (Int64 NA) and NULL WHEN predicates (nullable boolean NA, which is false). decimals=True makes
    v a column of decimal.Decimal objects (quarters, with None for NULL), as Spark hands decimals
    to pandas."""
    n = draw(st.integers(0, max_rows))
    seed = draw(st.integers(0, 2**32 - 1))
    return drawn_input(n, seed, lambda kinds: draw(st.sampled_from(kinds)), nulls=nulls, decimals=decimals)


#: how `inputs` makes its watermark timeline
TIMELINE_KINDS = ["delay", "perfect", "steps", "clock"]


def drawn_input(n: int, seed: int, kind, nulls=False, decimals=False):
    """The (rows, watermark timeline) `inputs` draws: `n` rows from `seed`; `kind` picks the
    timeline from TIMELINE_KINDS (a function of that list, or one of its names). A failing
    example of a property test is kept as `@example(data=drawn_input(n, seed, kind), ...)`."""
    rng = np.random.default_rng(seed)
    keys = int(rng.integers(1, 4))
    et = rng.integers(0, 60, n) * 5
    delay = np.where(rng.random(n) < 0.8, rng.integers(0, 12, n), rng.integers(0, 80, n)) * 5
    k = rng.integers(0, keys, n)
    v = rng.integers(-3, 10, n)
    flag = rng.random(n) < 0.2
    rows = pd.DataFrame({
        "k": k,
        "v": v,
        EVENT_TIME: et.astype(np.int64),
        ARRIVAL_TIME: (et + delay).astype(np.int64),
        "flag": flag,
    })
    if nulls:
        rows["k"] = pd.Series(np.where(rng.random(n) < 0.15, None, k.astype(object)), dtype=object)
        rows["v"] = pd.array(np.where(rng.random(n) < 0.15, None, v.astype(object)), dtype="Int64")
        rows["flag"] = pd.array(np.where(rng.random(n) < 0.15, None, flag.astype(object)), dtype="boolean")
    if decimals:
        rows["v"] = pd.Series([None if pd.isna(x) else decimal.Decimal(int(x)) / 4 for x in rows["v"]], dtype=object)
    rows[when_column(0)] = rows["flag"]
    for i in range(1, 6):
        rows[when_column(i)] = rows["flag"]
    kind = kind if isinstance(kind, str) else kind(TIMELINE_KINDS)
    if kind == "clock":  # ON PROCESSING TIME: a row's time is its arrival, the watermark the clock
        rows[EVENT_TIME] = rows[ARRIVAL_TIME]
        tl = ProcessingClock.over(int(rows[ARRIVAL_TIME].min()), int(rows[ARRIVAL_TIME].max())) if n else EMPTY_TIMELINE
    elif kind == "delay":
        tl = bounded_delay(rows[ARRIVAL_TIME], rows[EVENT_TIME], int(rng.integers(0, 30)) * 5)
    elif kind == "perfect":
        tl = perfect(rows[ARRIVAL_TIME], rows[EVENT_TIME])
    else:
        k = int(rng.integers(1, 6))
        tl = Timeline.from_steps(np.sort(rng.choice(np.arange(0, 800, 5), k, replace=False)),
                                 np.sort(rng.integers(0, 60, k) * 5))
    return rows, tl
