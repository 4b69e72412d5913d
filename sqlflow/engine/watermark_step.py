"""The triggers under which a micro-batch treats the rows of one key and window alike.

Under the default trigger REPEAT(WATERMARK) and WATERMARK EARLY PERIOD d (= SEQUENCE(REPEAT_UNTIL(
PERIOD d, WATERMARK), REPEAT(WATERMARK))) no trigger counts elements or looks at their values: the
rows of one key and window that arrive in one micro-batch get the same panes and the same drops,
so the streaming operator may combine them before the engine (sqlflow/spark/streaming/combine.py).

(This module also held a closed-form micro-batch step for these shapes over windows that never
merge; `stream_step.py`, which runs every shape, measured 1.4-2x faster on them and replaced it.)

>>> from sqlflow import ast
>>> from sqlflow.engine.plan import EnginePlan
>>> applies(EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(60)))), ()))
True
>>> applies(EnginePlan(ast.Windowing(ast.WindowClause(ast.Sessions(ast.Duration(60)))), ()))
False
"""
from __future__ import annotations

from .. import ast
from .plan import EnginePlan
from .vectorised import schedule_shape


def applies(plan: EnginePlan) -> bool:
    """The default trigger, or WATERMARK EARLY PERIOD d, over windows that never merge (FIXED,
    SLIDING, CUMULATE, GLOBAL)."""
    return (schedule_shape(plan.trigger) is not None
            and isinstance(plan.window, (ast.Fixed, ast.Sliding, ast.Cumulate, ast.Global)))
