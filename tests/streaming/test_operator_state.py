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


def processor(**fields):
    """The operator of a fixed-window SUM with heartbeats; `fields`: other `StreamSpec` fields (the
    bucket count's; none: grouped by key, no buckets)."""
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(MINUTE))), None,
                              ast.AllowedLateness(ast.Duration(MINUTE)), ast.Emit(ast.AccumulationMode.ACCUMULATING))
    plan = EnginePlan(windowing, (Aggregate("sum", "v", "total"),), keys=("k",))
    columns = (C.BUCKET, C.KIND, C.EVENT_TIME, "k", "v")
    spec = op.StreamSpec(plan=plan, input_columns=("k", C.EVENT_TIME, "v"), frame_columns=columns,
                         integral_columns=("v",), **({"column_shift": 0, "delay_ms": 0} | fields))
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
    processor and calls its `init`: that process registers the bucket's state variable (and an
    older sqlflow's, read once to move it) and imports neither pandas nor the engine (they took
    1.3-2.4 s of every query's start)."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    proc, _ = processor()
    out = subprocess.run([sys.executable, "-c", PLANNING], input=cloudpickle.dumps(proc), capture_output=True,
                         check=True)
    schema, previous = op.state_schema().simpleString(), op.previous_state_schema().simpleString()
    assert out.stdout.decode().strip() == f"[('bucket_state', '{schema}'), ('bucket', '{previous}')] []"
    assert schema.startswith("struct<wm:bigint,p:bigint,") and schema.endswith(",seq:bigint,buckets:bigint,blob:binary>")
    assert previous == schema.replace(",buckets:bigint", "")


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
    assert peek(tester)[0] == op.Meta(buckets=0)  # (the test's spec: grouped by key, no buckets)
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


def bucketed(count: int, previous: int | None = None, value: tuple | None = None, older: tuple | None = None,
             heartbeats: bool = True):
    """A TwsTester of the operator of a stream of `count` buckets (an older sqlflow's value is
    taken to have `previous`) whose bucket 0 holds `value` (the current variable's) or `older`
    (the variable of an older sqlflow's); neither: a stream started now (without `heartbeats`,
    with its initial state). No test row is late for Spark."""
    from pyspark.sql.streaming.tws_tester import TwsTester

    proc, columns = processor(buckets=count, previous_buckets=previous or count,
                              buckets_setting="spark.sqlflow.streaming.buckets",
                              **({} if heartbeats else {"delay_ms": None, "initial_state": True}))
    fresh = value is None and older is None
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60,
                       initialStatePandas=[(0, pd.DataFrame({C.BUCKET: [0]}))] if fresh and not heartbeats else None)
    if value is not None:
        tester.updateValueState(op.STATE_NAME, 0, value)
    if older is not None:
        tester.updateValueState(op.PREVIOUS_STATE_NAME, 0, older)
    return tester, columns


def test_a_restart_with_another_bucket_count_is_refused_naming_both_counts():
    """A key's state lives in the bucket of its hash under the stream's count: a stream restarted
    from its checkpoint with another count (`spark.sqlflow.streaming.buckets` changed, another
    number of cores under the default) would look for each moved key's state in another bucket
    and lose it. Every bucket's value keeps the count; a call finding another is refused, naming
    both counts and the setting that goes on from the checkpoint."""
    import pytest

    from sqlflow.errors import SqlflowExecutionError

    tester, columns = bucketed(8)
    tester.testInPandas(0, batch(columns, ["a", "b"], [1, 2]))
    meta, blob = peek(tester)
    assert (meta.buckets, meta.keys) == (8, 2)
    value = (*meta.row(), blob)
    # the same count goes on: a's and b's window [0, 1m) closes with its sums
    tester, columns = bucketed(8, value=value)
    tester.testInPandas(0, batch(columns, ["a"], [200]))
    out = tester.testInPandas(0, heartbeat(columns, 200))
    panes = out[out[C.KIND] == C.PANE].sort_values("k")
    assert panes[["k", "total", "window_start"]].values.tolist() == [["a", 1, T0], ["b", 1, T0]]
    # fewer buckets: refused, the checkpoint's count named
    tester, columns = bucketed(2, value=value)
    with pytest.raises(SqlflowExecutionError) as error:
        tester.testInPandas(0, batch(columns, ["a"], [200]))
    assert str(error.value) == (
        "sqlflow: STREAM: the checkpoint's state of bucket 0 was written by a stream of 8 hash buckets of keys, "
        "and this query has 2: each key's state would be looked for in another bucket and lost\n"
        "set spark.sqlflow.streaming.buckets = 8 to go on from this checkpoint, or start from a new one")
    # more buckets: the checkpoint's buckets find the other count (with heartbeats every bucket
    # runs in every batch with data); without heartbeats, a bucket the checkpoint never had has
    # no value (every bucket of such a stream gets one in its first batch, its initial state)
    with pytest.raises(SqlflowExecutionError, match="^sqlflow: STREAM: the checkpoint's state of bucket 0 was "
                       "written by a stream of 8 hash buckets of keys, and this query has 16"):
        bucketed(16, value=value)[0].testInPandas(0, heartbeat(columns, 200))
    tester, columns = bucketed(16, heartbeats=False)
    tester.handle.value_states[op.STATE_NAME].clear()  # bucket 0 of a restarted stream: no initial state
    with pytest.raises(SqlflowExecutionError, match="^sqlflow: STREAM: the checkpoint has no state of bucket 0: it "
                       "was written by a stream of fewer hash buckets of keys than this query's 16"):
        tester.testInPandas(0, batch(columns, ["a"], [200]))


def test_an_older_sqlflow_value_moves_to_the_current_variable_when_its_count_is_the_default_then():
    """An older sqlflow kept no count, in a state variable of the schema without it (Spark refuses
    a variable whose schema changed). Its value is read when the current one is absent, taken to
    have that version's count (`spark.sqlflow.streaming.buckets`, else its default of 4 per
    core), and moved: the stream goes on. Taken to have another count than the stream's, it is
    refused."""
    import pytest

    from sqlflow.errors import SqlflowExecutionError

    tester, columns = bucketed(8)
    tester.testInPandas(0, batch(columns, ["a", "b"], [1, 2]))
    meta, blob = peek(tester)
    older = (*meta.row()[:-1], blob)  # the previous schema: no count
    tester, columns = bucketed(8, previous=8, older=older)
    tester.testInPandas(0, batch(columns, ["a"], [200]))
    out = tester.testInPandas(0, heartbeat(columns, 200))
    panes = out[out[C.KIND] == C.PANE].sort_values("k")
    assert panes[["k", "total", "window_start"]].values.tolist() == [["a", 1, T0], ["b", 1, T0]]
    assert peek(tester)[0].buckets == 8 and tester.peekValueState(op.PREVIOUS_STATE_NAME, 0) is None
    tester, columns = bucketed(2, previous=8, older=older)  # another count than the older default's
    with pytest.raises(SqlflowExecutionError) as error:
        tester.testInPandas(0, batch(columns, ["a"], [200]))
    assert str(error.value) == (
        "sqlflow: STREAM: the checkpoint's state of bucket 0 was written by an older sqlflow, which kept no bucket "
        "count: taken to be its default here, 8 hash buckets of keys, and this query has 2: each key's state "
        "would be looked for in another bucket and lost\n"
        "set spark.sqlflow.streaming.buckets = 8 to go on from this checkpoint, or start from a new one")
