"""The stateful operator's state as it reports it, driven by PySpark's
TwsTester (no query, no JVM): per bucket, what it keeps (keys, live windows, bytes of the engine
state blob) goes out with every call's metrics row, and equals what its state holds."""
import numpy as np
import pandas as pd

from sqlflow import ast
from sqlflow import columns as C
from sqlflow.engine.aggregates import Aggregate
from sqlflow.engine.plan import EnginePlan
from sqlflow.time import MINUTE, SECOND
from sqlflow.udfs import streaming as op
from sqlflow.udfs import tws

T0 = 1_700_000_000 * SECOND - (1_700_000_000 * SECOND) % MINUTE


def processor():
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(MINUTE))), None,
                              ast.AllowedLateness(ast.Duration(MINUTE)), ast.Emit(ast.AccumulationMode.ACCUMULATING))
    plan = EnginePlan(windowing, (Aggregate("sum", "v", "total"),), keys=("k",))
    columns = (C.BUCKET, C.KIND, C.EVENT_TIME, "k", "v")
    spec = op.StreamSpec(plan=plan, input_columns=("k", C.EVENT_TIME, "v"), frame_columns=columns,
                         integral_columns=("v",), column_shift=0, delay_ms=0)
    return tws.PaneProcessor(spec), columns


def batch(columns, keys, seconds):
    return pd.DataFrame({C.BUCKET: np.zeros(len(keys), np.int32), C.KIND: np.full(len(keys), C.DATA, np.int32),
                         C.EVENT_TIME: [T0 + s * SECOND for s in seconds], "k": keys, "v": np.ones(len(keys), np.int64)}
                        )[list(columns)]


def live(out: pd.DataFrame) -> tuple:
    metrics = out[out[C.KIND] == C.METRICS].iloc[-1]
    return tuple(int(metrics[C.metric_column(m)]) for m in C.STREAM_LIVE)


def peek(tester) -> tuple[op.Meta, bytes | None]:
    """The bucket's one value of state: its `Meta` and its engine state blob."""
    return op.stored(tester.peekValueState(op.STATE_NAME, 0))


def test_every_call_reports_the_state_it_leaves():
    from pyspark.sql.streaming.tws_tester import TwsTester

    proc, columns = processor()
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60)  # no row is late for Spark
    out = tester.testInPandas(0, batch(columns, ["a", "b", "c"], [1, 2, 70]))
    keys, windows, size = live(out)
    meta, blob = peek(tester)
    assert (keys, windows) == (3, 3) == (meta.keys, meta.windows)  # a and b in [0, 1m), c in [1m, 2m)
    assert size == len(blob) == meta.bytes > 0
    assert op.loads_state(blob)["windows"]["key"].size == 3  # the engine state, all keys of the bucket
    # the next call steps to the watermark its predecessor's rows made (1:10, nothing expires yet);
    # the one after to 3:20: windows up to 2:00 are past end + lateness, only c's two are left
    out = tester.testInPandas(0, batch(columns, ["c"], [200]))
    assert live(out)[:2] == (3, 4)
    out = tester.testInPandas(0, batch(columns, ["c"], [260]))
    meta, blob = peek(tester)
    assert (meta.keys, meta.windows) == (1, 2)
    keys, windows, now = live(out)
    assert (keys, windows) == (1, 2)
    assert now == len(blob) == meta.bytes  # the versioned bytes carry a header: not smaller per se
    assert op.loads_state(blob)["windows"]["key"].size == 2  # what expired left the state


def heartbeat(columns, second):
    """A heartbeat row: another bucket got data; it carries the partition's max event time."""
    frame = batch(columns, [None], [second])
    frame[C.KIND] = C.HEARTBEAT
    return frame


def writes(tester, name) -> list:
    """Record every `update` of value state `name` (the writes Spark's state store keeps a
    version of)."""
    state = tester.handle.value_states[name]
    done, update = [], state.update
    state.update = lambda value: (done.append(value), update(value))[1]
    return done


def test_a_visit_with_nothing_due_writes_nothing():
    from pyspark.sql.streaming.tws_tester import TwsTester

    proc, columns = processor()
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60)
    done = writes(tester, op.STATE_NAME)
    tester.testInPandas(0, batch(columns, ["a"], [10]))
    assert len(done) == 1
    first = op.stored(done[0])[1]
    # the watermark steps to 0:10 (what the rows before made): the `Meta` fields record it, the
    # engine is not run (nothing was due: the window ends at 1:00), the blob written back is the
    # one read
    tester.testInPandas(0, heartbeat(columns, 5))
    assert len(done) == 2
    meta, blob = peek(tester)
    assert meta.wm == T0 + 10 * SECOND and blob == first
    value = tester.peekValueState(op.STATE_NAME, 0)
    timers = list(tester.handle.listTimers())
    # a heartbeat no later than what the bucket has seen, the watermark where it was: nothing is
    # due, nothing moves, nothing is written (before: `meta` was rewritten with the new time)
    out = tester.testInPandas(0, heartbeat(columns, 5))
    assert len(done) == 2
    assert tester.peekValueState(op.STATE_NAME, 0) == value
    assert list(tester.handle.listTimers()) == timers
    assert live(out) == (1, 1, meta.bytes)
    assert int(out[C.metric_column("buckets_advanced")].sum()) == 0
    # a later heartbeat moves what the bucket has seen: written, the blob unchanged
    tester.testInPandas(0, heartbeat(columns, 20))
    assert len(done) == 3
    meta, blob = peek(tester)
    assert meta.seen == T0 + 20 * SECOND and blob == first



PLANNING = """
import pickle, sys
processor = pickle.loads(sys.stdin.buffer.read())
calls = []
class Handle:  # what init asks of Spark's handle
    def getValueState(self, name, schema):
        calls.append((name, schema.simpleString()))
processor.init(Handle())
heavy = sorted(m for m in ("pandas", "numpy", "pyarrow", "sqlflow.engine", "sqlflow.udfs.streaming") if m in sys.modules)
print(calls, heavy)
"""


def test_the_planning_process_imports_neither_pandas_nor_the_engine():
    """Spark plans every TWS query's first batch in a new Python process that unpickles the
    processor and calls its `init`: that process registers the bucket's one state variable and
    imports neither pandas nor the engine (they took 1.3-2.4 s of every query's start)."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    proc, _ = processor()
    out = subprocess.run([sys.executable, "-c", PLANNING], input=cloudpickle.dumps(proc), capture_output=True,
                         check=True)
    schema = op.state_schema().simpleString()
    assert out.stdout.decode().strip() == f"[('bucket', '{schema}')] []"
    assert schema.startswith("struct<wm:bigint,p:bigint,") and schema.endswith(",blob:binary>")


def test_timers_only_while_the_watermark_can_move_and_no_call_that_spark_warns_about():
    """With heartbeats, a bucket keeps its poll timer only while the watermark can advance without
    new data (its rows raised the max event time); it never reads its absent value at the initial
    state call nor deletes the timer that fired (PySpark deletes it): Spark logs a warning for each
    (`Value state ... doesn't contain a value`, `TimerStateImpl: Failed to delete timer`)."""
    from pyspark.sql.streaming.tws_tester import TwsTester

    proc, columns = processor()
    calls = []
    original = proc.init

    def init(handle):
        original(handle)
        for name in ("registerTimer", "deleteTimer"):
            method = getattr(handle, name)
            setattr(handle, name, lambda ms, name=name, method=method: (calls.append((name, ms)), method(ms))[1])
        state = handle.value_states[op.STATE_NAME]
        get = state.get
        state.get = lambda: (calls.append(("get", None)), get())[1]

    proc.init = init
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60,
                       initialStatePandas=[(0, pd.DataFrame({C.BUCKET: [0]}))])
    assert calls == []  # batch 0's initial state: its value written, nothing read, no timer
    assert peek(tester)[0] == op.Meta()
    calls.clear()  # (peeking reads)
    tester.testInPandas(0, batch(columns, ["a"], [10]))
    seen_ms = (T0 + 10 * SECOND) // 1000  # the next batch's watermark (delay 0)
    assert calls == [("get", None), ("registerTimer", 1)]  # the watermark will move: poll at W + 1
    calls.clear()
    tester.setWatermark(seen_ms)  # a batch without data: the poll fires, nothing re-registered
    assert calls == [("get", None)]
    assert list(tester.handle.listTimers()) == [] and peek(tester)[0].wm == T0 + 10 * SECOND
    calls.clear()  # (peeking reads)
    tester.testInPandas(0, heartbeat(columns, 5))  # no later event time: no timer
    assert calls == [("get", None)]
    tester.testInPandas(0, heartbeat(columns, 30))  # a later one: the poll again
    assert calls[-1] == ("registerTimer", seen_ms + 1)


def test_the_operator_keeps_the_versioned_state_format_and_reads_the_previous_one():
    """The operator's blob is the owned-sink executor's versioned format; a value written by the
    previous format (a bare pickle) is migrated on read; another version is refused by name."""
    import pickle

    import pytest
    from pyspark.sql.streaming.tws_tester import TwsTester

    from sqlflow.engine import state_codec

    proc, columns = processor()
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60)
    tester.testInPandas(0, batch(columns, ["a", "b"], [1, 2]))
    meta, blob = peek(tester)
    assert blob is not None and state_codec.format_version(blob) == state_codec.FORMAT_VERSION
    state = op.loads_state(blob)
    # the previous format: the same structure as a bare pickle; the next step reads it and goes on
    old = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    tester.updateValueState(op.STATE_NAME, 0, (*meta.row(), old))
    tester.testInPandas(0, batch(columns, ["a"], [200]))
    out = tester.testInPandas(0, heartbeat(columns, 200))  # the watermark passes [0, 1m): a's 1 and b's 1
    panes = out[out[C.KIND] == C.PANE].sort_values("k")
    assert panes[["k", "total", "window_start"]].values.tolist() == [["a", 1, T0], ["b", 1, T0]]
    meta2, blob2 = peek(tester)
    assert state_codec.format_version(blob2) == state_codec.FORMAT_VERSION
    assert (meta2.keys, meta2.windows) == (1, 1)  # a's window [3m, 4m); [0, 1m) expired at 2:00
    # another format version: refused, naming the bucket and both versions
    foreign = bytearray(blob2)
    foreign[8:12] = (state_codec.FORMAT_VERSION + 1).to_bytes(4, "little")
    meta2.next_wm = 0  # make the step due, so the engine state is read
    tester.updateValueState(op.STATE_NAME, 0, (*meta2.row(), bytes(foreign)))
    with pytest.raises(state_codec.StateFormatError) as error:
        tester.testInPandas(0, batch(columns, ["c"], [300]))
    assert str(error.value).startswith(
        f"sqlflow: STREAM: the state at the operator's state of bucket 0 has format version "
        f"{state_codec.FORMAT_VERSION + 1}; this sqlflow reads format version {state_codec.FORMAT_VERSION}")
