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

#: public name -> the module of this package that defines it (imported on first use)
_FACE = {
    "EnginePlan": "plan",
    "Aggregate": "aggregates", "INVERTIBLE": "aggregates", "overflow_column": "aggregates",
    "Engine": "runner", "EngineResult": "prepared",
    "Path": "paths", "path_for": "paths", "describe": "paths", "collapsible": "paths",
    "schedule_shape": "paths", "watermark_shape": "paths", "BOUNDED": "paths", "REPLAY": "paths",
    "STREAM": "paths", "COMBINING": "paths", "SPARK_STREAMING_AGGREGATES": "paths",
    "register_window_fn": "windows", "registered_window_fn": "windows", "registered_window_fns": "windows",
    "window_fn": "windows", "custom_windows_of": "windows", "FixedWindows": "windows", "SlidingWindows": "windows",
    "CumulateWindows": "windows", "CustomWindows": "windows", "spread_blocks": "windows",
    "Timeline": "watermarks", "EMPTY_TIMELINE": "watermarks", "ProcessingClock": "watermarks",
    "bounded_delay": "watermarks", "perfect": "watermarks", "minimum": "watermarks",
    "output_watermark": "holds",
    "compile_trigger": "triggers", "when_predicates": "triggers",
    "arrival_grid": "arrival_combine",
}

__all__ = sorted(_FACE)


def __getattr__(name: str):
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'sqlflow.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_FACE))
