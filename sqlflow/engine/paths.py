"""Which implementation computes a plan's panes, and why: every such rule, in one place.

The per-key event loop (`keyloop.py`) is the definition of the semantics; the other paths compute
exactly its panes for the plans they accept (each is property-tested against it). `path_for`
names the path that runs a plan in a situation and says why; the engine dispatches on its answer,
the Spark side asks it which operator to build, and `explain` prints its `describe`.

The questions (`operator`) and their answers (`Path.name`):

- "engine", which part of the engine runs the plan: `collapse` (bounded input and a trigger that
  cannot fire before its end: one pane per window, a group-by), `schedule` (a replay whose
  trigger only follows the watermark: closed-form pane times), `micro-batch` (a stream, any
  trigger and window: `stream_step.py`) or `keyloop`;
- "spark", whether Spark's own operator gives exactly the engine's panes: `native` (the bounded
  rewrite with window() / session_window(), or Spark's streaming window aggregation) or `engine`;
- "combine", whether rows may be combined per key before the engine (partial aggregates and a
  weight): `combined` or `rows`. That needs facts only Spark has, the Spark SQL types of the
  keys and aggregate arguments (`types`: column -> type name, as DataType.simpleString() says).

And the bounded path of a windowed SELECT on Spark (the planner, `sqlflow/plan/path_choice.py`,
asks): `why_not_native_keys` (collated GROUP BY keys rule the native rewrite out) and, when both
the native rewrite and the engine can run it, `faster_bounded_path` (measured per window kind).

>>> from sqlflow import ast
>>> from sqlflow.engine.aggregates import Aggregate
>>> plan = EnginePlan(ast.Windowing(ast.WindowClause(ast.Sessions(ast.Duration(60_000_000)))),
...                   (Aggregate("sum", "v", "total"),), keys=("k",))
>>> path_for(plan)
Path(name='collapse', why='the trigger cannot fire before the end of the input: one pane per window')
>>> path_for(plan, input=STREAM).name, path_for(plan, input=REPLAY).name
('micro-batch', 'schedule')
>>> path_for(plan, operator="combine", types={"k": "string", "v": "double"})
Path(name='rows', why='SUM of a floating-point column (combining changes the order of additions)')
>>> describe(path_for(plan, input=STREAM))
'vectorised micro-batch step'
"""
from __future__ import annotations

from typing import Mapping, NamedTuple

from .. import ast
from .plan import EnginePlan
from .windows import registered_window_fn

#: situations: bounded data without arrival times, a replay of recorded arrivals, a live stream
BOUNDED, REPLAY, STREAM = "bounded", "replay", "stream"
INPUTS = (BOUNDED, REPLAY, STREAM)
OPERATORS = ("engine", "spark", "combine")

#: aggregates whose partial results combine exactly, and the engine's aggregate over the partials
COMBINING = {"count_star": "sum", "count": "sum", "sum": "sum", "min": "min", "max": "max"}
#: aggregates Spark's streaming window aggregation computes as the engine does (no order, no distinct)
SPARK_STREAMING_AGGREGATES: tuple[str, ...] = ("count_star", "count", "sum", "avg", "min", "max")

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
#: types pyarrow groups and orders as Spark does (no floating point: NaN; nothing nested; and decimals)
_ATOMIC = (*_INTEGRAL, "string", "boolean", "date", "timestamp", "timestamp_ntz")

#: how explain names each engine path
_ENGINE_TEXT = {"collapse": "vectorised (one pane per window)", "schedule": "vectorised watermark schedule",
                "micro-batch": "vectorised micro-batch step", "keyloop": "per-key event loop"}
_DEFINITION = "the definition of the semantics"


class Path(NamedTuple):
    """A path and why it was chosen (or why the faster one was not)."""

    name: str
    why: str


def describe(path: Path) -> str:
    """An engine path as `explain` prints it."""
    text = _ENGINE_TEXT[path.name]
    return f"{text} ({path.why})" if path.name == "keyloop" else text


def path_for(plan: EnginePlan, *, input: str = BOUNDED, operator: str = "engine",
             types: Mapping[str, str] | None = None, time_shift: int = 0, arrival: str | None = None) -> Path:
    """The path that computes `plan`'s panes on `input` for the question `operator` (module doc).

    Facts of the Spark side, for its questions: `types` (operator "combine"), the Spark SQL type
    name of each key and aggregate argument; `time_shift` (operator "spark" on a stream), the
    watermark column's shift (Spark's operator has none); `arrival`, a replay's arrival column
    (named in the reason)."""
    if input not in INPUTS or operator not in OPERATORS:
        raise ValueError(f"no path for input {input!r} and operator {operator!r}")
    if operator == "spark":
        why = _why_not_spark(plan, input, time_shift, arrival)
        return Path("engine", why) if why else Path("native", "Spark's operator gives exactly the engine's panes")
    if operator == "combine":
        why = _why_not_combined(plan, input, types or {})
        return Path("rows", why) if why else Path("combined", "partial aggregates combine exactly")
    return _engine_path(plan, input)


def _engine_path(plan: EnginePlan, input: str) -> Path:
    fn = plan.window
    custom = isinstance(fn, ast.CustomWindow)
    if input == STREAM:
        if isinstance(fn, ast.CustomWindow) and _merging_custom(plan, fn):
            return Path("keyloop", "custom merging window function: its merge is Python code per key")
        if plan.windowing.reopen_on_merge:
            return Path("keyloop", "EMIT ... REOPEN ON MERGE (Beam's reopening of merged sessions)")
        return Path("micro-batch", "any trigger, one vectorised step per micro-batch")
    if custom:
        return Path("keyloop", "custom window function")
    if input == BOUNDED:
        if collapsible(plan.trigger):
            return Path("collapse", "the trigger cannot fire before the end of the input: one pane per window")
        return Path("keyloop", _DEFINITION)
    if plan.per_row_gap:
        return Path("keyloop", _DEFINITION)
    if schedule_shape(plan.windowing) is None:
        # the schedule emits panes of new input only: EMIT ... ON TIME ALWAYS / CLOSING ALWAYS
        # go to the per-key loop, as do triggers that do not only follow the watermark
        return Path("keyloop", _DEFINITION)
    return Path("schedule", "the trigger follows the watermark only: pane times in closed form")


def _merging_custom(plan: EnginePlan, fn: ast.CustomWindow) -> bool:
    """A custom window function whose windows merge (its class has `merge`, as `CustomWindows`
    says; an unknown one is the window function's error, when the engine builds it)."""
    name = fn.name.lower()
    cls = plan.custom_windows.get(name) or registered_window_fn(name)
    return callable(getattr(cls, "merge", None))


def _why_not_spark(plan: EnginePlan, input: str, time_shift: int, arrival: str | None) -> str | None:
    """Why Spark's own operator would give other panes than the engine (None: the same)."""
    fn, domain = plan.window, plan.windowing.domain
    if domain is not ast.TimeDomain.EVENT_TIME:
        if input == STREAM:
            return f"{domain.value} (Spark's watermark lags a batch behind the batch's time)"
        return f"it is on {domain.value}, whose clock only the engine follows"
    if input == REPLAY:
        named = f" (ARRIVAL {arrival})" if arrival else ""
        return f"its input is replayed{named}: panes depend on the arrival order, which only the engine follows"
    if input == BOUNDED:
        # one ON_TIME pane per window, a GROUP BY over window() / session_window(); the EMIT
        # options add nothing there (every window fires once, with all its input, and last)
        if not collapsible(plan.trigger):
            return ("its trigger can fire before the end of the input (COUNT, WHEN or WATERMARK PERCENTILE), "
                    "so a window may emit several panes")
        if isinstance(fn, ast.Cumulate):
            return "Spark has no cumulating windows"
        if isinstance(fn, ast.CustomWindow):
            return f"{fn.name} is a custom window function"
        return None
    # a stream: Spark (>= 3.4) judges a row late in batch N when its window's end <= the watermark
    # of batch N-1 and emits (append mode) the windows whose end <= the watermark of batch N:
    # Engine.advance(rows, wm_prev=W(N-1), wm_new=W(N)) for FIXED or SLIDING windows with the
    # default trigger and no allowed lateness (docs/streaming.md, "Native operator")
    if not isinstance(fn, (ast.Fixed, ast.Sliding)):
        return f"window {type(fn).__name__.upper()} (only FIXED and SLIDING are native)"
    if plan.trigger != ast.default_trigger():
        return "a trigger other than the default REPEAT(WATERMARK)"
    if plan.lateness:
        return "ALLOWED LATENESS (Spark drops a window when the watermark passes its end)"
    for agg in plan.aggregates:
        if agg.kind not in SPARK_STREAMING_AGGREGATES:
            return f"aggregate {agg.kind} (order- or distinct-dependent in Spark's streaming aggregation)"
    if time_shift:
        return "a time shift"
    if plan.output_time.of_elements:
        return (f"OUTPUT TIMESTAMP {plan.output_time.value} (over a pane's timely elements only; Spark's "
                "aggregation also takes rows behind the watermark in windows still open)")
    return None


def _why_not_combined(plan: EnginePlan, input: str, types: Mapping[str, str]) -> str | None:
    """Why rows cannot be combined per key before the engine (None: they can).

    Bounded: sessions with a static gap and a trigger that fires only at the end; rows of a key in
    one gap-aligned slice of event time always share a session (sqlflow/spark/engine_path.py).
    Replay: the same sessions, or FIXED windows (a window is its own slice), combined per slice and
    arrival period where nothing can fire between their arrivals (`arrival_combine.py`), for COUNT
    and integer SUM, MIN and MAX.
    Stream: a micro-batch over FIXED windows with a trigger that follows the watermark only (the
    default REPEAT(WATERMARK), or WATERMARK EARLY PERIOD d): no trigger counts elements or looks at
    their values, so the rows of a key and window arriving in one micro-batch get the same panes
    and the same drops (sqlflow/spark/streaming/combine.py)."""
    fn = plan.window
    if plan.n_when or plan.per_row_gap or plan.custom_windows:
        return "per-row values (WHEN, a per-row gap or a custom window) belong to single rows"
    if input == BOUNDED:
        if not isinstance(fn, ast.Sessions):
            return "only sessions combine on bounded input"
        if not collapsible(plan.trigger):
            return "the trigger can fire before the end of the input"
        if any("map<" in _type(types, k) for k in plan.keys):
            # measured on Spark 4.3: grouping a repartitioned MAP<STRING, INT> key with the slice
            # columns turned a NULL map value into 0 (tests/spark/test_differential.py's regressions)
            return "a key of a MAP type (Spark's aggregation can change its NULL values)"
    elif input == REPLAY:
        if not isinstance(fn, (ast.Sessions, ast.Fixed)):
            return "only sessions and FIXED windows combine on a replay"
        if schedule_shape(plan.windowing) is None:
            return "the trigger does not follow the watermark only, or EMIT ... ALWAYS emits without new input"
        if isinstance(fn, ast.Sessions) and plan.output_time.of_elements:
            # a group joins sessions at its first arrival, one of its rows may do so later: the
            # retraction of the session it joins is then held earlier, at an output time below the
            # merged pane's (arrival_combine.py, "Holds")
            return (f"OUTPUT TIMESTAMP {plan.output_time.value} of merging sessions (a combined group would hold "
                    "a retraction earlier than its rows do)")
    else:
        if not isinstance(fn, ast.Fixed) or watermark_shape(plan.trigger) is None:
            return "only FIXED windows with a watermark-only trigger combine on a stream"
        if not all(_atomic(_type(types, k)) for k in plan.keys):
            return "a key of a floating-point or nested type (pyarrow groups it otherwise than Spark)"
    for agg in plan.aggregates:
        if agg.kind not in COMBINING:
            return f"aggregate {agg.kind} has no exact partial"
        kind = _type(types, agg.column) if agg.column else ""
        if agg.kind == "sum" and kind in ("float", "double"):
            return "SUM of a floating-point column (combining changes the order of additions)"
        if input == BOUNDED and agg.kind == "sum" and _decimal_precision(kind) > 28:
            # a slice's partial sum is a DECIMAL(p + 10, s): below p = 28 no slice of fewer than
            # 10^10 rows can overflow it (an overflowed partial would be NULL, not an overflow)
            return "SUM of a decimal of precision above 28 (a partial sum could overflow)"
        if input == REPLAY and agg.kind != "count_star" and agg.kind != "count" and kind not in _INTEGRAL:
            return f"{agg.kind.upper()} of a non-integer column"
        if input == STREAM:
            if agg.kind == "sum" and kind not in _INTEGRAL:
                return "SUM of a non-integer column"
            if agg.kind in ("min", "max") and not _atomic(kind):
                return f"{agg.kind.upper()} of a floating-point or nested column (NaN is ordered apart)"
    return None


def _type(types: Mapping[str, str], column: str) -> str:
    return types.get(column, "").lower()


def _atomic(type_name: str) -> bool:
    return type_name.split(" collate ")[0] in _ATOMIC or type_name.startswith("decimal")


def _decimal_precision(type_name: str) -> int:
    """The precision of a "decimal(p,s)" type name (0 for other types)."""
    if not type_name.startswith("decimal("):
        return 0
    return int(type_name[len("decimal("):].split(",")[0])


def collapsible(trigger: ast.Trigger) -> bool:
    """On bounded data, this trigger cannot fire before the watermark jumps to +inf."""
    return not any(isinstance(t, (ast.Count, ast.When)) or
                   (isinstance(t, ast.WatermarkPercentile) and t.percentile < 100)
                   for t in ast.walk_triggers(ast.desugar(trigger)))


def schedule_shape(windowing: ast.Windowing):
    """`watermark_shape` of this windowing's trigger, for the replay's watermark schedule, or None
    when it needs what the schedule does not do: it emits panes of new input only, so EMIT ... ON
    TIME ALWAYS / CLOSING ALWAYS go to the per-key loop. (On bounded data without arrival times
    `collapse` stays exact for them: every window fires once, at the end, with all its input.)"""
    if windowing.on_time_always or windowing.closing_always:
        return None
    return watermark_shape(windowing.effective_trigger)


def watermark_shape(trigger: ast.Trigger):
    """('default', None) or ('early_period', (period, offset)) for a trigger that follows the
    watermark only (the default REPEAT(WATERMARK), or WATERMARK EARLY PERIOD d [OFFSET o]), else None."""
    t = ast.desugar(trigger)
    W = ast.Watermark()
    if t == ast.Repeat(W) or t == ast.Sequence((W, ast.Repeat(W))):
        return ("default", None)
    if (isinstance(t, ast.Sequence) and len(t.triggers) == 2 and t.triggers[1] == ast.Repeat(W)
            and isinstance(t.triggers[0], ast.RepeatUntil) and t.triggers[0].until == W):
        early = t.triggers[0].trigger
        if isinstance(early, ast.Repeat):  # REPEAT_UNTIL restarts its child itself: the same trigger
            early = early.trigger
        if isinstance(early, ast.Period):
            return ("early_period", (early.period.micros, early.offset.micros))
    return None


# ---------------------------------------------------------------- bounded: native rewrite or engine


def why_not_native_keys(keys: list[tuple[str, str | None]]) -> str | None:
    """Why the bounded native rewrite cannot group by these GROUP BY keys, or None: `keys` are
    (a key's SQL, the collation of a string in its type other than UTF8_BINARY, or None). Spark's
    GROUP BY shows any member of a group of collated strings, and its session_window groups them
    by bytes; the engine groups by the collation and shows the smallest member (docs/semantics.md, 7.1).

    >>> why_not_native_keys([("k", None)]) is None
    True
    >>> why_not_native_keys([("k", None), ("name", "UTF8_LCASE")])
    'GROUP BY name: keys of collation UTF8_LCASE run on the engine, which shows the smallest member of each group (Spark shows any, and its session_window groups them by bytes)'
    """
    for text, collation in keys:
        if collation is not None:
            return (f"GROUP BY {text}: keys of collation {collation} run on the engine, "
                    "which shows the smallest member of each group (Spark shows any, and its session_window "
                    "groups them by bytes)")
    return None

#
# When both the native rewrite and the engine can run a windowed SELECT on bounded data, the
# faster for its window kind wins (`faster_bounded_path`), as measured by `benchmarks/bounded.py`
# on a 2-core machine (results in `benchmarks/results/bounded.json`): `MEASURED` is that file's
# summary, rows per second, and `PREFERRED` follows from it. SLIDING windows also depend on their
# fan-out, the windows per row (size / period): both paths do work per row and window, but Spark's
# `window()` expands every row into one candidate per window through generated code that grows
# with the fan-out. From `ENGINE_FROM_FANOUT` windows per row on (the file's
# `sliding_engine_from_fanout`, measured on the rows of `FANOUT`), the engine runs them.
# tests/plan/test_path_choice.py ties these figures to the file.

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

    >>> fanout(ast.Sliding(ast.Duration(86_400_000_000), ast.Duration(10_000_000)))
    8640
    """
    if isinstance(window, ast.Sliding):
        return -(-window.size.micros // window.period.micros)
    return 1


def window_kind(window: object) -> str:
    """A window function's kind as the figures above and explain name it (CUSTOM: registered)."""
    return "CUSTOM" if isinstance(window, ast.CustomWindow) else type(window).__name__.upper()


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f}M rows/s" if x >= 1e5 else f"{x / 1e3:.1f}k rows/s"


def faster_bounded_path(window: object) -> Path:
    """"native" or "engine": the faster on bounded data for this window function, when both can
    run it, and why (the measured figures above).

    >>> faster_bounded_path(ast.Sessions(ast.Duration(60_000_000)))
    Path(name='engine', why='SESSIONS windows run faster on the engine (measured: native 0.65M rows/s, engine 1.16M rows/s)')
    """
    kind = window_kind(window)
    windows = fanout(window)
    if kind == "SLIDING" and windows >= ENGINE_FROM_FANOUT:
        at = max(n for n in FANOUT if n <= windows)
        return Path("engine", f"SLIDING windows with {windows:,} windows per row run faster on the engine "
                              f"(measured at {at:,} windows per row: native {_rate(FANOUT[at]['native'])}, "
                              f"engine {_rate(FANOUT[at]['engine'])}; the engine from {ENGINE_FROM_FANOUT:,} on)")
    measured = MEASURED.get(kind)
    preferred = PREFERRED.get(kind, "native")
    speeds = (f"measured: native {_rate(measured['native'])}, engine {_rate(measured['engine'])}"
              if measured else "not measured")
    if kind == "SLIDING":  # below ENGINE_FROM_FANOUT
        return Path("native", f"SLIDING windows with {windows:,} windows per row run faster natively ({speeds}; "
                              f"the engine from {ENGINE_FROM_FANOUT:,} windows per row on)")
    if preferred == "native":
        return Path("native", f"{kind} windows run faster natively ({speeds})")
    return Path("engine", f"{kind} windows run faster on the engine ({speeds})")
