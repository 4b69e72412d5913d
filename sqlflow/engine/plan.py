"""What the engine needs to know about a windowed query, with no SQL in it.

An `EnginePlan` is built on the driver from the parsed query and shipped (pickled) to Spark
executors, so it holds only AST nodes, aggregate specs, column names and custom window classes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import ast
from .aggregates import Aggregate
from .triggers import compile_trigger, uses_percentile, uses_processing_time, when_predicates

#: engine input columns (computed by Spark before the engine)
EVENT_TIME = "__sqlflow_et"
ARRIVAL_TIME = "__sqlflow_at"
GAP = "__sqlflow_gap"
WHEN_PREFIX = "__sqlflow_when"


def when_column(i: int) -> str:
    return f"{WHEN_PREFIX}{i}"


@dataclass(frozen=True)
class EnginePlan:
    """One windowed aggregation: window fn, trigger, accumulation, lateness and aggregates."""

    windowing: ast.Windowing
    aggregates: tuple[Aggregate, ...]
    keys: tuple[str, ...] = ()
    custom_windows: dict = field(default_factory=dict, compare=False)

    @property
    def trigger(self) -> "ast.Trigger":
        return self.windowing.effective_trigger

    @property
    def mode(self) -> ast.AccumulationMode:
        return self.windowing.mode

    @property
    def lateness(self) -> int:
        return self.windowing.lateness_micros

    @property
    def window(self) -> "ast.WindowFn":
        return self.windowing.window.fn

    @property
    def n_when(self) -> int:
        return len(when_predicates(self.trigger))

    @property
    def per_row_gap(self) -> bool:
        fn = self.window
        return isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.SqlExpr)

    @property
    def uses_processing_time(self) -> bool:
        return uses_processing_time(self.trigger)

    @property
    def uses_percentile(self) -> bool:
        return uses_percentile(self.trigger)

    def compiled_trigger(self):
        return compile_trigger(self.trigger)
