"""Trigger transcripts (tests/transcripts/*.yaml) through the engine, dispatched and per-key loop.
(The `transcript` fixture, in tests/conftest.py, gives every file and its SQL.)"""
import re

import numpy as np
import pandas as pd
import pytest

import sqlflow
from sqlflow.engine.aggregates import KINDS, Aggregate
from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME, GAP, when_column
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import SECOND

AGG = re.compile(r"^\s*(\w+)\s*\(\s*(\*|DISTINCT\s+\w+|\w+)\s*\)\s+AS\s+(\w+)\s*$", re.I)


def aggregates(text: str):
    out = []
    for item in text.split(","):
        fn, arg, name = AGG.match(item).groups()
        fn = fn.lower()
        if arg == "*":
            out.append(Aggregate("count_star", None, name))
        elif arg.upper().startswith("DISTINCT"):
            out.append(Aggregate("count_distinct", arg.split()[1], name))
        else:
            out.append(Aggregate(KINDS[fn], arg, name))
    return tuple(out)


def us(seconds):
    return None if seconds is None else int(round(seconds * SECOND))


def engine_input(t: dict) -> pd.DataFrame:
    ev = t["events"]
    rows = pd.DataFrame({
        "key": [e["key"] for e in ev],
        "v": pd.array([e.get("v") for e in ev], dtype="Int64"),
        EVENT_TIME: pd.array([us(e["time"]) for e in ev], dtype="Int64"),
    })
    if not t.get("bounded"):
        rows[ARRIVAL_TIME] = [us(e["at"]) for e in ev]
    flags = [bool(e.get("flag", False)) for e in ev]
    for i in range(8):
        rows[when_column(i)] = flags
    rows[GAP] = [us(e.get("gap")) if e.get("gap") is not None else np.nan for e in ev]
    return rows


def expected(t: dict) -> list[tuple]:
    out = []
    for row in t["expect"]:
        w = row["window"]
        out.append((us(row["at"]), row["key"], None if w is None else us(w[0]), None if w is None else us(w[1]),
                    row["total"], row["timing"], row["index"], row.get("last", False), row.get("retract", False)))
    return out


def actual(panes: pd.DataFrame) -> list[tuple]:
    def v(x):
        return None if pd.isna(x) else int(x)

    retract = panes["is_retraction"] if "is_retraction" in panes else [False] * len(panes)
    return [(v(r.emit_time), r.key, v(r.window_start), v(r.window_end), v(r.total), r.pane_timing,
             int(r.pane_index), bool(r.is_last), bool(x))
            for r, x in zip(panes.itertuples(), retract)]


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_transcript(transcript, reference):
    t = transcript
    if "engine" in t.get("skip", {}):
        pytest.skip(t["skip"]["engine"])
    statement = sqlflow.parse(t["query"]())
    (_, windowing), = statement.windowed_selects()
    plan = EnginePlan(windowing, aggregates(t.get("aggregates", "SUM(v) AS total")), keys=("key",))
    steps = t.get("watermark") or []
    timeline = Timeline.from_steps([us(p) for p, _ in steps], [us(w) for _, w in steps])
    result = Engine(plan).run(engine_input(t), timeline=timeline, replay=not t.get("bounded"),
                              p_end=us(t.get("end")), reference=reference)
    assert actual(result.panes) == expected(t)
    counted = {reason: n for reason, n in result.dropped["reason"].value_counts().items()}
    assert counted == t.get("dropped", {})


def test_transcript_in_micro_batches(transcript):
    """The same transcript as a stream: Engine.advance (what the streaming operator runs), one
    micro-batch at every arrival, watermark step and expected emission, state pickled between."""
    import pickle

    from sqlflow.time import NEG_INF

    t = transcript
    if t.get("bounded") or "streaming" in t.get("skip", {}):
        pytest.skip(t.get("skip", {}).get("streaming", "bounded data has no micro-batches"))
    (_, windowing), = sqlflow.parse(t["query"]()).windowed_selects()
    plan = EnginePlan(windowing, aggregates(t.get("aggregates", "SUM(v) AS total")), keys=("key",))
    engine = Engine(plan)
    rows = engine_input(t)
    steps = t.get("watermark") or []
    timeline = Timeline.from_steps([us(p) for p, _ in steps], [us(w) for _, w in steps])
    times = sorted({*rows[ARRIVAL_TIME].tolist(), *(us(p) for p, _ in steps),
                    *(us(r["at"]) for r in t["expect"]), *([us(t["end"])] if t.get("end") else [])})
    state, out, dropped, wm = None, [], {}, NEG_INF
    for i, p in enumerate(times):
        batch = rows[rows[ARRIVAL_TIME] == p]
        new_wm = max(wm, timeline.at(p))
        result, state = engine.advance(state, batch, p=p, wm_prev=wm, wm_new=new_wm,
                                       end_of_input=(i == len(times) - 1))
        state = pickle.loads(pickle.dumps(state))
        out.append(result.panes)
        for reason, n in result.dropped["reason"].value_counts().items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
        wm = new_wm
    assert actual(pd.concat(out, ignore_index=True)) == expected(t)
    assert dropped == t.get("dropped", {})
