"""One legend for a figure's diagrams, under them, outside every Axes: it covers no data.

It lists what the drawing encodes (a pane's timing by its edge, a retraction by hatching, input
points, watermarks, holds), each entry once however many diagrams use it, in as many columns as
the figure's width holds.
"""
from __future__ import annotations

from .labels import renderer_of

#: the legend's gid (tests find it by this)
GID = "plot-legend"


def add_figure_legend(fig, handle_lists: list[list], *, bottom: float):
    """A legend of the entries of `handle_lists` (one list per diagram) at the bottom of `fig`,
    `bottom` inches above its lower edge, the figure grown by the legend's height; returns the
    legend's height in inches (0 without entries)."""
    handles, seen = [], set()
    for handle in (h for hs in handle_lists for h in hs):
        if handle.get_label() not in seen:
            seen.add(handle.get_label())
            handles.append(handle)
    if not handles:
        return 0.0
    renderer = renderer_of(fig)
    width = fig.get_figwidth() * fig.dpi
    for ncol in range(min(len(handles), 4), 0, -1):
        legend = fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False,
                            bbox_to_anchor=(0.5, 0.0))
        box = legend.get_window_extent(renderer)
        if box.width <= 0.98 * width or ncol == 1:
            break
        legend.remove()
    inches = box.height / fig.dpi + 0.05
    old = fig.get_figheight()
    fig.set_figheight(old + inches)
    legend.set_bbox_to_anchor((0.5, bottom / fig.get_figheight()), transform=fig.transFigure)
    legend.set_gid(GID)
    return inches
