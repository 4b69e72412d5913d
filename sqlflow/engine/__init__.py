"""The engine: one definition of the Dataflow semantics, and the faster paths that match it.

What the other layers use, by name, from here (each loaded on first use: the executors import
this package, and a Python UDF worker should pay only for what its job runs):

- `EnginePlan`, `Aggregate`: what a windowed query asks of the engine (no SQL in them);
- `Engine`, `EngineResult`: runs a plan over bounded or replayed rows (`run`) or one micro-batch
  (`advance`);
- `path_for`, `describe`, `Path` and the situations `BOUNDED`, `REPLAY`, `STREAM`: which
  implementation runs a plan and why, the text `explain` prints (`paths.py`);
- `register_window_fn` and the window functions; `Timeline` and the watermark models;
  `output_watermark`, a stage's watermark as a later stage reads it (`holds.py`);
- the engine's input columns are in `plan.py` (`EVENT_TIME`, ...).

>>> from sqlflow.engine import path_for, EnginePlan
>>> path_for.__module__, EnginePlan.__module__
('sqlflow.engine.paths', 'sqlflow.engine.plan')
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: public name -> the module of this package that defines it (imported on first use)
_FACE = {
    "EnginePlan": "plan",
    "Aggregate": "aggregates", "INVERTIBLE": "aggregates", "overflow_column": "aggregates",
    "Engine": "runner", "EngineResult": "prepared",
    "Path": "paths", "path_for": "paths", "describe": "paths", "collapsible": "paths",
    "schedule_shape": "paths", "watermark_shape": "paths", "BOUNDED": "paths", "REPLAY": "paths",
    "STREAM": "paths", "COMBINING": "paths", "SPARK_STREAMING_AGGREGATES": "paths",
    "why_not_native_keys": "paths",
    "emit_times": "ordering", "PartitionLatest": "partitions", "ascending_replay": "partitions",
    "register_window_fn": "windows", "registered_window_fn": "windows", "registered_window_fns": "windows",
    "window_fn": "windows", "custom_windows_of": "windows", "FixedWindows": "windows", "SlidingWindows": "windows",
    "CumulateWindows": "windows", "CustomWindows": "windows", "spread_blocks": "windows",
    "Timeline": "watermarks", "EMPTY_TIMELINE": "watermarks", "ProcessingClock": "watermarks",
    "bounded_delay": "watermarks", "perfect": "watermarks", "minimum": "watermarks",
    "output_watermark": "holds",
    "compile_trigger": "triggers", "when_predicates": "triggers",
    "arrival_grid": "arrival_combine",
    "ADDITIVE": "current_table", "TABLE_PANE_COLUMNS": "current_table", "TableShape": "current_table",
    "batch_changes": "current_table",
}

__all__ = sorted(_FACE)

if TYPE_CHECKING:  # pragma: no cover  (what mypy sees; tests/engine/test_face.py keeps it equal to _FACE)
    from .plan import EnginePlan as EnginePlan
    from .aggregates import Aggregate as Aggregate
    from .aggregates import INVERTIBLE as INVERTIBLE
    from .aggregates import overflow_column as overflow_column
    from .runner import Engine as Engine
    from .prepared import EngineResult as EngineResult
    from .paths import BOUNDED as BOUNDED
    from .paths import COMBINING as COMBINING
    from .paths import Path as Path
    from .paths import REPLAY as REPLAY
    from .paths import SPARK_STREAMING_AGGREGATES as SPARK_STREAMING_AGGREGATES
    from .paths import STREAM as STREAM
    from .paths import collapsible as collapsible
    from .paths import describe as describe
    from .paths import path_for as path_for
    from .paths import schedule_shape as schedule_shape
    from .paths import watermark_shape as watermark_shape
    from .paths import why_not_native_keys as why_not_native_keys
    from .ordering import emit_times as emit_times
    from .partitions import PartitionLatest as PartitionLatest
    from .partitions import ascending_replay as ascending_replay
    from .windows import CumulateWindows as CumulateWindows
    from .windows import CustomWindows as CustomWindows
    from .windows import FixedWindows as FixedWindows
    from .windows import SlidingWindows as SlidingWindows
    from .windows import custom_windows_of as custom_windows_of
    from .windows import register_window_fn as register_window_fn
    from .windows import registered_window_fn as registered_window_fn
    from .windows import registered_window_fns as registered_window_fns
    from .windows import spread_blocks as spread_blocks
    from .windows import window_fn as window_fn
    from .watermarks import EMPTY_TIMELINE as EMPTY_TIMELINE
    from .watermarks import ProcessingClock as ProcessingClock
    from .watermarks import Timeline as Timeline
    from .watermarks import bounded_delay as bounded_delay
    from .watermarks import minimum as minimum
    from .watermarks import perfect as perfect
    from .holds import output_watermark as output_watermark
    from .triggers import compile_trigger as compile_trigger
    from .triggers import when_predicates as when_predicates
    from .arrival_combine import arrival_grid as arrival_grid
    from .current_table import ADDITIVE as ADDITIVE
    from .current_table import TABLE_PANE_COLUMNS as TABLE_PANE_COLUMNS
    from .current_table import TableShape as TableShape
    from .current_table import batch_changes as batch_changes

def __getattr__(name: str):
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'sqlflow.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_FACE))
