"""Which execution path runs a windowed SELECT, and why.

- **native**: plain Spark SQL with `window()` / `session_window()` (`native.py`); possible when the
  panes collapse to one per window (bounded input, no arrival times, no COUNT / WHEN /
  percentile in the trigger) and the window is GLOBAL, FIXED, SLIDING or SESSIONS.
- **engine**: sqlflow's engine over hash buckets of keys (`engine_path.py`); possible when the
  engine has every aggregate of the SELECT.

When both are possible, the faster one for the window kind wins, as measured by
`benchmarks/bounded.py` on a 2-core machine (results in `benchmarks/results/bounded.json`):
`MEASURED` below is that file's summary, rows per second, and `PREFERRED` follows from it.
SLIDING windows also depend on their fan-out, the windows per row (size / period): both paths
do work per row and window, but Spark's `window()` expands every row into one candidate per
window through generated code that grows with the fan-out. From `ENGINE_FROM_FANOUT` windows per
row on (the file's `sliding_engine_from_fanout`, measured on the rows of `FANOUT`), the engine
runs them. tests/spark/test_planner_figures.py ties these figures to the file.

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

from .. import ast
from ..engine import describe
from ..errors import SqlflowUnsupportedError
from .native_rewrite import why_not_native
from .windowed_select import WindowedSelect

#: rows/s of each path per window kind, from benchmarks/results/bounded.json (2 cores, 2M rows,
#: 10,000 keys, default trigger; see the benchmark's docstring)
MEASURED = {
    "GLOBAL": {"native": 2.61e6, "engine": 0.60e6},
    "FIXED": {"native": 1.40e6, "engine": 0.58e6},
    "SLIDING": {"native": 1.98e6, "engine": 0.64e6},
    "SESSIONS": {"native": 0.65e6, "engine": 1.16e6},
}

#: the faster path per window kind (both possible)
PREFERRED = {kind: max(paths, key=lambda path: paths[path]) for kind, paths in MEASURED.items()}

#: rows/s of each path for SLIDING windows of N windows per row, from the same file's `fanout`
#: (2 cores, 20,000 rows, 100 keys)
FANOUT = {
    2: {"native": 2380.0, "engine": 3370.0},
    10: {"native": 5790.0, "engine": 4120.0},
    60: {"native": 1940.0, "engine": 3600.0},
    360: {"native": 367.0, "engine": 1700.0},
}

#: from this many windows per row on, SLIDING windows run on the engine (the file's
#: `sliding_engine_from_fanout`: the engine was faster at every measured fan-out from it on)
ENGINE_FROM_FANOUT = 60


def fanout(window: object) -> int:
    """Windows per row of a SLIDING window (ceil(size / period)); 1 for other windows.

    >>> from sqlflow import ast
    >>> fanout(ast.Sliding(ast.Duration(86_400_000_000), ast.Duration(10_000_000)))
    8640
    """
    if isinstance(window, ast.Sliding):
        return -(-window.size.micros // window.period.micros)
    return 1


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


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f}M rows/s" if x >= 1e5 else f"{x / 1e3:.1f}k rows/s"


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
    kind = ws.window_kind
    windows = fanout(ws.window)
    if kind == "SLIDING" and windows >= ENGINE_FROM_FANOUT:
        at = max(n for n in FANOUT if n <= windows)
        return Choice("engine", f"SLIDING windows with {windows:,} windows per row run faster on the engine "
                                f"(measured at {at:,} windows per row: native {_rate(FANOUT[at]['native'])}, "
                                f"engine {_rate(FANOUT[at]['engine'])}; the engine from {ENGINE_FROM_FANOUT:,} on)",
                      mode, None)
    measured = MEASURED.get(kind)
    preferred = PREFERRED.get(kind, "native")
    speeds = (f"measured: native {_rate(measured['native'])}, engine {_rate(measured['engine'])}"
              if measured else "not measured")
    if kind == "SLIDING":  # below ENGINE_FROM_FANOUT
        return Choice("native", f"SLIDING windows with {windows:,} windows per row run faster natively ({speeds}; "
                                f"the engine from {ENGINE_FROM_FANOUT:,} windows per row on)", None, None)
    if preferred == "native":
        return Choice("native", f"{kind} windows run faster natively ({speeds})", None, None)
    return Choice("engine", f"{kind} windows run faster on the engine ({speeds})", mode, None)
