"""Executor-side probe: where does `sqlflow` come from on a Python worker?

Used by tests/spark/test_local_cluster.py to prove the installed wheel is importable by Spark's Python
workers. Imports only the standard library and sqlflow itself.

>>> info = where()
>>> sorted(info)
['engine_file', 'pid', 'probe_file', 'python', 'sqlflow_file', 'version']
>>> info["version"] == __import__("sqlflow").__version__
True
"""
from __future__ import annotations

import os
import sys


def where() -> dict:
    """The sqlflow version and the files this process imported sqlflow, the engine and the probe from."""
    import sqlflow
    import sqlflow.engine

    return {
        "version": sqlflow.__version__,
        "sqlflow_file": sqlflow.__file__,
        "engine_file": sqlflow.engine.__file__,
        "probe_file": os.path.abspath(__file__),
        "python": sys.executable,
        "pid": os.getpid(),
    }


def ready(batches):
    """`mapInArrow` job of `sqlflow.spark.streaming.session_conf.check_python_workers`: this
    worker imports the stateful operator and loads the engine's compiled kernels (so the first
    micro-batch on it does not), then says which Python it is."""
    import pyarrow as pa

    import sqlflow
    from sqlflow.engine import kernels
    from sqlflow.udfs import streaming  # noqa: F401  (the operator and the engine, imported here)
    from sqlflow.udfs.worker_gc import freeze_imports

    for _ in batches:
        pass
    kernels.warm_up()
    freeze_imports()  # what it imported, before the collection after the task (udfs/worker_gc.py)
    yield pa.RecordBatch.from_pydict({"python": [sys.executable], "version": [sqlflow.__version__]})
