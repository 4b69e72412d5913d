"""sqlflow.plot: the figure's contents (rectangles, labels, hatching, lines), not its pixels."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest

import sqlflow
from sqlflow.errors import SqlflowError

DAY0 = mdates.date2num(np.datetime64("1970-01-01T00:00:00"))


def at(clock: str) -> float:
    """'12:05:19' on the engine's day (1970-01-01) as a matplotlib date number."""
    h, m, s = map(int, clock.split(":"))
    return DAY0 + (h * 3600 + m * 60 + s) / 86400


def rects(ax, gid):
    return [p for p in ax.patches if p.get_gid() == gid]


def texts(ax, gid):
    return [t.get_text() for t in ax.texts if t.get_gid() == gid]


def test_each_pane_is_a_rectangle_over_its_window_up_to_its_emit_time(engine_figure):
    result, rows, timeline = engine_figure(13)
    ax = sqlflow.plot(result, inputs=rows, watermark=timeline)
    panes = rects(ax, "pane")
    assert len(panes) == len(result.panes) == 8
    # figure 13: the first panes are the early ones of 12:06 for [12:00, 12:02) and [12:02, 12:04)
    first = panes[0]
    assert first.get_x() == pytest.approx(at("12:00:00"))
    assert first.get_x() + first.get_width() == pytest.approx(at("12:02:00"))
    assert first.get_y() + first.get_height() == pytest.approx(at("12:06:00"))
    assert first.get_linestyle() == ":"  # EARLY
    # the second pane of [12:02, 12:04) starts where the first one ended
    w2 = [p for p in panes if p.get_x() == pytest.approx(at("12:02:00"))]
    assert w2[1].get_y() == pytest.approx(w2[0].get_y() + w2[0].get_height())
    assert texts(ax, "pane-label") == [str(v) for v in result.panes["total"]]
    assert texts(ax, "pane-label")[:4] == ["5", "7", "14", "3"]  # the paper's 12:06 and 12:07 panes


def test_retractions_are_hatched_and_carry_a_minus_sign(engine_figure):
    result, rows, timeline = engine_figure(14)
    ax = sqlflow.plot(result, inputs=rows, watermark=timeline, title="Sessions, retracting")
    hatched = rects(ax, "retraction")
    assert len(hatched) == int(result.panes["is_retraction"].sum()) == 5
    assert all(p.get_hatch() for p in hatched)
    assert sorted(texts(ax, "retraction-label")) == sorted(["\u22127", "\u221210", "\u22125", "\u221225", "\u22123"])
    assert ax.get_title() == "Sessions, retracting"
    # the retraction of the 7 at 12:07:40 covers the time the 7 was current: 12:06 -> 12:07:40
    seven = [p for p in hatched if p.get_x() == pytest.approx(at("12:02:24"))
             and p.get_width() == pytest.approx(at("12:03:24") - at("12:02:24"))][0]
    assert seven.get_y() == pytest.approx(at("12:06:00"))
    assert seven.get_y() + seven.get_height() == pytest.approx(at("12:07:40"))


def test_inputs_and_watermark_are_drawn(engine_figure):
    result, rows, timeline = engine_figure(12)
    ax = sqlflow.plot(result, inputs=rows, watermark=timeline)
    scatter = [c for c in ax.collections if c.get_gid() == "inputs"][0]
    offsets = scatter.get_offsets()
    assert len(offsets) == 10
    assert offsets[0][0] == pytest.approx(at("12:00:26")) and offsets[0][1] == pytest.approx(at("12:05:19"))
    assert texts(ax, "input-label") == ["5", "7", "3", "4", "3", "8", "3", "9", "8", "1"]
    line = [ln for ln in ax.lines if ln.get_gid() == "watermark"][0]
    xs, ys = line.get_data()
    # the first step: at 12:06:05 the watermark becomes 12:02
    assert (xs[0], ys[0]) == (pytest.approx(at("12:02:00")), pytest.approx(at("12:06:05")))
    # W stays at 12:02 until 12:07:30, then jumps to 12:04
    assert (xs[1], ys[1]) == (pytest.approx(at("12:02:00")), pytest.approx(at("12:07:30")))
    assert (xs[2], ys[2]) == (pytest.approx(at("12:04:00")), pytest.approx(at("12:07:30")))
    # +inf is drawn at the right edge
    assert xs[-1] == pytest.approx(ax.get_xlim()[1])
    assert ax.get_xlabel() == "event time" and ax.get_ylabel() == "processing time"


def test_bounded_global_pane_spans_the_plot_after_all_input(engine_figure):
    result, rows, _ = engine_figure(6)
    ax = sqlflow.plot(result, inputs=rows)
    (pane,) = rects(ax, "pane")
    lo, hi = ax.get_xlim()
    assert pane.get_x() == pytest.approx(lo) and pane.get_x() + pane.get_width() == pytest.approx(hi)
    (after,) = [ln for ln in ax.lines if ln.get_gid() == "after-all-input"]
    assert pane.get_y() + pane.get_height() == pytest.approx(after.get_ydata()[0])
    assert after.get_ydata()[0] > at("12:08:59")  # above the last arrival
    assert texts(ax, "pane-label") == ["51"]
    assert any(t.get_text().strip() == "after all input" for t in ax.texts)


def test_bounded_panes_without_any_processing_time(engine_figure):
    result, _, _ = engine_figure(10)
    ax = sqlflow.plot(result)
    assert texts(ax, "pane-label") == ["14", "22", "3", "12"]
    assert [round((p.get_x() - DAY0) * 1440) for p in rects(ax, "pane")] == [720, 722, 724, 726]
    assert list(ax.get_yticks()) == []


def timestamp_panes():
    ts = pd.Timestamp
    return pd.DataFrame({
        "user": ["a", "b", "a"],
        "clicks": [3, 1, 4],
        "window_start": [ts("2015-09-01 12:00"), ts("2015-09-01 12:00"), ts("2015-09-01 12:00")],
        "window_end": [ts("2015-09-01 12:02")] * 3,
        "pane_index": [0, 0, 1], "pane_timing": ["EARLY", "ON_TIME", "LATE"],
        "is_last": [False, True, True],
        "emit_time": [ts("2015-09-01 12:05"), ts("2015-09-01 12:06"), pd.NaT],
    })


def test_timestamp_panes_like_the_spark_paths_give(paper):
    """window_start/end/emit_time as timestamps; several keys get a diagram each, the key with
    the most panes first."""
    ax = sqlflow.plot(timestamp_panes(), inputs=paper.inputs, watermark=paper.watermark, value="clicks")
    a, b = ax.figure.axes
    assert ax is a and (a.get_title(), b.get_title()) == ("user = a (2 panes)", "user = b (1 pane)")
    boxes = rects(a, "pane")
    assert boxes[0].get_x() == pytest.approx(mdates.date2num(np.datetime64("2015-09-01T12:00")))
    assert boxes[1].get_linestyle() == "--"  # LATE
    assert texts(a, "pane-label") == ["3", "4"] and texts(b, "pane-label") == ["1"]
    assert not [t for t in ax.figure.texts if t.get_gid() == "plot-note"]  # nothing left out


def test_keys_in_one_given_axes_get_a_colour_each_and_a_legend(paper):
    import matplotlib.pyplot as plt

    _, given = plt.subplots()
    ax = sqlflow.plot(timestamp_panes(), inputs=paper.inputs, watermark=paper.watermark, ax=given)
    assert ax is given and ax.figure.axes == [given]
    boxes = rects(ax, "pane")
    assert boxes[0].get_facecolor()[:3] != boxes[1].get_facecolor()[:3]
    # in given Axes the legend is drawn inside them: the lines, what the edges mean, the keys' colours
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["input", "watermark"] and legend[-2:] == ["a", "b"]
    assert all(name.endswith(" pane: its value at the top") for name in legend[2:-2])
    assert texts(ax, "pane-label") == ["3", "1", "4"]


def test_saves_png(engine_figure, tmp_path):
    result, rows, timeline = engine_figure(7)
    target = tmp_path / "fig7.png"
    sqlflow.plot(result, inputs=rows, watermark=timeline, path=str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_draws_into_given_axes():
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2)
    panes = pd.DataFrame({"n": [1], "window_start": [0], "window_end": [60_000_000], "pane_index": [0],
                          "pane_timing": ["ON_TIME"], "is_last": [True], "emit_time": [None]})
    assert sqlflow.plot(panes, ax=right) is right
    assert not left.patches and len(right.patches) == 1


def test_not_panes_is_a_clear_error():
    with pytest.raises(SqlflowError, match="not panes"):
        sqlflow.plot(pd.DataFrame({"k": [1]}))


def test_spark_dataframe_is_collected_with_a_limit(spark):
    df = spark.createDataFrame(
        [(k, 0, 60_000_000, 0, "ON_TIME", True, 120_000_000 + k) for k in range(30)],
        "n INT, window_start BIGINT, window_end BIGINT, pane_index INT, pane_timing STRING, is_last BOOLEAN, emit_time BIGINT")
    ax = sqlflow.plot(df, limit=5)
    assert len(rects(ax, "pane")) == 5
    (note,) = [t.get_text() for t in ax.figure.texts if t.get_gid() == "plot-note"]
    assert note.split("; ")[0] == "only the first 5 panes were collected (limit=5)"


def test_sqlflow_plot_is_the_function_after_the_module_was_imported():
    import importlib

    importlib.import_module("sqlflow.diagram")  # the module has its own name: sqlflow.plot stays the function
    panes = pd.DataFrame({"n": [1], "window_start": [0], "window_end": [60_000_000], "pane_index": [0],
                          "pane_timing": ["ON_TIME"], "is_last": [True], "emit_time": [None]})
    assert len(sqlflow.plot(panes).patches) == 1


def test_global_panes_stack_up_one_above_the_other(engine_figure):
    result, rows, _ = engine_figure(7)
    boxes = rects(sqlflow.plot(result, inputs=rows), "pane")
    assert [round((b.get_y() - DAY0) * 1440, 3) for b in boxes[1:]] == [720 + 6, 720 + 7, 720 + 8]  # 12:06, 12:07, 12:08
    assert all(b.get_y() + b.get_height() == pytest.approx(n.get_y()) for b, n in zip(boxes, boxes[1:]))


def test_without_matplotlib_the_error_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # import fails as if not installed
    panes = pd.DataFrame({"n": [1], "window_start": [0], "window_end": [60_000_000], "pane_index": [0],
                          "pane_timing": ["ON_TIME"], "is_last": [True], "emit_time": [None]})
    with pytest.raises(ImportError, match=r"sqlflow.plot needs matplotlib: pip install matplotlib \(the project's \[plot\] extra\)"):
        sqlflow.plot(panes)


def test_a_shown_result_table_plots_its_dataframe(spark):
    """`panes = %sqlflow SELECT ...` keeps a ResultTable: `panes.plot()` draws its DataFrame."""
    from sqlflow.interfaces.display import ResultTable

    df = spark.createDataFrame([(1, 0, 60_000_000, 0, "ON_TIME", True, None)],
                               "n INT, window_start BIGINT, window_end BIGINT, pane_index INT, pane_timing STRING, "
                               "is_last BOOLEAN, emit_time BIGINT")
    ax = ResultTable(df, 20).plot(title="shown")
    assert ax.get_title() == "shown" and texts(ax, "pane-label") == ["1"]
