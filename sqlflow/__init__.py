"""sqlflow: the Dataflow Model (windows, triggers, accumulation, retractions) as SQL on Spark.

The public functions are loaded lazily, so that code running on Spark executors
(`sqlflow.engine`, `sqlflow.udfs`) imports neither sqlglot nor lark nor pyspark's SQL layer.
"""
from __future__ import annotations

import importlib

from .errors import (  # noqa: F401  (cheap, and part of the public API)
    SqlflowAnalysisError,
    SqlflowError,
    SqlflowExecutionError,
    SqlflowSemanticError,
    SqlflowSyntaxError,
    SqlflowUnsupportedError,
)

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first use)
_LAZY = {
    "parse": "sqlflow.frontend",
    "parse_script": "sqlflow.frontend",
    "to_sql": "sqlflow.frontend",
    "sql": "sqlflow.spark.api",
    "transpile": "sqlflow.spark.api",
    "explain": "sqlflow.spark.api",
    "register": "sqlflow.spark.api",
    "register_window_fn": "sqlflow.engine.windows",
    "plot": "sqlflow.plot",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sqlflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython) -> None:
    """`%load_ext sqlflow`: registers the %sqlflow and %%sqlflow magics."""
    from .magic import load_ipython_extension as _load

    _load(ipython)
