"""A checkpoint's state written by this version of the owned-sink executor, committed under
tests/streaming/golden/ (a state version as the driver writes it: one parquet row per bucket and
`_sqlflow.json`), restores: the next micro-batch run from it gives the panes of an uninterrupted
run. Another format version, in a state row or in the bookkeeping, is refused with an error
naming both versions.

`python -m tests.streaming.test_owned_golden` writes the golden state again (only with a new
format version: the committed one is what older checkpoints look like)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sqlflow import ast
from sqlflow.columns import EVENT_TIME, KIND, PANE, STATE, STATE_FORMAT, pane_columns
from sqlflow.engine import state_codec
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.time import MINUTE, NEG_INF, SECOND
from sqlflow.udfs.batch_step import BatchStep, output_schema, state_columns
from sqlflow.udfs.streaming import StreamSpec

GOLDEN = Path(__file__).parent / "golden" / f"owned-state-v{state_codec.FORMAT_VERSION}"
D = ast.Duration
BASE = 1_700_000_000 * SECOND
#: the README's first query's shape: sessions, early firings, late firings, accumulating and retracting
PLAN = EnginePlan(ast.Windowing(ast.WindowClause(ast.Sessions(D(5 * MINUTE))),
                                ast.WatermarkEarlyLate(early=ast.Period(D(MINUTE)), late=ast.Watermark()),
                                ast.AllowedLateness(D(30 * MINUTE)),
                                ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING)),
                  (Aggregate("count_star", None, "clicks"), Aggregate("sum", "amount", "total")), keys=("user",))
SPEC = StreamSpec(PLAN, ("user", EVENT_TIME, "amount"))
SCHEMA = output_schema(SPEC, {"user": pa.string(), "clicks": pa.int64(), "total": pa.int64()})
#: (p, W(N-1), W(N), rows): three micro-batches; the golden state is after the second
BATCHES = [
    (BASE + 60 * SECOND, NEG_INF, NEG_INF,
     {"user": ["ann", "bob", "ann", "cy"], EVENT_TIME: [BASE, BASE + 10 * SECOND, BASE + 2 * MINUTE, BASE + SECOND],
      "amount": [1, 2, 3, 4]}),
    (BASE + 130 * SECOND, NEG_INF, BASE + 110 * SECOND,
     {"user": ["bob", "cy", "dee"], EVENT_TIME: [BASE + 4 * MINUTE, BASE + 20 * MINUTE, BASE + 3 * MINUTE],
      "amount": [5, 6, 7]}),
    (BASE + 200 * SECOND, BASE + 110 * SECOND, BASE + 19 * MINUTE + 50 * SECOND,
     {"user": ["ann", "bob", "ee"], EVENT_TIME: [BASE + 5 * MINUTE, BASE + 30 * SECOND, BASE + 21 * MINUTE],
      "amount": [8, 9, 10]}),
]
BUCKETS = {"ann": 0, "bob": 1, "cy": 0, "dee": 1, "ee": 0}


def bucket_rows(rows: dict, bucket: int) -> pa.Table:
    frame = pd.DataFrame(rows)
    return pa.Table.from_pandas(frame[frame["user"].map(BUCKETS) == bucket].reset_index(drop=True),
                                preserve_index=False)


def run_batch(i: int, states: dict) -> tuple[list[pd.DataFrame], dict]:
    p, wm_prev, wm_new, rows = BATCHES[i]
    step, panes, out_states = BatchStep(SPEC, SCHEMA), [], {}
    for b in (0, 1):
        out = step.run(b, bucket_rows(rows, b), states.get(b), p=p, wm_prev=wm_prev, wm_new=wm_new)
        panes.append(out.filter(pc.equal(out[KIND], PANE)).to_pandas())
        out_states[b] = out.filter(pc.equal(out[KIND], STATE)).select(state_columns())
    return panes, out_states


def write_golden(where: Path) -> None:
    states: dict = {}
    for i in (0, 1):
        _, states = run_batch(i, states)
    version = where / "v=1"
    version.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.concat_tables([states[0], states[1]]), version / "part-00000.parquet")
    book = {"batch": 1, "p": BATCHES[1][0], "wm": BATCHES[1][2], "seen": BASE + 20 * MINUTE, "finished": False,
            "buckets": 2, "format": state_codec.FORMAT_VERSION, "log": [[BATCHES[0][0], NEG_INF],
                                                                         [BATCHES[1][0], BATCHES[1][2]]]}
    (version / "_sqlflow.json").write_text(json.dumps(book))


def golden_states() -> dict:
    table = pq.read_table(GOLDEN / "v=1" / "part-00000.parquet")
    return {int(b): table.filter(pc.equal(table["__sqlflow_bucket"], b)) for b in table["__sqlflow_bucket"].to_pylist()}


def canonical(frames) -> pd.DataFrame:
    cols = ["user", "clicks", "total", *pane_columns(True)]
    frame = pd.concat(frames, ignore_index=True)[cols]
    return frame.sort_values(["window_start", "user", "is_retraction", "pane_index"]).reset_index(drop=True)


def test_the_golden_state_restores():
    states = golden_states()
    assert sorted(states) == [0, 1]
    # a bucket's call reads its row of the golden version (Spark's dataset of all buckets) itself
    from sqlflow.udfs.batch_step import SPARK_LAYOUT, StateFiles

    files = StateFiles(str(GOLDEN / "v=1"), SPARK_LAYOUT, "unused")
    assert all(files.load(b).equals(states[b]) for b in (0, 1))
    panes, _ = run_batch(2, states)
    ours = canonical(panes)
    engine, state = Engine(PLAN), {}
    for p, wm_prev, wm_new, rows in BATCHES:
        result, state = engine.advance(state, pd.DataFrame(rows), p=p, wm_prev=wm_prev, wm_new=wm_new)
    expected = canonical([result.panes])
    pd.testing.assert_frame_equal(ours, expected, check_dtype=False)
    # the batch's work is real: bob's session merges with a late row (a retraction), ann's grows
    assert ours["is_retraction"].sum() >= 1 and set(ours["user"]) >= {"ann", "bob"}
    book = json.loads((GOLDEN / "v=1" / "_sqlflow.json").read_text())
    assert book["format"] == state_codec.FORMAT_VERSION and book["buckets"] == 2


def test_a_state_row_of_another_format_version_is_refused():
    state = golden_states()[0]
    other = state.set_column(state.schema.get_field_index(STATE_FORMAT), STATE_FORMAT,
                             pa.array([state_codec.FORMAT_VERSION + 1], pa.int32()))
    with pytest.raises(state_codec.StateFormatError) as error:
        BatchStep(SPEC, SCHEMA).run(0, bucket_rows(BATCHES[2][3], 0), other, p=BATCHES[2][0],
                                    wm_prev=BATCHES[2][1], wm_new=BATCHES[2][2], where="/data/cp/sqlflow-state/v=1")
    assert str(error.value).startswith(
        f"sqlflow: STREAM: the state at /data/cp/sqlflow-state/v=1, bucket 0 has format version "
        f"{state_codec.FORMAT_VERSION + 1}; this sqlflow reads format version {state_codec.FORMAT_VERSION}")


def test_bookkeeping_of_another_format_version_is_refused():
    from sqlflow.spark.streaming.owned import Book

    book = json.loads((GOLDEN / "v=1" / "_sqlflow.json").read_text())
    assert Book.of(json.dumps(book), "x").buckets == 2
    assert Book.of(json.dumps(book), "x").layout == 1  # the golden state predates the layouts: Spark's dataset
    with pytest.raises(state_codec.StateFormatError, match="the state at /cp/v=1 has layout 3; this sqlflow reads "
                                                           "layouts 1 and 2"):
        Book.of(json.dumps(dict(book, layout=3)), "/cp/v=1")
    book["format"] = 0
    with pytest.raises(state_codec.StateFormatError, match=f"the state at /cp/v=1 has format version 0; this sqlflow "
                                                           f"reads format version {state_codec.FORMAT_VERSION}"):
        Book.of(json.dumps(book), "/cp/v=1")


if __name__ == "__main__":
    write_golden(GOLDEN)
