"""Spark's reused Python workers freeze what they imported (udfs/worker_gc.py), so that the full
collection PySpark's daemon runs after every task does not walk the imported libraries again;
the driver, the user's process, never freezes."""
import gc
import sys
import types

import pandas as pd
import pyarrow as pa

from sqlflow import columns as C
from sqlflow.udfs import worker_gc


def _fake_module(name: str) -> None:
    sys.modules[name] = types.ModuleType(name)


def test_a_task_freezes_when_it_imported_since_and_only_then(monkeypatch):
    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(len(sys.modules)))
    monkeypatch.setattr(worker_gc, "_frozen_at", 0)
    in_task = lambda: True  # noqa: E731
    assert worker_gc.freeze_imports(in_task) is True
    assert worker_gc.freeze_imports(in_task) is False  # nothing imported since
    monkeypatch.setitem(sys.modules, "sqlflow_test_imported_later", types.ModuleType("sqlflow_test_imported_later"))
    assert worker_gc.freeze_imports(in_task) is True
    assert worker_gc.freeze_imports(lambda: False) is False
    assert frozen == [len(sys.modules) - 1, len(sys.modules)]


def test_the_driver_never_freezes(spark, monkeypatch):
    monkeypatch.setattr(worker_gc, "_frozen_at", 0)
    before = gc.get_freeze_count()
    assert worker_gc.freeze_imports() is False  # no Spark task in this process
    assert gc.get_freeze_count() == before
    assert worker_gc._frozen_at == 0


def _in_a_worker(batches):
    """mapInArrow: freeze_imports in a real Spark task, before and after an import."""
    for _ in batches:
        pass
    worker_gc.freeze_imports()  # whatever the worker's history: now nothing is left to freeze
    settled = gc.get_freeze_count()
    again = worker_gc.freeze_imports()
    _fake_module(f"sqlflow_test_worker_import_{id(batches)}")
    after_import = worker_gc.freeze_imports()
    yield pa.RecordBatch.from_pydict({"settled": [settled], "again": [again], "after_import": [after_import],
                                      "frozen": [gc.get_freeze_count()], "at": [worker_gc._frozen_at],
                                      "modules": [len(sys.modules)]})


def test_a_spark_worker_freezes_in_its_tasks(spark):
    row = spark.range(0, 1, 1, 1).mapInArrow(
        _in_a_worker, "settled long, again boolean, after_import boolean, frozen long, at long, modules long").first()
    assert row.settled > 0  # the worker's imports are in the permanent generation
    assert row.again is False
    assert row.after_import is True
    assert row.frozen >= row.settled
    assert row.at == row.modules


def _recording(monkeypatch) -> list:
    """Calls of gc.freeze, as if this process were a Spark worker in a task."""
    calls: list = []
    monkeypatch.setattr(worker_gc, "_in_task", lambda: True)
    monkeypatch.setattr(worker_gc, "_frozen_at", 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(len(sys.modules)))
    return calls


def test_the_operator_freezes_at_its_task_start(monkeypatch):
    from pyspark.sql.streaming.tws_tester import TwsTester

    from tests.streaming.test_operator_state import batch, processor

    calls = _recording(monkeypatch)
    proc, columns = processor()
    tester = TwsTester(proc, timeMode="EventTime", eventTimeExtractor=lambda row: 1 << 60)  # init: a task's start
    assert calls == [len(sys.modules)]
    out = tester.testInPandas(0, batch(columns, ["a"], [1]))
    assert (out[C.KIND] == C.METRICS).sum() == 1


def test_the_passes_before_the_operator_and_the_replays_freeze(monkeypatch):
    from sqlflow.engine.windows import FixedWindows
    from sqlflow.time import MINUTE
    from sqlflow.udfs.assign import windows_of
    from sqlflow.udfs.heartbeats import heartbeats
    from sqlflow.udfs.micro_batch_combine import Combine
    from sqlflow.udfs.records import PartitionRecords

    calls = _recording(monkeypatch)

    def next_task(n):  # a module imported between two tasks
        monkeypatch.setitem(sys.modules, f"sqlflow_test_between_tasks_{n}", types.ModuleType("between"))

    rows = pa.RecordBatch.from_pydict({C.BUCKET: [0], C.KIND: [C.DATA], C.EVENT_TIME: [5]})
    assert [b.num_rows for b in heartbeats(2)(iter([rows]))] == [1, 2]
    assert len(calls) == 1
    next_task(1)
    records = list(PartitionRecords(None)(iter([pd.DataFrame({"et": [3, 1], "at": [4, 2]})])))
    assert records[-1]["n"].tolist() == [2]
    assert len(calls) == 2
    next_task(2)
    out = windows_of(FixedWindows(MINUTE, 0), pd.Series(pd.to_datetime(["2024-01-01 00:00:30"])), "UTC")
    assert [(w["start"].minute, w["end"].minute) for w in out[0]] == [(0, 1)]
    assert len(calls) == 3
    next_task(3)  # the combining pass (also the first step of CombinedPack, the operator's pass)
    combine = Combine(group=("k",), time=C.EVENT_TIME, parts=(("n", "count_all", None),), weight="w")
    rows = pa.RecordBatch.from_pydict({"k": [1, 1, 2], C.EVENT_TIME: [7, 5, 9]})
    combined = pa.Table.from_batches(list(combine(iter([rows])))).sort_by("k").to_pydict()
    assert (combined["k"], combined[C.EVENT_TIME], combined["w"], combined["n"]) == ([1, 2], [5, 9], [2, 1], [2, 1])
    assert len(calls) == 4
