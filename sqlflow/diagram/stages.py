"""A pipeline's stages side by side, on one processing-time axis (docs/pipelines.md).

A windowed SELECT over a replayed windowed stage reads the stage's panes as they are emitted
(docs/semantics.md, 1.3). `sqlflow.plot` draws such a result as one diagram per stage, left to
right, sharing both axes: event time across (a pane's `output_time` is an event time too) and
processing time up. In each stage that a later one reads, its **holds** are drawn (a pending
pane holds the stage's output watermark at its output time, from the arrival of its first timely
element until its emission: a vertical bar at that output time over that span of processing
time) with the **output watermark** they make (a wide band under the input watermark's line, so
both show where they are equal; with many holds, only those that keep it back are drawn); the
next stage's panel draws that same line as its watermark, and the stage's panes as its input
points (each at its output time, arriving at its emit time).
"""
from __future__ import annotations

import numpy as np

from ..errors import SqlflowError
from .frames import days, pyplot, watermark_steps
from .legend import add_figure_legend
from .pane_diagram import Diagram, extent, watermark_line

#: the colour of a stage's output watermark, in its own panel and as the next stage's watermark
OUTPUT_WATERMARK = "tab:purple"
HOLD = "darkorange"
#: the output watermark's width in points: a band the (input) watermark's line runs inside
OUTPUT_WIDTH = 6.0
#: above this many holds, only those that keep the output watermark back are drawn
MANY_HOLDS = 100


def chain_of(result) -> list | None:
    """The stages of the pipeline whose last stage made `result` (a `sqlflow.sql` DataFrame), first
    stage first; None when no windowed SELECT of its statement reads a replayed stage."""
    from ..spark.report import ATTRIBUTE

    report = getattr(result, ATTRIBUTE, None)
    if report is None:
        return None
    last = next((s for s in reversed(report.stages) if getattr(s, "reads", None) is not None), None)
    if last is None or last.pane_frame is None:
        return None
    chain = [last]
    while chain[0].reads is not None:
        chain.insert(0, chain[0].reads)
    return chain


def plot_stages(chain: list, *, choose, first_inputs, title, limit: int):
    """Draw `chain` (report Stages, first first): the figure, its Axes (one per stage) and notes.

    `choose(panes, n)` picks the keys and value of stage n's panes (a Spark DataFrame) as
    `__init__._choose` does; `first_inputs(chosen)` gives the first stage's input Points."""
    plt = pyplot()
    notes: list[str] = []
    frames = [stage.pane_frame() for stage in chain]
    chosen = [choose(frame, n) for n, frame in enumerate(frames)]
    for n, pick in enumerate(chosen):
        notes += [f"stage {n + 1}: {note}" for note in pick.notes]
    inputs = [first_inputs(chosen[0])] + [_pane_points(frame, limit, n, notes) for n, frame in
                                           enumerate(frames[:-1], start=1)]
    holds = [_holds(stage.holds, limit) for stage in chain[:-1]] + [None]
    steps = [watermark_steps(stage.timeline, limit) for stage in chain]

    # one extent for every panel: they share event time and processing time
    xs, ys = [], []
    for pick in chosen:
        xs += [days(pick.panes["window_start"]), days(pick.panes["window_end"])]
        ys.append(days(pick.panes["emit_time"]))
    for points in inputs:
        if points is not None:
            xs.append(points.event)
            if points.arrival is not None:
                ys.append(points.arrival)
    for hold in holds:
        if hold is not None:
            xs.append(hold[2])
            ys += [hold[0], hold[1]]
    ys += [s[0] for s in steps if s is not None]
    x_lo, x_hi = extent(np.concatenate(xs))
    y_lo, y_hi = extent(np.concatenate(ys))
    limits = (x_lo, x_hi, y_lo, y_hi)

    band = 0.45  # inches under the diagrams for the note
    count = len(chain)
    width, height = 6.6 * count, 6.0
    fig, grid = plt.subplots(1, count, figsize=(width, height + band), squeeze=False, sharex=True, sharey=True)
    axes = list(grid.flat)
    diagrams = []
    for n, (stage, pick, ax) in enumerate(zip(chain, chosen, axes)):
        if holds[n] is not None:
            _draw_holds(ax, holds[n], steps[n], steps[n + 1], limits, notes, n + 1)
        if n == 0:
            style, label = ("tab:green", "watermark"), "input"
        else:
            style = (OUTPUT_WATERMARK, f"watermark: stage {n}'s output watermark")
            label = f"stage {n}'s panes (at output_time, arriving at emit_time)"
        keys = pick.shown or [None]
        colours = {k: f"C{i % 10}" for i, k in enumerate(keys)} if len(keys) > 1 else None
        diagram = Diagram.build(pick.panes, value=pick.value, keys=pick.keys)
        diagram.draw(ax, inputs[n], steps[n], colours=colours, limits=limits, watermark=style, input_label=label)
        shown = f"{len(pick.panes)} pane{'s' if len(pick.panes) != 1 else ''}"
        if pick.keys and len(pick.shown) == 1:
            shown = f"{pick.describe(pick.shown[0])}, {shown}"
        ax.set_title(f"stage {n + 1}: {stage.label.removeprefix('the ')} ({shown})", fontsize=9)
        if n:
            ax.set_ylabel("")
        diagrams.append(diagram)
    if title:
        fig.suptitle(title)
    below = band + add_figure_legend(fig, [d.handles for d in diagrams], bottom=band)
    fig.tight_layout(rect=(0, below / fig.get_figheight(), 1, 1))
    hidden = sum(d.place_labels(ax) for d, ax in zip(diagrams, axes))
    if hidden:
        notes.append(f"{hidden} label{'s' if hidden != 1 else ''} left out where "
                     f"{'they' if hidden != 1 else 'it'} would overlap")
    return fig, axes, notes


def _holds(holds, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(since, until, output time) of a stage's holds as date numbers; None without any."""
    if holds is None:
        return None
    frame = holds.where("since IS NOT NULL AND value IS NOT NULL AND since < until").limit(limit).toPandas()
    if frame.empty:
        return None
    return days(frame["since"]), days(frame["until"]), days(frame["value"])


def _draw_holds(ax, holds, input_steps, output_steps, limits, notes: list[str], stage: int) -> None:
    """Each hold as a bar at its output time over the processing time it is held; the output
    watermark they make (the next stage's watermark) as a wide band under the input watermark, so
    both show where they coincide. Beyond MANY_HOLDS holds (every key's), only those that keep the
    output watermark below the input watermark are drawn, and a note says how many."""
    from matplotlib.collections import LineCollection

    since, until, value = holds
    x_lo, x_hi, _, y_hi = limits
    inside = (value >= x_lo) & (value <= x_hi)
    if inside.sum() > MANY_HOLDS and output_steps is not None and input_steps is not None:
        binding = _binding(holds, input_steps, output_steps)
        notes.append(f"stage {stage}: {int((inside & binding).sum()):,} of {int(inside.sum()):,} holds drawn "
                     "(those that keep its output watermark behind its watermark)")
        inside &= binding
        label = "hold keeping the output watermark back: a pending pane's output time (any key)" \
            if inside.any() else "_nolegend_"
    else:
        label = "hold: a pending pane's output time (any key)"
    segments = np.stack([np.column_stack([value[inside], since[inside]]),
                         np.column_stack([value[inside], until[inside]])], axis=1)
    bars = LineCollection(list(segments), colors=HOLD, linewidths=2.0, alpha=0.8, zorder=4, label=label)
    bars.set_gid("hold")
    ax.add_collection(bars)
    if output_steps is not None and len(output_steps[0]):
        wx, wy = watermark_line(output_steps, x_lo, x_hi, y_hi)
        ax.plot(wx, wy, color=OUTPUT_WATERMARK, linewidth=OUTPUT_WIDTH, alpha=0.4, zorder=3.9,
                solid_capstyle="butt", label="output watermark (wide: the watermark runs inside it where equal)",
                gid="output-watermark")


def _binding(holds, input_steps, output_steps) -> np.ndarray:
    """Which holds keep the output watermark behind the input watermark: at some step of the
    output watermark inside the hold's span, the output watermark is the hold's output time and
    below the input watermark (docs/semantics.md, 1.3)."""
    since, until, value = holds
    proc, ow = output_steps
    w = input_steps[1][np.clip(np.searchsorted(input_steps[0], proc, side="right") - 1, 0, None)]
    w = np.where(np.searchsorted(input_steps[0], proc, side="right") == 0, -np.inf, w)
    held = ow < w
    proc, ow = proc[held], ow[held]
    tol = 1e-6 / 86400  # a microsecond in days
    out = np.zeros(len(value), bool)
    for lo in range(0, len(value), 512):  # (holds x held steps) in blocks: bounded memory
        hi = lo + 512
        at = (since[lo:hi, None] <= proc[None, :]) & (proc[None, :] < until[lo:hi, None]) & \
            (np.abs(ow[None, :] - value[lo:hi, None]) <= tol)
        out[lo:hi] = at.any(axis=1)
    return out


def _pane_points(frame, limit: int, n: int, notes: list[str]):
    """Stage n's panes (every key's) as the next stage's input: at their output time, arriving at
    their emit time; no labels (the next stage's panes carry the values)."""
    from .frames import Points

    if "output_time" not in frame.columns or "emit_time" not in frame.columns:
        raise SqlflowError(f"stage {n}'s panes have no output_time or emit_time to draw as the next stage's input",
                           clause="PLOT")
    rows = frame.select("output_time", "emit_time").limit(limit + 1).toPandas()
    if len(rows) > limit:
        notes.append(f"only the first {limit:,} panes of stage {n} are drawn as stage {n + 1}'s input (limit={limit})")
        rows = rows.head(limit)
    return Points(days(rows["output_time"]), days(rows["emit_time"]), [""] * len(rows))
