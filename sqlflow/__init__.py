"""sqlflow: the Dataflow Model (windows, triggers, accumulation, retractions) as SQL on Spark.

The public functions are loaded lazily, so that code running on Spark executors
(`sqlflow.engine`, `sqlflow.udfs`) imports neither sqlglot nor lark nor pyspark's SQL layer.
Everything a user needs is here: `sql`, `transpile`, `explain`, `register`, `dropped`,
`metrics`, `late_by_source`, `parse`, `parse_script`, `to_sql`, `register_window_fn`, `plot`, and the session,
script and stream helpers `local_session` (sqlflow.spark.session), `run_script`
(sqlflow.spark.script) and `start` (sqlflow.spark.streaming), still importable from there.

>>> import sqlflow
>>> sqlflow.start.__module__, sqlflow.run_script.__module__, sqlflow.local_session.__module__
('sqlflow.spark.streaming.sink', 'sqlflow.spark.script', 'sqlflow.spark.session')
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from .errors import (  # noqa: F401  (cheap, and part of the public API)
    SqlflowAnalysisError,
    SqlflowError,
    SqlflowExecutionError,
    SqlflowSemanticError,
    SqlflowSyntaxError,
    SqlflowUnsupportedError,
)

__version__ = "0.1.0"


class _CheckoutLayout:
    """In a source checkout, grammar/ and udfs/ sit next to sqlflow/ (the project's layout); the
    wheel installs them as sqlflow.grammar and sqlflow.udfs. This finder gives a checkout the same
    names, so `python -m sqlflow.demo` and `python -m pytest` work from the repository root."""

    ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    PACKAGES = {"sqlflow.grammar": "grammar", "sqlflow.udfs": "udfs"}

    @classmethod
    def applies(cls) -> bool:
        return (os.path.isfile(os.path.join(cls.ROOT, "pyproject.toml"))
                and os.path.isfile(os.path.join(cls.ROOT, "grammar", "sqlflow.lark"))
                and not os.path.isdir(os.path.join(os.path.dirname(__file__), "grammar")))

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = cls.PACKAGES.get(fullname)
        if folder is None:
            return None
        where = os.path.join(cls.ROOT, folder)
        return importlib.util.spec_from_file_location(fullname, os.path.join(where, "__init__.py"),
                                                      submodule_search_locations=[where])


if _CheckoutLayout.applies() and _CheckoutLayout not in sys.meta_path:
    sys.meta_path.insert(0, _CheckoutLayout)

#: public name -> module that defines it (imported on first use)
_LAZY = {
    "parse": "sqlflow.frontend",
    "parse_script": "sqlflow.frontend",
    "to_sql": "sqlflow.frontend",
    "sql": "sqlflow.spark.api",
    "transpile": "sqlflow.spark.api",
    "explain": "sqlflow.spark.api",
    "register": "sqlflow.spark.api",
    "dropped": "sqlflow.spark.api",
    "metrics": "sqlflow.spark.api",
    "late_by_source": "sqlflow.spark.api",
    "register_window_fn": "sqlflow.engine.windows",
    "plot": "sqlflow.diagram",
    "local_session": "sqlflow.spark.session",
    "run_script": "sqlflow.spark.script",
    "start": "sqlflow.spark.streaming",
    "postgres_sink": "sqlflow.spark.sinks.postgres",
    "write_panes": "sqlflow.spark.sinks.postgres",
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
    from .interfaces.magic import load_ipython_extension as _load

    _load(ipython)
