"""Spark's watermark on a shifted column: how far Spark may drop rows ahead of the operator.

The stateful operator's watermark column is `event time + shift` with delay `delay + shift`:
Spark's watermark is unchanged (max event time - delay) while Spark drops, before the operator,
only rows with `event time + shift <= watermark` (docs/streaming.md, section 3).
"""
from __future__ import annotations

from ... import ast
from ...engine import EnginePlan
from ...time import DAY, MILLISECOND

#: the default shift of the watermark column: Spark drops (before the operator, counting them in
#: numRowsDroppedByWatermark) only rows this far behind the watermark, so in practice every row
#: reaches the engine, which judges lateness per (row, window) and counts and returns what it drops
UNBOUNDED_SHIFT = 3650 * DAY


def lateness_shift(plan: EnginePlan) -> int:
    """How far behind the watermark a row may be and still matter to the engine (us).

    A row matters while some window it is assigned to has `end + allowed lateness > watermark`;
    its windows end at most `extent` after it, so `shift = extent + lateness` drops nothing the
    engine would keep."""
    fn = plan.window
    if isinstance(fn, (ast.Fixed, ast.Sliding, ast.Cumulate)):
        extent = fn.size.micros
    elif isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.Duration):
        extent = fn.gap.micros
    else:
        return UNBOUNDED_SHIFT
    shift = extent + plan.lateness
    shift = -(-shift // MILLISECOND) * MILLISECOND  # Spark's watermark has millisecond steps
    return min(shift, UNBOUNDED_SHIFT)


def interval_ms(micros: int) -> str:
    """A delay as the interval text of `withWatermark` (Spark's watermark has millisecond steps).

    >>> interval_ms(10_000_999)
    '10000 milliseconds'
    """
    return f"{micros // MILLISECOND} milliseconds"
