"""The paper's running example (section 2.4) as engine input, from sqlflow/data/paper_example.json."""
from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pandas as pd

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import HOUR, MINUTE, POS_INF, SECOND

EXAMPLE = json.loads(resources.files("sqlflow").joinpath("data/paper_example.json").read_text())

D = ast.Duration
EARLY_LATE = ast.Sequence((ast.RepeatUntil(ast.Period(D(MINUTE)), ast.Watermark()), ast.Repeat(ast.Watermark())))


def clock(text: str) -> int:
    """'12:05:19' -> microseconds on the example's day; '+inf' -> +inf."""
    if text == "+inf":
        return POS_INF
    h, m, s = map(int, text.split(":"))
    return (h * 3600 + m * 60 + s) * SECOND


def inputs() -> pd.DataFrame:
    ev = EXAMPLE["inputs"]["events"]
    return pd.DataFrame({
        "k": [e["key"] for e in ev],
        "id": [e["id"] for e in ev],
        "v": [e["value"] for e in ev],
        EVENT_TIME: [clock(e["event_time"]) for e in ev],
        ARRIVAL_TIME: [clock(e["proc_time"]) for e in ev],
    })


def heuristic_watermark() -> Timeline:
    steps = EXAMPLE["inputs"]["watermarks"]
    return Timeline.from_steps([clock(s["proc_time"]) for s in steps], [clock(s["watermark"]) for s in steps])


def figure(n: int) -> dict:
    return next(f for f in EXAMPLE["figures"] if f["figure"] == n)


def run(window, trigger, mode, *, replay: bool, timeline=None, rows=None, reference=False):
    """Sum of v per key, with allowed lateness long enough that the late 9 is kept (as in the paper)."""
    windowing = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(HOUR)), ast.Emit(mode))
    plan = EnginePlan(windowing, (Aggregate("sum", "v", "total"),), keys=("k",))
    rows = inputs() if rows is None else rows
    return Engine(plan).run(rows, timeline=timeline, replay=replay, reference=reference)


def expected_panes(n: int) -> list[tuple]:
    """(window start, end, signed value, emit time) of every expected pane, in order."""
    out = []
    for p in figure(n)["expected_panes"]:
        w = p["window"]
        start = clock(w["start"]) if "start" in w else None
        end = clock(w["end"]) if "end" in w else None
        fire = None if p["fire_time"] == "after_all_input" else clock(p["fire_time"])
        out.append((start, end, p["value"], fire))  # retractions are stored negative
    return out


def actual_panes(panes: pd.DataFrame) -> list[tuple]:
    sign = np.where(panes["is_retraction"], -1, 1) if "is_retraction" in panes else np.ones(len(panes), int)
    return [
        (None if pd.isna(s) else int(s), None if pd.isna(e) else int(e), int(v) * int(sg),
         None if pd.isna(t) else int(t))
        for s, e, v, sg, t in zip(panes["window_start"], panes["window_end"], panes["total"], sign,
                                  panes["emit_time"])
    ]


def expected_kinds(n: int) -> list:
    return [p["pane_kind"].upper() if p["pane_kind"] else None for p in figure(n)["expected_panes"]]


def micro_batch_inputs() -> tuple[pd.DataFrame, Timeline]:
    """Figure 11: one-minute rounds. Each arrival is processed at the end of its round, and the
    watermark at a round's end is that time (every datum of the round is then on time for it)."""
    rows = inputs()
    rows[ARRIVAL_TIME] = -(-rows[ARRIVAL_TIME] // MINUTE) * MINUTE
    rounds = np.sort(rows[ARRIVAL_TIME].unique())
    return rows, Timeline.from_steps(rounds, rounds)
