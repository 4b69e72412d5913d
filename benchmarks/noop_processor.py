"""The stateful operator's processor with no engine: for benchmarks/floors.py's `sqlflow_noop`
side, sqlflow's own plan around the operator (the combining and packing pass, the heartbeats, the
buckets, the initial state, the observed counters) with a body that reads its rows and emits
nothing, keeps no state and sets no timer. Pickled by value (`register`): the Python workers do not
have the benchmarks folder on their path."""
from __future__ import annotations

import sys


def register():
    """Swap the operator's processor for `noop_class()` in the plans built from now on; returns
    a function that puts the real one back."""
    from pyspark import cloudpickle

    from sqlflow.spark.streaming import stateful

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    real = stateful.PaneProcessor
    stateful.PaneProcessor = noop_class()

    def restore():
        stateful.PaneProcessor = real
    return restore


def noop_class():
    from sqlflow.udfs.tws import PaneProcessor

    class NoEngine:
        def initial(self, timer_values):
            pass

        def input_rows(self, key, rows, timer_values):
            for frame in rows:
                len(frame)
            return iter(())

        def expired(self, key, timer_values, expiry):
            return iter(())

    class NoopProcessor(PaneProcessor):
        def _build(self, spec):
            return NoEngine()

    return NoopProcessor
