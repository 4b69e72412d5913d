"""The versioned state format (`state_codec.py`): a bucket's engine state written and read back
between micro-batches gives the same panes, drops and state as the state kept in memory, on random
inputs (NULL keys and values, decimals, batches typed apart), windows, triggers and accumulation
modes; another format version is refused by name."""
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.columns import ARRIVAL_TIME
from sqlflow.engine import state_codec
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.stream_step import StreamStep
from sqlflow.time import NEG_INF

from .strategies import D, inputs, triggers, windows
from .test_stream_step import AGGS, LATENESS, MODES, comparable, micro_batches
from tests.conftest import examples


def same_state(a, b) -> None:
    """Two engine states hold the same values (arrays, frames, accumulators), field by field."""
    assert type(a) is type(b) or (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same_state(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same_state(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert [repr(v) for v in a.tolist()] == [repr(v) for v in b.tolist()]
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    else:
        assert a == b


@settings(max_examples=examples(80))
@given(st.data(), st.booleans().flatmap(lambda d: inputs(nulls=True, decimals=d)), windows, triggers, MODES, LATENESS)
def test_encoded_state_gives_the_same_stream(data, drawn, window, trigger, mode, lateness):
    rows, tl = drawn
    w = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(lateness)), ast.Emit(mode))
    step = StreamStep(Engine(EnginePlan(w, AGGS, keys=("k",))))
    cuts, marks, batch_of, finish = data.draw(micro_batches(rows, tl))
    kept = coded = None
    prev = NEG_INF
    for i, (p, wm) in enumerate(zip(cuts.tolist(), marks)):
        batch = rows[batch_of == i].drop(columns=[ARRIVAL_TIME])
        last = finish and i == len(cuts) - 1
        a, kept = step.run(kept, batch, p=p, wm_prev=prev, wm_new=wm, end_of_input=last)
        b, coded = step.run(coded, batch, p=p, wm_prev=prev, wm_new=wm, end_of_input=last)
        blob = state_codec.encode(coded)
        coded = state_codec.decode(blob)
        same_state(coded, kept)
        assert state_codec.encode(coded) == blob  # stable: a re-written state is byte for byte the same
        pd.testing.assert_frame_equal(comparable(b.panes), comparable(a.panes), check_dtype=False)
        assert b.metrics == a.metrics
        prev = wm


def test_another_format_version_is_refused_by_name():
    blob = bytearray(state_codec.encode({"windows": {"start": np.arange(3)}}))
    blob[8:12] = (state_codec.FORMAT_VERSION + 1).to_bytes(4, "little")
    with pytest.raises(state_codec.StateFormatError) as error:
        state_codec.decode(bytes(blob), where="checkpoint /data/cp, state version 7, bucket 2")
    message = str(error.value)
    assert (f"checkpoint /data/cp, state version 7, bucket 2 has format version {state_codec.FORMAT_VERSION + 1}; "
            f"this sqlflow reads format version {state_codec.FORMAT_VERSION}") in message
    assert error.value.clause == "STREAM"
    with pytest.raises(state_codec.StateFormatError, match="not sqlflow state"):
        state_codec.decode(b"\x80\x04pickled engine objects", where="bucket 0")


def test_the_previous_format_a_bare_pickle_is_read():
    state = {"windows": {"start": np.array([0, 60], np.int64)}, "keys": pd.DataFrame({"k": ["a", "b"]})}
    back = state_codec.decode(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    assert back["windows"]["start"].tolist() == [0, 60] and back["keys"]["k"].tolist() == ["a", "b"]
    assert state_codec.format_version(pickle.dumps(state)) is None


def test_the_per_key_loops_windows_travel_inside_the_versioned_bytes():
    state = {"loop": {("a",): [1, 2], ("b",): [3]}, "wm": 5}
    blob = state_codec.encode(state)
    assert state_codec.format_version(blob) == state_codec.FORMAT_VERSION
    assert state_codec.decode(blob) == state
