"""Which execution path runs a windowed SELECT, and why.

- **native**: plain Spark SQL with `window()` / `session_window()` (`native_rewrite.py`); possible when the
  panes collapse to one per window (bounded input, no arrival times, no COUNT / WHEN /
  percentile in the trigger) and the window is GLOBAL, FIXED, SLIDING or SESSIONS.
- **engine**: sqlflow's engine over hash buckets of keys (`sqlflow/spark/engine_path.py`); possible when the
  engine has every aggregate of the SELECT.

When both are possible, the faster one for the window kind wins, as measured by
`benchmarks/bounded.py`: the figures and the rule are the engine's (`sqlflow.engine.paths`,
`faster_bounded_path`), with every other choice of path.

>>> from sqlflow.frontend import parse
>>> from sqlflow.plan.windowed_select import describe
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
>>> c = choose(describe(s, *s.windowed_selects()[0]))
>>> c.path, c.why
('native', 'FIXED windows run faster natively (measured: native 1.40M rows/s, engine 0.58M rows/s)')
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts TRIGGER REPEAT(COUNT 2)")
>>> c = choose(describe(s, *s.windowed_selects()[0]))
>>> c.path, c.engine_mode
('engine', 'per-key event loop (the definition of the semantics)')
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW SLIDING(SIZE 1d, PERIOD 10s) ON ts")
>>> choose(describe(s, *s.windowed_selects()[0])).path
'engine'
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine import describe
from ..engine.paths import faster_bounded_path
from ..errors import SqlflowUnsupportedError
from .native_rewrite import why_not_native
from .windowed_select import WindowedSelect


@dataclass
class Choice:
    """The path of one windowed SELECT."""

    path: str                       # "native" or "engine"
    why: str
    engine_mode: str | None = None  # which engine path runs (engine only)
    native_why_not: str | None = None


def engine_mode(ws: WindowedSelect) -> str:
    """Which part of the engine computes the panes: the answer the engine dispatches on
    (`sqlflow.engine.path_for`), as explain prints it."""
    return describe(ws.path())


def engine_why_not(ws: WindowedSelect) -> str | None:
    missing = [c for c in ws.calls if c.kind is None]
    if missing:
        call = missing[0]
        return f"{call.node.sql(dialect='spark')}: {call.why_not}"
    return None


def choose(ws: WindowedSelect, forced: str | None = None, engine_blocked: str | None = None,
           native_blocked: str | None = None) -> Choice:
    """The path for this windowed SELECT (`forced`: "native" or "engine", or None for the faster;
    `engine_blocked` / `native_blocked`: why the engine / the native rewrite cannot take it, found
    in the input's types)."""
    native_no = why_not_native(ws) or native_blocked
    engine_no = engine_why_not(ws) or engine_blocked
    mode = engine_mode(ws)
    if forced == "native":
        if native_no:
            raise ws.error(SqlflowUnsupportedError, f"path='native' is impossible for {ws.label()}: {native_no}",
                           "WINDOW", pos=ws.windowing.pos)
        return Choice("native", "forced (path='native')", None, None)
    if forced == "engine":
        if engine_no:
            raise ws.error(SqlflowUnsupportedError, f"path='engine' is impossible for {ws.label()}: {engine_no}",
                           "SELECT")
        return Choice("engine", "forced (path='engine')", mode, native_no)
    if native_no and engine_no:
        raise ws.error(SqlflowUnsupportedError,
                       f"{ws.label()} can run neither natively ({native_no}) nor on the engine ({engine_no})",
                       "SELECT")
    if native_no:
        return Choice("engine", f"no native rewrite: {native_no}", mode, native_no)
    if engine_no:
        return Choice("native", f"the engine cannot run it: {engine_no}", None, None)
    faster = faster_bounded_path(ws.window)
    return Choice(faster.name, faster.why, mode if faster.name == "engine" else None, None)
