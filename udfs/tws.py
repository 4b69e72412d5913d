"""The stateful operator's transformWithStateInPandas (TWS) processor: a light shell around
udfs/streaming.py's `BucketOperator`.

Spark plans the first micro-batch of every TWS query by starting a new Python process on the driver
that unpickles the processor and calls its `init` (to learn its state variables), then exits. When
the processor's module imported the operator (pandas and the engine), that import was 1.3-2.4 s of
every stateful query's start (the first batch's `queryPlanning`, docs/streaming.md 9.1), against
0.6 s for the process to start with pyspark alone. So this module imports nothing of sqlflow's: the
processor carries the operator's spec pickled and its state schema built, and imports and builds
the operator on its first call on an executor (where the workers are reused, so once per worker).
pyspark's stateful-processor API is imported when `PaneProcessor` is first used (the class is built
then), so that importing this module does not import pyspark
(`tests/streaming/test_operator_state.py` unpickles it as that process does).
"""
from __future__ import annotations

import pickle


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

        def init(self, handle) -> None:
            self.handle = handle
            self.state = handle.getValueState(self.state_name, self.state_schema)
            self.operator = None  # built on the first call: init also runs on the driver

        def handleInitialState(self, key, initialState, timerValues) -> None:
            self._operator().initial(timerValues)

        def handleInputRows(self, key, rows, timerValues):
            yield from self._operator().input_rows(key, rows, timerValues)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield from self._operator().expired(key, timerValues)

        def close(self) -> None:
            pass

        def _operator(self):
            if self.operator is None:
                from sqlflow.udfs.streaming import BucketOperator

                self.operator = BucketOperator(pickle.loads(self.spec), self.handle, self.state)
            return self.operator

    PaneProcessor.__module__ = __name__
    PaneProcessor.__qualname__ = "PaneProcessor"
    return PaneProcessor


def __getattr__(name: str):
    if name == "PaneProcessor":  # pickled by reference: Spark workers rebuild it the same way
        cls = globals()["PaneProcessor"] = _processor_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
