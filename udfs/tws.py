"""The stateful operator's transformWithStateInPandas (TWS) processor: a light shell around
udfs/streaming.py's `BucketOperator`.

Spark plans the first micro-batch of every TWS query by starting a new Python process on the driver
that unpickles the processor and calls its `init` (to learn its state variables), then exits. When
the processor's module imported the operator (pandas and the engine), that import was 1.3-2.4 s of
every stateful query's start (the first batch's `queryPlanning`, docs/dev/streaming-performance.md, 3), against
0.6 s for the process to start with pyspark alone. So this module imports nothing of sqlflow's: the
processor carries the operator's spec pickled and its state schema built, and imports and builds
the operator on its first call on an executor (where the workers are reused, so once per worker).
pyspark's stateful-processor API is imported when `PaneProcessor` is first used (the class is built
then), so that importing this module does not import pyspark
(`tests/streaming/test_operator_state.py` unpickles it as that process does). `ChainedProcessor`
is the same shell for a chained stage's `ChainOperator` (udfs/chained_operator.py).
"""
from __future__ import annotations

import pickle
from typing import Any


def _processor_class():
    """PaneProcessor, built on first use so that importing this module does not import pyspark."""
    from pyspark.sql.streaming import StatefulProcessor

    class PaneProcessor(StatefulProcessor):
        """The TWS processor: one call per bucket with input or an expired poll timer, each handed
        to the bucket's `BucketOperator`."""

        def __init__(self, spec):
            from pyspark import cloudpickle

            from sqlflow.udfs import streaming

            self.spec = cloudpickle.dumps(spec)  # loaded on the executors only (not by the planning process)
            self.state_name = streaming.STATE_NAME
            self.state_schema = streaming.state_schema()
            self.previous_name = streaming.PREVIOUS_STATE_NAME
            self.previous_schema = streaming.previous_state_schema()

        def init(self, handle) -> None:
            from sqlflow.udfs.worker_gc import freeze_imports

            freeze_imports()
            self.handle = handle
            self.state = handle.getValueState(self.state_name, self.state_schema)
            self.previous = (None if self.previous_schema is None else  # an ordering keeps no older value
                             handle.getValueState(self.previous_name, self.previous_schema))
            self.operator: Any = None  # built on the first call: init also runs on the driver

        def handleInitialState(self, key, initialState, timerValues) -> None:
            self._operator().initial(timerValues)

        def handleInputRows(self, key, rows, timerValues):
            yield from self._operator().input_rows(key, rows, timerValues)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield from self._operator().expired(key, timerValues, expiredTimerInfo.getExpiryTimeInMs())

        def close(self) -> None:
            pass

        def _operator(self):
            if self.operator is None:
                self.operator = self._build(pickle.loads(self.spec))
            return self.operator

        def _build(self, spec):
            from sqlflow.udfs.streaming import BucketOperator

            return BucketOperator(spec, self.handle, self.state, self.previous)

    PaneProcessor.__module__ = __name__
    PaneProcessor.__qualname__ = "PaneProcessor"
    return PaneProcessor


def _chained_class():
    """ChainedProcessor (a chained stage's, udfs/chained_operator.py), built on first use as PaneProcessor is."""
    from pyspark.sql.streaming import StatefulProcessor

    class ChainedProcessor(StatefulProcessor):
        """The TWS processor of a chained stage (timeMode None): one call per bucket with input,
        handed to the bucket's `ChainOperator`."""

        def __init__(self, spec):
            from pyspark import cloudpickle

            from sqlflow.udfs import chained_operator, streaming
            from sqlflow.udfs.operator_frames import struct_type

            self.spec = cloudpickle.dumps(spec)  # loaded on the executors only (not by the planning process)
            self.names = (streaming.STATE_NAME, chained_operator.REPORTS_NAME, streaming.PREVIOUS_STATE_NAME)
            self.schemas = (streaming.state_schema(), struct_type(chained_operator.REPORTS_SCHEMA),
                            streaming.previous_state_schema())

        def init(self, handle) -> None:
            from sqlflow.udfs.worker_gc import freeze_imports

            freeze_imports()
            self.state, self.reports, self.previous = (handle.getValueState(n, s)
                                                       for n, s in zip(self.names, self.schemas))
            self.operator: Any = None  # built on the first call: init also runs on the driver

        def handleInputRows(self, key, rows, timerValues):
            if self.operator is None:
                from sqlflow.udfs.chained_operator import ChainOperator

                self.operator = ChainOperator(pickle.loads(self.spec), self.state, self.reports, self.previous)
            yield from self.operator.input_rows(key, rows)

        def close(self) -> None:
            pass

    ChainedProcessor.__module__ = __name__
    ChainedProcessor.__qualname__ = "ChainedProcessor"
    return ChainedProcessor


def _ordered_class():
    """OrderProcessor (event-time ordering on a live stream, udfs/ordered_stream.py): PaneProcessor
    with the ordering's state and operator."""
    pane_processor = __getattr__("PaneProcessor")

    class OrderProcessor(pane_processor):  # type: ignore[valid-type,misc]
        """The TWS processor of an ORDER BY event time on a stream: one call per micro-batch with
        input or an expired timer, handed to the stream's `OrderOperator`."""

        def __init__(self, spec):
            from pyspark import cloudpickle

            from sqlflow.udfs.operator_frames import struct_type
            from sqlflow.udfs.ordered_stream import ORDER_STATE_NAME, ORDER_STATE_SCHEMA

            self.spec = cloudpickle.dumps(spec)  # loaded on the executors only (not by the planning process)
            self.state_name = ORDER_STATE_NAME
            self.state_schema = struct_type(ORDER_STATE_SCHEMA)
            self.previous_schema = None

        def _build(self, spec):
            from sqlflow.udfs.ordered_stream import OrderOperator

            return OrderOperator(spec, self.handle, self.state)

    OrderProcessor.__module__ = __name__
    OrderProcessor.__qualname__ = "OrderProcessor"
    return OrderProcessor


def __getattr__(name: str):
    # pickled by reference: Spark workers rebuild them the same way
    if name == "PaneProcessor":
        cls = globals()["PaneProcessor"] = _processor_class()
        return cls
    if name == "ChainedProcessor":
        cls = globals()["ChainedProcessor"] = _chained_class()
        return cls
    if name == "OrderProcessor":
        cls = globals()["OrderProcessor"] = _ordered_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
