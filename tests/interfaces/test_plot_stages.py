"""sqlflow.plot of a two-stage pipeline (docs/pipelines.md): one diagram per stage on one
processing-time axis, the first stage's holds and output watermark, which the second stage draws
as its watermark; labels measured by matplotlib's renderer never collide, in the figure as saved.

The pipeline is tests/spark/test_two_stage_replay.py's, on the paper's example, whose holds and
output watermark that file derives by hand:

    P1 held [12:05:19, 12:06:00) at 12:01:25.999999   P2 held [12:05:39, 12:06:00) at 12:03:23.999999
    P3 held [12:06:13, 12:07:00) at 12:05:18.999999   P4 held [12:07:06, 12:07:40) at 12:03:23.999999
    P5 held [12:07:19, 12:08:00) at 12:07:38.999999   P7 held [12:08:39, 12:09:00) at 12:07:38.999999
    OW: 12:02 from 12:06:05, 12:03:23.999999 from 12:07:30, 12:06 from 12:07:40, 12:08:30 from
        12:09:30, +inf from 12:10 (the heuristic watermark W has 12:04 from 12:07:30 instead)
"""
from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import numpy as np
import pytest

import sqlflow
from sqlflow.errors import SqlflowError

sys.path.insert(0, str(Path(__file__).parent))  # the layout checks of test_plot_layout.py
from test_plot_layout import collisions, figure_legend, label_boxes, legend_overlaps, note_of

STAGE1 = """SELECT k, SUM(v) AS total FROM plot_events WATERMARK et TIMELINE plot_heuristic ARRIVAL at
    GROUP BY k WINDOW SESSIONS(GAP 1m) TRIGGER WATERMARK EARLY PERIOD 1m
    ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING"""
PIPELINE = f"""WITH s AS ({STAGE1})
SELECT COUNT(*) AS sessions, SUM(total) AS total FROM s
WINDOW FIXED(SIZE 2m) ON output_time TRIGGER WATERMARK EARLY PERIOD 1m
ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING"""
US = 1e-6 / 86400  # a microsecond in matplotlib's days


def at(clock: str) -> float:
    """'12:03:23.999999' on 1970-01-01 as a matplotlib date number."""
    return mdates.date2num(dt.datetime.fromisoformat(f"1970-01-01 {clock}"))


@pytest.fixture(scope="module")
def paper(spark):
    """The paper's events and heuristic watermark as views, and the events as pandas rows."""
    from pyspark.sql import functions as F

    from sqlflow.demo import clock_micros as micros, paper_example

    example = paper_example()
    rows = [(e["key"], e["value"], micros(e["event_time"]), micros(e["proc_time"])) for e in example["inputs"]["events"]]
    events = spark.createDataFrame(rows, "k string, v bigint, et_us bigint, at_us bigint").select(
        "k", "v", F.timestamp_micros("et_us").alias("et"), F.timestamp_micros("at_us").alias("at"))
    events.createOrReplaceTempView("plot_events")
    steps = [(micros(s["proc_time"]), micros(s["watermark"])) for s in example["inputs"]["watermarks"]]
    spark.createDataFrame(steps, "p bigint, w bigint").select(
        F.timestamp_micros("p").alias("proc_time"), F.timestamp_micros("w").alias("watermark")) \
        .createOrReplaceTempView("plot_heuristic")
    return events.toPandas()


def steps_of(line) -> list[tuple[float, float]]:
    xs, ys = line.get_data()
    return list(zip(np.round(xs, 9), np.round(ys, 9)))


def approx(points):
    return [(round(x, 9), round(y, 9)) for x, y in points]


def test_both_stages_share_processing_time_and_the_output_watermark_is_the_second_stages_watermark(
        spark, paper, tmp_path):
    result = sqlflow.sql(spark, PIPELINE)
    png = tmp_path / "pipeline.png"
    ax = sqlflow.plot(result, inputs=paper, title="Sessions, then 2-minute windows", path=str(png))
    fig = ax.figure
    first, second = fig.axes
    assert ax is second
    assert [a.get_title() for a in fig.axes] == [
        "stage 1: SELECT with WINDOW SESSIONS at line 2, column 16 (k = k, 12 panes)",
        "stage 2: SELECT with WINDOW FIXED at line 5, column 1 (15 panes)"]
    assert fig._suptitle.get_text() == "Sessions, then 2-minute windows"
    # one processing-time axis (and one event-time axis) for both stages
    assert first.get_ylim() == second.get_ylim() and first.get_xlim() == second.get_xlim()

    # stage 1: the paper's figure 14 with early panes: every value and retraction, the inputs
    labels = sorted(t for t, _ in label_boxes(first))
    assert labels == sorted(["5", "7", "10", "25", "3", "39", "12", "\u22127", "\u221210", "\u22125",
                             "\u221225", "\u22123", *map(str, paper["v"])])
    # its holds: a bar at each held pane's output time over the processing time it is held
    (holds,) = [c for c in first.collections if c.get_gid() == "hold"]
    bars = sorted((round(s[0][0], 9), round(s[0][1], 9), round(s[1][1], 9)) for s in holds.get_segments())
    assert bars == sorted((round(at(o), 9), round(at(a), 9), round(at(b), 9)) for o, a, b in [
        ("12:01:25.999999", "12:05:19", "12:06:00"), ("12:03:23.999999", "12:05:39", "12:06:00"),
        ("12:05:18.999999", "12:06:13", "12:07:00"), ("12:03:23.999999", "12:07:06", "12:07:40"),
        ("12:07:38.999999", "12:07:19", "12:08:00"), ("12:07:38.999999", "12:08:39", "12:09:00")])
    # its input watermark W and its output watermark OW (held at 12:03:23.999999 by P4)
    lines = {ln.get_gid(): ln for ln in first.lines}
    x_hi = first.get_xlim()[1]
    assert steps_of(lines["watermark"])[:6] == approx([
        (at("12:02:00"), at("12:06:05")), (at("12:02:00"), at("12:07:30")), (at("12:04:00"), at("12:07:30")),
        (at("12:04:00"), at("12:07:40")), (at("12:06:00"), at("12:07:40")), (at("12:06:00"), at("12:09:30"))])
    output = approx([
        (at("12:02:00"), at("12:06:05")), (at("12:02:00"), at("12:07:30")),
        (at("12:03:23.999999"), at("12:07:30")), (at("12:03:23.999999"), at("12:07:40")),
        (at("12:06:00"), at("12:07:40")), (at("12:06:00"), at("12:09:30")), (at("12:08:30"), at("12:09:30")),
        (at("12:08:30"), at("12:10:00")), (x_hi, at("12:10:00"))])  # +inf at the end: the right edge
    assert steps_of(lines["output-watermark"])[:9] == output
    assert lines["output-watermark"].get_color() == "tab:purple"

    # stage 2: its watermark is that same line; its inputs are stage 1's 12 rows at (output_time, emit_time)
    (watermark,) = [ln for ln in second.lines if ln.get_gid() == "watermark"]
    assert steps_of(watermark) == steps_of(lines["output-watermark"]) and watermark.get_color() == "tab:purple"
    # one legend under both stages, covering neither
    assert all(a.get_legend() is None for a in fig.axes)
    assert figure_legend(fig)[1] == [
        "hold: a pending pane's output time (any key)", "output watermark (wide: the watermark runs inside it where equal)",
        "input", "watermark", "EARLY pane: its value at the top", "ON_TIME pane: its value at the top",
        "LATE pane: its value at the top", "retraction of an earlier pane (\u2212value)",
        "stage 1's panes (at output_time, arriving at emit_time)", "watermark: stage 1's output watermark"]
    assert legend_overlaps(fig) == []
    (points,) = [c for c in second.collections if c.get_gid() == "inputs"]
    assert sorted(approx(points.get_offsets().tolist())) == sorted(approx([
        (at("12:01:25.999999"), at("12:06:00")), (at("12:03:23.999999"), at("12:06:00")),
        (at("12:05:18.999999"), at("12:07:00")), (at("12:03:23.999999"), at("12:07:40")),
        (at("12:05:18.999999"), at("12:07:40")), (at("12:05:18.999999"), at("12:07:40")),
        (at("12:07:38.999999"), at("12:08:00")), (at("12:01:25.999999"), at("12:08:19")),
        (at("12:05:18.999999"), at("12:08:19")), (at("12:05:18.999999"), at("12:08:19")),
        (at("12:07:38.999999"), at("12:09:00")), (at("12:08:45.999999"), at("12:09:00"))]))
    panes = result.toPandas()
    sign = np.where(panes["is_retraction"], "\u2212", "")
    assert sorted(t for t, _ in label_boxes(second)) == sorted(s + str(v) for s, v in zip(sign, panes["sessions"]))
    assert [len([p for p in a.patches if p.get_gid() in ("pane", "retraction")]) for a in fig.axes] == [12, 15]

    # nothing collides or is left out, as drawn and as saved (120 dpi)
    assert note_of(fig) is None
    for dpi in (fig.dpi, 120):
        fig.set_dpi(dpi)
        assert collisions(first) == [] and collisions(second) == []
    # where the two watermarks of stage 1 coincide, both show: the output watermark is a wide band
    # under the (input) watermark's line
    ow, w = lines["output-watermark"], lines["watermark"]
    assert ow.get_linewidth() >= 3 * w.get_linewidth() and ow.get_zorder() < w.get_zorder()
    # the PNG: both stages side by side; the output watermark's band in stage 1 (purple at 40% over
    # white, wherever the green line does not cover it), its dashed line in stage 2
    image = matplotlib.image.imread(str(png))
    height, width = image.shape[:2]
    assert width > 1.8 * height
    band = 1 - 0.4 * (1 - np.array(matplotlib.colors.to_rgb("tab:purple")))
    banded = np.all(np.abs(image[..., :3] - band) < 0.03, axis=-1)
    purple = np.all(np.abs(image[..., :3] - matplotlib.colors.to_rgb("tab:purple")) < 0.02, axis=-1)
    green = np.all(np.abs(image[..., :3] - matplotlib.colors.to_rgb("tab:green")) < 0.02, axis=-1)
    half = width // 2
    assert banded[:, :half].sum() > 500 and green[:, :half].sum() > 200 and purple[:, half:].sum() > 200


def test_the_docs_example_draws_the_clickstream_pipeline(spark, repo_root, tmp_path, monkeypatch):
    """docs/pipelines.md's plot of its hourly sessions: the busiest user's sessions, then the hours."""
    from sqlflow.demo import load_clickstream

    load_clickstream(spark)
    text = (repo_root / "docs" / "pipelines.md").read_text(encoding="utf-8")
    section = text[text.index("## A window over a replayed stage"):]
    query = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    scope = {"sqlflow": sqlflow, "spark": spark, "query": query}
    exec(code, scope)
    ax = scope["ax"]
    first, second = ax.figure.axes
    assert [a.get_title() for a in ax.figure.axes] == [
        "stage 1: SELECT with WINDOW SESSIONS at line 5, column 3 (user_id = u050, 118 panes)",
        "stage 2: SELECT with WINDOW FIXED at line 11, column 3 (4 panes)"]
    assert sorted(t for t, _ in label_boxes(second)) == ["25", "35", "36", "44"]  # the docs' table, per hour
    assert collisions(first) == [] and collisions(second) == []
    note = note_of(ax.figure)
    assert note.startswith("stage 1: 1 of 60 user_id values drawn, those with the most panes")
    # ~1,200 holds of every key made a band over the panes: only those that keep the output
    # watermark behind the watermark are drawn, here none (a session's output time is its end, far
    # ahead of the watermark), and the note says so
    (holds,) = [c for c in first.collections if c.get_gid() == "hold"]
    held = re.search(r"stage 1: (\d+) of ([\d,]+) holds drawn \(those that keep its output watermark behind its "
                     r"watermark\)", note)
    assert held and held.group(1) == "0" and int(held.group(2).replace(",", "")) > 1000
    assert len(holds.get_segments()) == 0
    assert legend_overlaps(ax.figure) == []
    # stage 2's values stand clear of stage 1's ~1,200 panes drawn as its input: small grey points,
    # none within 2 points of a label
    (points,) = [c for c in second.collections if c.get_gid() == "inputs"]
    assert len(points.get_offsets()) > 1000 and points.get_sizes()[0] < 10
    xy = second.transData.transform(points.get_offsets())
    reach = (np.sqrt(points.get_sizes()[0]) / 2 + 2) * ax.figure.dpi / 72
    for text, box in label_boxes(second):
        dx = np.maximum(0, np.maximum(box.x0 - xy[:, 0], xy[:, 0] - box.x1))
        dy = np.maximum(0, np.maximum(box.y0 - xy[:, 1], xy[:, 1] - box.y1))
        assert np.hypot(dx, dy).min() >= reach - 0.5, text
    assert steps_of([ln for ln in second.lines if ln.get_gid() == "watermark"][0]) == \
        steps_of([ln for ln in first.lines if ln.get_gid() == "output-watermark"][0])
    assert (tmp_path / "hourly.png").read_bytes()[:4] == b"\x89PNG"


def test_what_a_pipeline_plot_refuses(spark, paper):
    result = sqlflow.sql(spark, PIPELINE)
    with pytest.raises(SqlflowError) as info:
        sqlflow.plot(result, watermark=[(0, 0)])
    assert info.value.message.startswith("watermark= cannot be given for a pipeline: each stage's watermark")
    assert info.value.hint == "stages='result' draws only the result's rows"
    with pytest.raises(SqlflowError) as info:
        sqlflow.plot(sqlflow.sql(spark, STAGE1), stages="all")
    assert info.value.message == ("stages='all' draws a pipeline: this result is not the result of a windowed "
                                  "SELECT over a replayed windowed stage")
    with pytest.raises(SqlflowError) as info:
        sqlflow.plot(result, stages="both")
    assert info.value.message == "stages='both': expected 'auto', 'all' or 'result'"
    # stages="result": only the result's panes, as for any windowed result
    ax = sqlflow.plot(result, stages="result")
    assert ax.figure.axes == [ax] and len([p for p in ax.patches if p.get_gid() in ("pane", "retraction")]) == 15
