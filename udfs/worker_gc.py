"""Spark's reused Python workers and the garbage collector.

PySpark's daemon runs a full garbage collection (`gc.collect()`) in a reused worker after every
task. A worker that has imported sqlflow's operator, the engine and their libraries (pandas,
pyarrow, numba) holds 80,000-160,000 objects that the collector tracks, and each of those
collections took 35-85 ms on the project's 2-core machine: once per task, so twice per micro-batch
of the stateful operator (the pass before it and the operator itself), between the batch's
stages: 50 batches of 2,000 rows of the operator took 9.85-11.50 s with those collections and
8.05-9.70 s without them (docs/dev/streaming-performance.md 5).

`freeze_imports`, called as a task of sqlflow's starts, moves the objects the worker holds
into the collector's permanent generation (`gc.freeze`, which Python keeps for a process's
long-lived objects) whenever the worker imported modules since it last did: the daemon's
collection after each task then looks at what the tasks allocated, not at the imported
libraries. At a task's start the collection after the task before has just run, so what is
frozen is what the worker holds for good (its modules, their functions and classes, sqlflow's
compiled kernels) and the task's function. Frozen objects are still freed by reference counting
when nothing refers to them; a reference cycle among them is never collected, which can keep at
most what the task that froze had built by then, once per freeze.

Only in Spark's Python workers, during a task (`pyspark.TaskContext`): the same functions also
run in the driver (the owned-sink executor's driver-local step), whose process is the user's.
"""
from __future__ import annotations

import gc
import sys

#: the number of modules the process had imported when it last froze (0: never)
_frozen_at = 0


def freeze_imports(in_task=None) -> bool:
    """Freeze the collector's tracked objects if modules were imported since the last freeze
    and this is a task on a Spark worker (`in_task()`, default `pyspark.TaskContext`); whether
    it froze. Cheap when nothing was imported: one comparison."""
    global _frozen_at
    modules = len(sys.modules)
    if modules == _frozen_at:
        return False
    if not (in_task or _in_task)():
        return False
    gc.freeze()
    _frozen_at = modules
    return True


def _in_task() -> bool:
    """Whether this process runs a Spark task (a Python worker's), not a driver."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover  (no pyspark: not a Spark worker)
        return False
    return TaskContext.get() is not None
