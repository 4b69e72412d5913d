"""sqlflow.plot's layout: labels measured by matplotlib's own text extents never overlap each
other, input points or the legend; one legend of what the boxes encode sits under the diagrams,
covering none of them; a pane is never drawn under a retraction; many keys become small
multiples with a note of what was left out; the default label is the query's first aggregate."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import sqlflow
from sqlflow.errors import SqlflowError

LABELS = ("pane-label", "retraction-label", "input-label")
SECOND = 1_000_000


def label_boxes(ax):
    """(text, display box) of every label drawn, measured by the figure's renderer."""
    renderer = ax.figure.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts
            if t.get_gid() in LABELS and t.get_visible()]


def obstacle_boxes(ax):
    """Input points (their markers' extents), the legend and the "after all input" note."""
    renderer = ax.figure.canvas.get_renderer()
    out = []
    for points in [c for c in ax.collections if c.get_gid() == "inputs"]:
        r = np.sqrt(points.get_sizes()[0]) / 2 * ax.figure.dpi / 72
        for x, y in ax.transData.transform(points.get_offsets()):
            out.append(("input point", (x - r, y - r, x + r, y + r)))
    if ax.get_legend() is not None:
        b = ax.get_legend().get_window_extent(renderer)
        out.append(("legend", (b.x0, b.y0, b.x1, b.y1)))
    for t in ax.texts:
        if t.get_gid() == "after-all-input-label":
            b = t.get_window_extent(renderer)
            out.append(("after all input", (b.x0, b.y0, b.x1, b.y1)))
    return out


def collisions(ax) -> list[tuple[str, str]]:
    """Pairs (label, label or obstacle) whose extents intersect, and labels outside the axes."""
    def meets(a, b):
        return min(a[2], b[2]) - max(a[0], b[0]) > 0 and min(a[3], b[3]) - max(a[1], b[1]) > 0

    labels = [(text, (b.x0, b.y0, b.x1, b.y1)) for text, b in label_boxes(ax)]
    frame = ax.get_window_extent(ax.figure.canvas.get_renderer())
    out = tick_collisions(ax)
    out += [(text, "the axes' edge") for text, b in labels
           if b[0] < frame.x0 - 0.5 or b[2] > frame.x1 + 0.5 or b[1] < frame.y0 - 0.5 or b[3] > frame.y1 + 0.5]
    for i, (text, box) in enumerate(labels):
        out += [(text, other) for other, obox in labels[i + 1:] if meets(box, obox)]
        out += [(text, other) for other, obox in obstacle_boxes(ax) if meets(box, obox)]
    return out


def tick_collisions(ax) -> list[tuple[str, str]]:
    """Pairs of tick labels of one axis whose extents intersect."""
    renderer = ax.figure.canvas.get_renderer()
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        ticks = [(t.get_text(), t.get_window_extent(renderer)) for t in axis.get_ticklabels()
                 if t.get_visible() and t.get_text()]
        out += [(a, b) for i, (a, ab) in enumerate(ticks) for b, bb in ticks[i + 1:]
                if min(ab.x1, bb.x1) > max(ab.x0, bb.x0) and min(ab.y1, bb.y1) > max(ab.y0, bb.y0)]
    return out


def figure_legend(fig):
    """The figure's one legend (under the diagrams) and its entries."""
    (legend,) = [lg for lg in fig.legends if lg.get_gid() == "plot-legend"]
    return legend, [t.get_text() for t in legend.get_texts()]


def legend_overlaps(fig) -> list[str]:
    """What the figure's legend covers: any Axes (its frame, ticks, labels and title) or the note."""
    renderer = fig.canvas.get_renderer()
    legend, _ = figure_legend(fig)
    box = legend.get_window_extent(renderer)
    others = [(a.get_title() or "axes", a.get_tightbbox(renderer)) for a in fig.axes]
    others += [("note", t.get_window_extent(renderer)) for t in fig.texts if t.get_gid() == "plot-note"]
    return [name for name, b in others
            if min(box.x1, b.x1) > max(box.x0, b.x0) and min(box.y1, b.y1) > max(box.y0, b.y0)]


def covered_panes(ax) -> dict[str, float]:
    """Pane label -> the fraction of its box's area under a patch drawn above it (a retraction's
    hatching), measured in display pixels; only panes with some part covered."""
    renderer = ax.figure.canvas.get_renderer()
    patches = [(p, p.get_window_extent(renderer)) for p in ax.patches if p.get_gid() in ("pane", "retraction")]
    labels = {}
    for t in ax.texts:
        if t.get_gid() == "pane-label":
            b = t.get_window_extent(renderer)
            labels[t.get_text()] = ((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2)
    out = {}
    for pane, box in patches:
        if pane.get_gid() != "pane" or box.width * box.height == 0:
            continue
        name = next((text for text, (x, y) in labels.items() if box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1),
                    f"pane at {box.x0:.0f},{box.y0:.0f}")
        xs = np.linspace(box.x0 + 0.5, box.x1 - 0.5, 60)
        ys = np.linspace(box.y0 + 0.5, box.y1 - 0.5, 20)
        gx, gy = np.meshgrid(xs, ys)
        under = np.zeros(gx.shape, bool)
        for other, obox in patches:
            if other is not pane and other.get_zorder() > pane.get_zorder():
                under |= (gx > obox.x0) & (gx < obox.x1) & (gy > obox.y0) & (gy < obox.y1)
        if under.any():
            out[name] = round(float(under.mean()), 2)
    return out


def note_of(fig) -> str | None:
    notes = [t.get_text().replace("\n", " ") for t in fig.texts if t.get_gid() == "plot-note"]
    return notes[0] if notes else None


@pytest.mark.parametrize("figure", [6, 7, 8, 9, 10, 12, 13, 14])
def test_no_label_of_the_papers_figures_collides_and_none_is_left_out(engine_figure, figure):
    result, rows, timeline = engine_figure(figure)
    ax = sqlflow.plot(result, inputs=rows, watermark=timeline if figure >= 12 else None)
    assert collisions(ax) == []
    assert note_of(ax.figure) is None
    values = result.panes["total"].astype(str)
    retracted = result.panes["is_retraction"].to_numpy() if "is_retraction" in result.panes else np.zeros(len(values), bool)
    drawn = [text for text, _ in label_boxes(ax)]
    assert sorted(drawn) == sorted(list(values[~retracted]) + ["\u2212" + v for v in values[retracted]]
                                   + [str(v) for v in rows["v"]])


def test_figure_14_keeps_the_papers_look_and_its_labels_do_not_collide(engine_figure, tmp_path):
    """Figure 14 drew "39" over "-25" and "10" over an input's label: each now sits where it is
    free, inside its own box, and the figure saved at 120 dpi has the same layout."""
    result, rows, timeline = engine_figure(14)
    ax = sqlflow.plot(result, inputs=rows, watermark=timeline, title="Figure 14", path=str(tmp_path / "f14.png"))
    assert ax.figure.axes == [ax] and ax.get_title() == "Figure 14"
    assert collisions(ax) == []
    panes = {t.get_text(): t for t in ax.texts if t.get_gid() in ("pane-label", "retraction-label")}
    assert sorted(panes) == sorted(["5", "7", "10", "25", "39", "3", "12",
                                    "\u22125", "\u22127", "\u221210", "\u221225", "\u22123"])
    # every value stays inside the box it labels
    boxes = {p.get_gid(): [] for p in ax.patches}
    for p in ax.patches:
        boxes[p.get_gid()].append(p)
    renderer = ax.figure.canvas.get_renderer()
    for text, label in panes.items():
        kind = "retraction" if text.startswith("\u2212") else "pane"
        b = label.get_window_extent(renderer)
        centre = ax.transData.inverted().transform(((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2))
        assert any(r.get_x() <= centre[0] <= r.get_x() + r.get_width() and
                   r.get_y() <= centre[1] <= r.get_y() + r.get_height() for r in boxes[kind]), text
    ax.figure.set_dpi(120)  # the dpi `path=` saves at
    assert collisions(ax) == []


@pytest.mark.parametrize("with_inputs", [False, True])
def test_figure_14s_late_pane_is_drawn_above_the_retractions_it_replaces(engine_figure, with_inputs):
    """The LATE 39 (the sessions merged at 12:08:19) spans the processing time of the retractions
    of 5 and 25 emitted with it: drawn under their hatching, most of its box was hidden. Panes are
    now drawn above retractions, and the legend names each edge style and the hatching."""
    result, rows, timeline = engine_figure(14)
    ax = sqlflow.plot(result, inputs=rows if with_inputs else None, watermark=timeline if with_inputs else None)
    assert covered_panes(ax) == {}
    names = figure_legend(ax.figure)[1]
    assert names == (["input", "watermark"] if with_inputs else []) + [
        "EARLY pane: its value at the top", "ON_TIME pane: its value at the top", "LATE pane: its value at the top",
        "retraction of an earlier pane (\u2212value)"]
    assert legend_overlaps(ax.figure) == [] and collisions(ax) == []
    # before, the retractions' hatching covered 82% of the 39 box (and 92% of the 25 box)
    (late,) = [p for p in ax.patches if p.get_gid() == "pane" and p.get_linestyle() == "--"]
    assert all(p.get_zorder() < late.get_zorder() for p in ax.patches if p.get_gid() == "retraction")


def clickstream_panes(users: int, sessions: int = 3, panes_per_session: int = 12) -> pd.DataFrame:
    """Sessions with an early pane a minute and a retraction before each refinement, like the
    README's clickstream; user i has i + 1 sessions' worth of panes at most."""
    rows = []
    t0 = 1_709_280_000 * SECOND  # 2024-03-01 08:00
    for u in range(users):
        for s in range(1 + u % sessions):
            start = t0 + (u * 7 + s * 50) * 60 * SECOND
            for p in range(panes_per_session - u % 4):
                end = start + (10 + p) * 60 * SECOND
                emit = start + (p + 1) * 60 * SECOND
                if p:
                    rows.append((f"u{u:03d}", p, 0.0, start, end - 60 * SECOND, p - 1, "EARLY", False, emit, True))
                rows.append((f"u{u:03d}", p + 1, 0.0, start, end, p, "EARLY", False, emit, False))
    return pd.DataFrame(rows, columns=["user_id", "clicks", "revenue", "window_start", "window_end", "pane_index",
                                       "pane_timing", "is_last", "emit_time", "is_retraction"])


def test_many_keys_become_small_multiples_with_a_note_of_what_was_left_out():
    panes = clickstream_panes(60)
    ax = sqlflow.plot(panes)
    fig = ax.figure
    assert len(fig.axes) == 6 and ax is fig.axes[0]
    counts = panes.groupby("user_id").size().sort_values(ascending=False, kind="stable")
    assert [a.get_title() for a in fig.axes] == [f"user_id = {u} ({n} panes)" for u, n in counts.head(6).items()]
    # no legend of 60 keys: one legend, under the diagrams, of what the boxes encode
    assert all(a.get_legend() is None for a in fig.axes)
    assert figure_legend(fig)[1] == ["EARLY pane: its value at the top", "retraction of an earlier pane (\u2212value)"]
    assert legend_overlaps(fig) == []
    drawn = sum(len(label_boxes(a)) for a in fig.axes)
    left_out = len(panes[panes.user_id.isin(counts.head(6).index)]) - drawn
    assert left_out > 0
    assert note_of(fig) == ("6 of 60 user_id values drawn, those with the most panes (select=[...] picks others, "
                            f"max_keys=None draws all); {left_out} labels left out where they would overlap")
    for a in fig.axes:
        assert collisions(a) == []
    # the note is inside the figure, under the diagrams
    renderer = fig.canvas.get_renderer()
    (note,) = [t for t in fig.texts if t.get_gid() == "plot-note"]
    assert note.get_window_extent(renderer).y1 < min(a.get_tightbbox(renderer).y0 for a in fig.axes)


def test_the_default_label_is_the_first_aggregate_not_a_column_of_zeros():
    panes = clickstream_panes(1)
    ax = sqlflow.plot(panes)
    assert set(texts := [t.get_text() for t in ax.texts if t.get_gid() == "pane-label"]) <= set(map(str, panes.clicks))
    assert "0" not in texts and "0.0" not in texts
    ax = sqlflow.plot(panes, value="revenue")
    assert {t.get_text() for t in ax.texts if t.get_gid() == "pane-label"} == {"0"}


def test_select_picks_keys_and_max_keys_none_draws_all():
    panes = clickstream_panes(8)
    ax = sqlflow.plot(panes, select="u005", title="one user")
    assert ax.figure.axes == [ax] and ax.get_title() == f"user_id = u005 ({(panes.user_id == 'u005').sum()} panes)"
    assert ax.figure._suptitle.get_text() == "one user"
    assert note_of(ax.figure) is None or "values drawn" not in note_of(ax.figure)
    ax = sqlflow.plot(panes, select=["u001", "u000"])
    assert [a.get_title().split(" (")[0] for a in ax.figure.axes] == ["user_id = u001", "user_id = u000"]
    assert len(sqlflow.plot(panes, max_keys=None).figure.axes) == 8
    assert len(sqlflow.plot(panes, max_keys=3).figure.axes) == 3


def test_selecting_a_key_that_is_not_there_is_an_error_naming_some_that_are():
    with pytest.raises(SqlflowError) as info:
        sqlflow.plot(clickstream_panes(8), select="u999")
    assert info.value.message == "no panes for user_id = 'u999'"
    assert info.value.hint == "keys present: 'u000', 'u001', 'u002', 'u003', 'u004', ..."


def test_a_dense_key_leaves_labels_out_and_says_how_many():
    panes = clickstream_panes(1, sessions=1, panes_per_session=60)
    ax = sqlflow.plot(panes)
    drawn = len(label_boxes(ax))
    assert collisions(ax) == []
    assert 0 < drawn < len(panes)
    assert note_of(ax.figure) == f"{len(panes) - drawn} labels left out where they would overlap"
    # the session's final value is among those kept
    assert str(panes.clicks.max()) in [text for text, _ in label_boxes(ax)]


def test_the_readme_cell_over_all_clicks_is_readable(spark, repo_root, tmp_path, monkeypatch):
    """The README's headline Jupyter cell, `%%sqlflow -o sessions --plot` over all clicks, as the
    magic draws it (`sqlflow.plot(result, limit=2000)`): six users, those with the most panes."""
    from sqlflow.demo import load_clickstream

    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    cell = re.search(r"```sql\n%%sqlflow -o sessions --plot\n(.*?)```", readme, re.S).group(1)
    load_clickstream(spark)
    result = sqlflow.sql(spark, cell)
    ax = sqlflow.plot(result, limit=2000)
    fig = ax.figure
    assert [a.get_title() for a in fig.axes] == [
        "user_id = u050 (115 panes)", "user_id = u041 (93 panes)", "user_id = u021 (83 panes)",
        "user_id = u055 (76 panes)", "user_id = u014 (68 panes)", "user_id = u057 (67 panes)"]
    assert note_of(fig).startswith("6 of 60 user_id values drawn, those with the most panes")
    for a in fig.axes:
        assert collisions(a) == []
        labels = [text for text, _ in label_boxes(a) if not text.startswith("\u2212")]
        assert labels and all(text.isdigit() for text in labels)  # clicks, the first aggregate
    # a legend says what the edges and the hatching mean, under the diagrams, covering none of them
    assert figure_legend(fig)[1] == ["EARLY pane: its value at the top", "retraction of an earlier pane (\u2212value)"]
    assert legend_overlaps(fig) == []
    # docs/interfaces.md's examples over the same result
    docs = (repo_root / "docs" / "interfaces.md").read_text(encoding="utf-8")
    code = re.search(r"draws the six busiest users, one diagram each:\n\n```python\n(.*?)```", docs, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    scope = {"sqlflow": sqlflow, "sessions": result}
    exec(code, scope)
    assert [a.get_title() for a in scope["ax"].figure.axes] == ["user_id = u008 (7 panes)", "user_id = u012 (23 panes)"]
    assert (tmp_path / "two.png").read_bytes()[:4] == b"\x89PNG"
