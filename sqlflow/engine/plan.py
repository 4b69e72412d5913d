"""What the engine needs to know about a windowed query, with no SQL in it.

An `EnginePlan` is built on the driver from the parsed query and shipped (pickled) to Spark
executors, so it holds only AST nodes, aggregate specs, column names and custom window classes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .. import ast
from ..errors import SqlflowUnsupportedError
from ..time import POS_INF
from .aggregates import Aggregate
from .triggers import compile_trigger, uses_percentile, uses_processing_time, when_predicates


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
    def output_time(self) -> ast.OutputTime:
        return self.windowing.output_time

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


#: where the durations of a Windowing are written
_DURATION_CLAUSES = (("window", "WINDOW"), ("trigger", "TRIGGER"), ("allowed_lateness", "ALLOWED LATENESS"))


def check_durations(windowing: ast.Windowing) -> None:
    """Every duration of the clauses fits the engine's time, int64 microseconds (about 292,000
    years either way); a longer one is an error naming its clause, not an overflow later.

    >>> w = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(2**63))))
    >>> check_durations(w)
    Traceback (most recent call last):
    ...
    sqlflow.errors.SqlflowUnsupportedError: sqlflow: WINDOW: duration of 9223372036854775808 microseconds is longer than the engine's time supports (at most 9223372036854775807 microseconds, about 292,000 years)
    """
    for attr, clause in _DURATION_CLAUSES:
        for d in _durations(getattr(windowing, attr)):
            if abs(d.micros) > POS_INF:
                raise SqlflowUnsupportedError(
                    f"duration of {d.micros} microseconds is longer than the engine's time supports "
                    f"(at most {POS_INF} microseconds, about 292,000 years)", clause=clause,
                    line=d.pos.line if d.pos else None, column=d.pos.column if d.pos else None)


def _durations(node):
    if isinstance(node, ast.Duration):
        yield node
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield from _durations(getattr(node, f.name))
    elif isinstance(node, (tuple, list)):
        for x in node:
            yield from _durations(x)
