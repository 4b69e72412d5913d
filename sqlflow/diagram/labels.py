"""Value labels that never collide.

Each label has a few places near what it labels, best first. Labels are placed most important
first (final values, then earlier panes, retractions, input values), each at its first place
whose extent, measured by matplotlib's renderer, lies inside the axes and overlaps neither a
label already placed nor an obstacle (input points, the legend, the "after all input" note).
A label with no free place is left out, and counted: the figure says how many.

The layout must be settled first (figure size, subplots): labels are sized in points, data in
axes fractions, so a placement holds for the figure as drawn and saved (at any dpi).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: points of empty space kept around every label
PAD = 1.0


@dataclass
class Label:
    """A label and its places: (x, y) in data coordinates, an offset in points, alignment."""

    text: str
    gid: str
    rank: tuple
    places: list[tuple[float, float, float, float, str, str]]
    style: dict = field(default_factory=dict)


def box_places(x0: float, x1: float, y0: float, y1: float, *, middle_first: bool) -> list:
    """Places inside a box (a pane or a retraction): its top, its middle, its bottom, each at the
    centre, then a quarter in from either side; a pane's label may finally sit just above it."""
    xs = [(x0 + x1) / 2, x0 + (x1 - x0) / 4, x1 - (x1 - x0) / 4]
    top = [(x, y1, 0.0, -PAD, "center", "top") for x in xs]
    middle = [(x, (y0 + y1) / 2, 0.0, 0.0, "center", "center") for x in xs]
    bottom = [(x, y0, 0.0, PAD, "center", "bottom") for x in xs]
    if middle_first:
        return middle + top + bottom
    return top + middle + [(xs[0], y1, 0.0, PAD, "center", "bottom")]


def point_places(x: float, y: float) -> list:
    """Places around a point: right and up (the usual), right and down, left, above, below."""
    return [(x, y, 4.0, 2.0, "left", "bottom"), (x, y, 4.0, -2.0, "left", "top"),
            (x, y, -4.0, 2.0, "right", "bottom"), (x, y, -4.0, -2.0, "right", "top"),
            (x, y, 0.0, 5.0, "center", "bottom"), (x, y, 0.0, -5.0, "center", "top")]


def renderer_of(fig):
    """The renderer that will draw `fig` (Agg and the inline backend have one at hand)."""
    get = getattr(fig.canvas, "get_renderer", None)
    if get is not None:
        return get()
    from matplotlib.backend_bases import _get_renderer  # type: ignore[attr-defined]  # matplotlib's own way, other canvases

    return _get_renderer(fig)


def marker_boxes(ax, x: np.ndarray, y: np.ndarray, size_points2: float, margin: float = 0.0) -> np.ndarray:
    """Display boxes (x0, y0, x1, y1) of scatter markers of area `size_points2` at (x, y), grown
    by `margin` points."""
    if not len(x):
        return np.empty((0, 4))
    xy = ax.transData.transform(np.column_stack([x, y]))
    r = (np.sqrt(size_points2) / 2 + margin) * ax.figure.dpi / 72
    return np.column_stack([xy[:, 0] - r, xy[:, 1] - r, xy[:, 0] + r, xy[:, 1] + r])


def artist_boxes(artists, renderer) -> np.ndarray:
    boxes = [a.get_window_extent(renderer) for a in artists if a is not None and a.get_visible()]
    return np.array([[b.x0, b.y0, b.x1, b.y1] for b in boxes]).reshape(-1, 4)


def place(ax, labels: list[Label], obstacles: np.ndarray) -> int:
    """Add the labels that fit to `ax` (annotations with their gid, in the order given); the
    number left out.

    Labels are placed in the order of their rank. Each is measured once by the renderer; its box
    at each place follows from its anchor, offset and alignment, as matplotlib draws it."""
    renderer = renderer_of(ax.figure)
    frame = ax.get_window_extent(renderer)
    scale = ax.figure.dpi / 72  # pixels per point
    pad = PAD * scale
    boxes = np.asarray(obstacles, dtype=float).reshape(-1, 4)
    texts = []
    for label in labels:
        x, y, dx, dy, ha, va = label.places[0]
        text = ax.annotate(label.text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                           annotation_clip=False, **label.style)
        text.set_gid(label.gid)
        texts.append(text)
    hidden = 0
    for n in sorted(range(len(labels)), key=lambda n: labels[n].rank):
        text = texts[n]
        places = [p for p in labels[n].places if np.isfinite(p[0]) and np.isfinite(p[1])]
        if not places:  # nowhere to put it
            text.remove()
            hidden += 1
            continue
        measured = text.get_window_extent(renderer)
        anchors = ax.transData.transform(np.array([(p[0], p[1]) for p in places], dtype=float).reshape(-1, 2))
        for (px, py), (x, y, dx, dy, ha, va) in zip(anchors, places):
            x0 = px + dx * scale - {"left": 0.0, "center": measured.width / 2, "right": measured.width}[ha]
            y0 = py + dy * scale - {"bottom": 0.0, "center": measured.height / 2, "top": measured.height}[va]
            x1, y1 = x0 + measured.width, y0 + measured.height
            box = np.array([x0 - pad, y0 - pad, x1 + pad, y1 + pad])
            if x0 >= frame.x0 and x1 <= frame.x1 and y0 >= frame.y0 and y1 <= frame.y1 \
                    and not _overlaps_any(box, boxes):
                text.xy = (x, y)
                text.set_position((dx, dy))
                text.set_horizontalalignment(ha)
                text.set_verticalalignment(va)
                boxes = np.vstack([boxes, box])
                break
        else:
            text.remove()
            hidden += 1
    return hidden


def _overlaps_any(box: np.ndarray, boxes: np.ndarray) -> bool:
    if not len(boxes):
        return False
    return bool(np.any((box[0] < boxes[:, 2]) & (boxes[:, 0] < box[2]) &
                       (box[1] < boxes[:, 3]) & (boxes[:, 1] < box[3])))
