"""The typed, immutable AST of sqlflow's clauses: WINDOW, TRIGGER, ALLOWED LATENESS, EMIT and
the source WATERMARK clause.

Class names match the grammar rules in `grammar/sqlflow.lark` (`repeat_until` -> `RepeatUntil`).
The SQL around the clauses stays a sqlglot tree; SQL expressions embedded in a clause
(`WHEN(...)`, `SESSIONS(GAP <expr>)`) are kept as canonical Spark SQL text in `SqlExpr`, so this
module, and the engine that reads it on Spark executors, never imports sqlglot or lark.

Every node has an optional `pos` (line, column in the query text) that is not part of equality,
so parse(print(ast)) == ast holds while errors can still point at the source.

>>> Repeat(Watermark()) == Repeat(Watermark(pos=Position(3, 9)))
True
>>> default_trigger()
Repeat(trigger=Watermark())
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

from .time import POS_INF, format_duration


@dataclass(frozen=True)
class Position:
    """1-based line and column of a node in the query text."""

    line: int
    column: int


def _pos() -> Position | None:
    return field(default=None, compare=False, repr=False)


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Duration:
    """A length of time in microseconds (written `30m`, `500ms` or `INTERVAL 5 MINUTES`)."""

    micros: int
    pos: Position | None = _pos()

    def __str__(self) -> str:
        return format_duration(self.micros)


@dataclass(frozen=True)
class SqlExpr:
    """A Spark SQL expression over the input row, as canonical Spark SQL text."""

    sql: str
    pos: Position | None = _pos()


#: Literal argument of a custom window function.
Literal = Union[int, float, str, bool, None, Duration]


# --------------------------------------------------------------------------- window functions


@dataclass(frozen=True)
class Global:
    """One window covering all of event time."""

    pos: Position | None = _pos()


@dataclass(frozen=True)
class Fixed:
    """Tumbling windows [k*size + offset, (k+1)*size + offset)."""

    size: Duration
    offset: Duration = Duration(0)
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Sliding:
    """Windows of `size` starting every `period` (at offset + k*period); an element is in size/period of them."""

    size: Duration
    period: Duration
    offset: Duration = Duration(0)
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Sessions:
    """Each element opens [t, t + gap); overlapping windows merge transitively.

    `gap` is a Duration, or a SqlExpr computed per row (like Spark's session_window).
    """

    gap: Union[Duration, SqlExpr]
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Cumulate:
    """Flink's cumulating windows: within each `size` period, windows [s, s+step), [s, s+2*step), ..., [s, s+size)."""

    step: Duration
    size: Duration
    offset: Duration = Duration(0)
    pos: Position | None = _pos()


@dataclass(frozen=True)
class CustomWindow:
    """A window function registered by name with `sqlflow.register_window_fn`."""

    name: str
    args: tuple[Literal, ...] = ()
    pos: Position | None = _pos()


WindowFn = Union[Global, Fixed, Sliding, Sessions, Cumulate, CustomWindow]


class TimeDomain(enum.Enum):
    """Which time a window reads (`WINDOW <fn> ON PROCESSING TIME`): the three times of the Flink
    time design draft (docs/semantics.md, 10).

    EVENT TIME, the default, is a column of the row (ON <column>, or the source's WATERMARK
    column) under the source's watermark. PROCESSING TIME (the note's operator time) is when the
    window operator processes the row, and the operator's clock fires windows. INGESTION TIME is
    when the row entered the first stage, assigned once and kept downstream as its event time,
    under the perfect watermark of timestamps that only grow.
    """

    EVENT_TIME = "EVENT TIME"
    PROCESSING_TIME = "PROCESSING TIME"
    INGESTION_TIME = "INGESTION TIME"


@dataclass(frozen=True)
class WindowClause:
    """`WINDOW <fn> [ON <column> | ON <time domain>]`; without ON, the event time is the source's
    WATERMARK column.

    >>> WindowClause(Global(), domain=TimeDomain.PROCESSING_TIME).domain.value
    'PROCESSING TIME'
    """

    fn: WindowFn
    on: str | None = None
    pos: Position | None = _pos()
    on_pos: Position | None = _pos()  # where the ON column (or time domain) is written
    domain: TimeDomain = TimeDomain.EVENT_TIME


# --------------------------------------------------------------------------- triggers


@dataclass(frozen=True)
class Watermark:
    """Fires when the watermark reaches the window's end."""

    pos: Position | None = _pos()


@dataclass(frozen=True)
class Period:
    """Fires once, at the first processing-time boundary k * `period` + `offset` (aligned to the
    epoch, shifted by the offset: Beam's alignedTo) at or after the arrival of the first element
    it sees since it started (the paper's AtPeriod).

    An element arriving exactly on a boundary fires at that boundary, in that pane; one arriving
    just after waits for the next. In REPEAT(PERIOD d) the next firing is armed by the next
    element after a firing, so an idle window emits nothing. Bounded data without ARRIVAL has no
    processing time: there it never fires.
    """

    period: Duration
    offset: Duration = Duration(0)
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Delay:
    """Fires `delay` of processing time after the first element it sees."""

    delay: Duration
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Count:
    """Fires once `n` elements have arrived since it started."""

    n: int
    pos: Position | None = _pos()


@dataclass(frozen=True)
class WatermarkPercentile:
    """Fires once when the window is `percentile`% complete: the paper's percentile watermark
    trigger (section 3.3), which counts a window complete once a fraction p of its input has
    arrived instead of all of it.

    `percentile` is p in (0, 100]: the trigger fires at the first evaluation where at least
    ceil(p/100 * N) of the window's N elements have arrived, N counting every row assigned to the
    window (for sessions, to its final session) over the whole recorded input, late rows included
    (docs/semantics.md 3.4). 100 is the watermark itself (runs as `Watermark`). Below 100 it needs
    recorded data: on a live stream N is unknown.
    """

    percentile: float
    pos: Position | None = _pos()


@dataclass(frozen=True)
class When:
    """Fires when an element arrives for which the predicate is true (a punctuation)."""

    predicate: SqlExpr
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Repeat:
    """Fires whenever `trigger` fires, restarting it after each firing; never finishes."""

    trigger: "Trigger"
    pos: Position | None = _pos()


@dataclass(frozen=True)
class RepeatUntil:
    """Like Repeat(trigger), until `until` fires: then fires a last time and finishes."""

    trigger: "Trigger"
    until: "Trigger"
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Sequence:
    """Runs each trigger in turn until it finishes; finishes with the last."""

    triggers: tuple["Trigger", ...]
    pos: Position | None = _pos()


@dataclass(frozen=True)
class FirstOf:
    """Fires when any child fires, then finishes."""

    triggers: tuple["Trigger", ...]
    pos: Position | None = _pos()


@dataclass(frozen=True)
class AllOf:
    """Fires when every child has fired, then finishes."""

    triggers: tuple["Trigger", ...]
    pos: Position | None = _pos()


@dataclass(frozen=True)
class WatermarkEarlyLate:
    """Sugar: `WATERMARK EARLY e LATE l` is SEQUENCE(REPEAT_UNTIL(e, WATERMARK), REPEAT(l)).

    Without EARLY there are no early firings; without LATE, late panes fire as with the
    default trigger (LATE WATERMARK: one pane per instant with late data).
    """

    early: "Trigger | None" = None
    late: "Trigger | None" = None
    pos: Position | None = _pos()

    def desugar(self) -> "Trigger":
        late = Repeat(self.late if self.late is not None else Watermark())
        if self.early is None:
            return Sequence((Watermark(), late))
        return Sequence((RepeatUntil(self.early, Watermark()), late))


Trigger = Union[
    Watermark, Period, Delay, Count, WatermarkPercentile, When,
    Repeat, RepeatUntil, Sequence, FirstOf, AllOf, WatermarkEarlyLate,
]


def default_trigger() -> Trigger:
    """No TRIGGER clause means REPEAT(WATERMARK), the paper's default."""
    return Repeat(Watermark())


def desugar(trigger: Trigger) -> Trigger:
    """The trigger with every WatermarkEarlyLate replaced by its definition."""
    if isinstance(trigger, WatermarkEarlyLate):
        return desugar(trigger.desugar())
    if isinstance(trigger, Repeat):
        return Repeat(desugar(trigger.trigger))
    if isinstance(trigger, RepeatUntil):
        return RepeatUntil(desugar(trigger.trigger), desugar(trigger.until))
    if isinstance(trigger, (Sequence, FirstOf, AllOf)):
        return type(trigger)(tuple(desugar(t) for t in trigger.triggers))
    return trigger


def walk_triggers(trigger: Trigger):
    """Pre-order traversal of a trigger tree (the order that numbers WHEN predicate columns)."""
    yield trigger
    if isinstance(trigger, Repeat):
        yield from walk_triggers(trigger.trigger)
    elif isinstance(trigger, RepeatUntil):
        yield from walk_triggers(trigger.trigger)
        yield from walk_triggers(trigger.until)
    elif isinstance(trigger, (Sequence, FirstOf, AllOf)):
        for t in trigger.triggers:
            yield from walk_triggers(t)
    elif isinstance(trigger, WatermarkEarlyLate):
        if trigger.early is not None:
            yield from walk_triggers(trigger.early)
        if trigger.late is not None:
            yield from walk_triggers(trigger.late)


# --------------------------------------------------------------------------- accumulation, lateness


class AccumulationMode(enum.Enum):
    """How the panes of one window relate (paper section 2.3)."""

    DISCARDING = "DISCARDING"
    ACCUMULATING = "ACCUMULATING"
    ACCUMULATING_AND_RETRACTING = "ACCUMULATING AND RETRACTING"

    @property
    def retracting(self) -> bool:
        return self is AccumulationMode.ACCUMULATING_AND_RETRACTING

    @property
    def accumulating(self) -> bool:
        return self is not AccumulationMode.DISCARDING


@dataclass(frozen=True)
class Emit:
    """`EMIT <mode> [ON TIME ALWAYS] [CLOSING ALWAYS] [REOPEN ON MERGE]`.

    By default a firing emits a pane only when the window received input since its last pane.
    `on_time_always`: the firing when the watermark passes the window's end emits its ON_TIME pane
    even without new input (Beam's OnTimeBehavior.FIRE_ALWAYS, Beam's default); `closing_always`:
    the window's closing (its trigger finishing, or its expiry) emits a last pane even without new
    input, so every window ends with an `is_last` pane (Beam's ClosingBehavior.FIRE_ALWAYS).
    `reopen_on_merge`: an element that merges sessions whose triggers all finished reopens the
    merged session, with a fresh trigger, when the watermark has not passed its end (Beam's
    AfterWatermark.onMerge); by default it is dropped as closed window (docs/semantics.md 3.3).
    """

    mode: AccumulationMode
    on_time_always: bool = False
    closing_always: bool = False
    reopen_on_merge: bool = False
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Unbounded:
    """`UNBOUNDED`: no horizon (the paper's section 2.3 without garbage collection)."""

    pos: Position | None = _pos()


@dataclass(frozen=True)
class AllowedLateness:
    """`ALLOWED LATENESS d`: window state is kept until the watermark passes end + d.
    `ALLOWED LATENESS UNBOUNDED`: until the end of input (the watermark reaches +inf)."""

    lateness: Union[Duration, Unbounded]
    pos: Position | None = _pos()

    @property
    def micros(self) -> int:
        """The lateness in microseconds; +inf when unbounded."""
        return POS_INF if isinstance(self.lateness, Unbounded) else self.lateness.micros


class OutputTime(enum.Enum):
    """Which event time a pane carries (column `output_time`): the Flink time note's options 1-4.

    END OF WINDOW, the default, is the largest instant inside the window (Beam's maxTimestamp), so
    the result stays in its own window; EARLIEST and LATEST are over the event times of the pane's
    on-time elements (docs/semantics.md, 8).
    """

    END_OF_WINDOW = "END OF WINDOW"
    START_OF_WINDOW = "START OF WINDOW"
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"

    @property
    def of_elements(self) -> bool:
        """Computed from the pane's elements (EARLIEST, LATEST), not from its window's bounds."""
        return self in (OutputTime.EARLIEST, OutputTime.LATEST)


@dataclass(frozen=True)
class OutputTimestamp:
    """`OUTPUT TIMESTAMP END OF WINDOW | START OF WINDOW | EARLIEST | LATEST`."""

    policy: OutputTime
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Windowing:
    """All sqlflow clauses of one windowed SELECT."""

    window: WindowClause
    trigger: Trigger | None = None
    allowed_lateness: AllowedLateness | None = None
    emit: Emit | None = None
    pos: Position | None = _pos()
    output: OutputTimestamp | None = None

    @property
    def effective_trigger(self) -> Trigger:
        """The trigger the engine runs: the default when absent, with sugar expanded."""
        return desugar(self.trigger if self.trigger is not None else default_trigger())

    @property
    def domain(self) -> TimeDomain:
        """The window's time domain (event time unless ON PROCESSING TIME / ON INGESTION TIME)."""
        return self.window.domain

    @property
    def mode(self) -> AccumulationMode:
        return self.emit.mode if self.emit is not None else AccumulationMode.ACCUMULATING

    @property
    def output_time(self) -> OutputTime:
        """The output timestamp policy: END OF WINDOW unless OUTPUT TIMESTAMP says otherwise."""
        return self.output.policy if self.output is not None else OutputTime.END_OF_WINDOW

    @property
    def lateness_micros(self) -> int:
        """Allowed lateness in microseconds: 0 by default, +inf for UNBOUNDED."""
        return self.allowed_lateness.micros if self.allowed_lateness is not None else 0

    @property
    def on_time_always(self) -> bool:
        return self.emit is not None and self.emit.on_time_always

    @property
    def closing_always(self) -> bool:
        return self.emit is not None and self.emit.closing_always

    @property
    def reopen_on_merge(self) -> bool:
        return self.emit is not None and self.emit.reopen_on_merge


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class BoundedDelay:
    """`DELAY OF INTERVAL ...`: watermark = max event time seen - delay, never moving backwards."""

    delay: Duration
    pos: Position | None = _pos()


@dataclass(frozen=True)
class Perfect:
    """`PERFECT`: for recorded data, the minimum event time of rows not yet arrived."""

    pos: Position | None = _pos()


@dataclass(frozen=True)
class Timeline:
    """`TIMELINE <table>`: explicit (proc_time, watermark) steps from a table or view."""

    table: str
    pos: Position | None = _pos()


@dataclass(frozen=True)
class AscendingPer:
    """`ASCENDING PER <column> [IDLE TIMEOUT d]`: event times ascend within each value of the
    column (a partition); a partition's watermark is its latest event time, the source's the
    minimum over the partitions that are not idle (no row for `idle_timeout` of processing time),
    never moving backwards (docs/semantics.md, 1.2)."""

    partition: str
    idle_timeout: Duration | None = None
    pos: Position | None = _pos()
    partition_pos: Position | None = _pos()
    idle_pos: Position | None = _pos()


WatermarkModel = Union[BoundedDelay, Perfect, Timeline, AscendingPer]


@dataclass(frozen=True)
class SourceWatermark:
    """The WATERMARK clause after a relation in FROM.

    `FROM t WATERMARK event_time DELAY OF INTERVAL 5 MINUTES` is Spark's own syntax; sqlflow adds
    `PERFECT` and `TIMELINE <table>` as alternatives to `DELAY OF`, and `ARRIVAL <column>` naming
    each row's arrival (processing) time for replaying recorded data.
    """

    event_time: str
    model: WatermarkModel
    arrival: str | None = None
    pos: Position | None = _pos()
    event_time_pos: Position | None = _pos()  # where the columns are written
    arrival_pos: Position | None = _pos()
