"""Executor-side probe: where does `sqlflow` come from on a Python worker?

Used by tests/test_packaging.py to prove the installed wheel is importable by Spark's Python
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
