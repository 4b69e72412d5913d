"""The operator of a chained stage: a windowed SELECT over the panes of a windowed stage on a stream.

Runs on Spark's Python workers, in `transformWithStateInPandas(..., timeMode="None")` after the
first stage's operator (udfs/streaming.py) in the same query (docs/pipelines.md, "On a stream").
Spark gives such an operator neither a watermark nor a batch time, so both travel in its input:

- DATA rows: the first stage's panes (retractions included), as this stage's input elements,
  each with its `output_time` as event time; they arrive in the batch that emitted them;
- REPORT rows: every call of a first-stage bucket reports its watermark, its holds, the batch
  time and whether its input ended (`columns.REPORT_COLUMNS`); Spark copies each to every bucket
  of this stage, so every bucket runs in every batch in which the first stage ran.

Per bucket, the state is the streaming operator's value (`Meta` and the pickled engine state,
`streaming.STATE_SCHEMA`) plus the view of the first stage's buckets (`chain.Reports`). A batch is one engine instant, as a stream
step is: `advance(rows, p, wm_prev, wm_new)` with the batch time of the reports, the previous
output watermark and the new one, the running maximum of the minimum over the first stage's
buckets of min(watermark, holds) (the low-watermark article's InputLowWatermark = min of the upstream
OutputLowWatermarks). When every first-stage bucket has finished, so has this stage's input.
Its own panes and METRICS rows are the streaming operator's (`BucketStep`), reports included
when a third stage reads it. With `keep_dropped` it lists the rows it drops (KIND DROPPED) and
passes on those the stage before dropped (DROPPED rows in its input, with their REASON: the rows
behind their partition under ASCENDING PER, udfs/ordered_stream.py's pass-through mode), each
with the batch's time as `emit_time`.

Imports the engine, never pyspark: the TWS processor is udfs/tws.py's `ChainedProcessor`, a
light shell that builds a `ChainOperator` on its first call on an executor.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

import numpy as np

from sqlflow.columns import (DATA, DROPPED, EMIT_TIME, EVENT_TIME, KIND, REASON, REPORT, REPORT_COLUMNS, SOURCE,
                             STREAM_COUNTERS, WINDOW_END, WINDOW_START, metric_column)
from sqlflow.udfs.stage_reports import Reports
from sqlflow.udfs.operator_frames import one_frame
from sqlflow.udfs.streaming import BucketStep, Meta, StreamSpec, dumps_state, loads_state, read_state


@dataclass(frozen=True)
class ChainSpec:
    """What a chained stage's operator needs: its own stage (`stream`: plan, columns, whether it
    reports in turn) and the number of buckets of the stage it reads."""

    stream: StreamSpec
    upstream_buckets: int


class ChainStep:
    """One bucket's call, independent of Spark (unit-testable): the reports and data of the call
    in, the output frames and new states out."""

    def __init__(self, spec: ChainSpec):
        self.spec = spec
        self.step = BucketStep(spec.stream)

    def split(self, frames) -> tuple[pd.DataFrame | None, pd.DataFrame, pd.DataFrame | None]:
        """The call's data rows (None: none), report rows, and the rows the stage before dropped
        (None: none)."""
        data, reports, dropped = [], [], []
        for frame in frames:
            frame.columns = self.spec.stream.frame_columns  # Spark renames columns named __x
            kind = frame[KIND].to_numpy()
            if (kind == DATA).any():
                data.append(frame[kind == DATA])
            if (kind == REPORT).any():
                reports.append(frame.loc[kind == REPORT, list(REPORT_COLUMNS)])
            if (kind == DROPPED).any():
                dropped.append(frame[kind == DROPPED])
        rows = pd.concat(data, ignore_index=True) if data else None
        if rows is not None and REASON in rows:
            rows = rows.drop(columns=[REASON])
        return rows, (pd.concat(reports, ignore_index=True) if reports
                      else pd.DataFrame({c: pd.Series([], dtype="int64") for c in REPORT_COLUMNS})), (
                          pd.concat(dropped, ignore_index=True) if dropped else None)

    def passed_on(self, dropped: pd.DataFrame, p: int) -> pd.DataFrame:
        """The rows the stage before dropped, as this stage's DROPPED output rows (keys, event
        time, reason; no window; `emit_time` the batch's time `p`)."""
        rows = self.step._coerce(dropped)
        n = len(rows)
        out: dict = {KIND: np.full(n, DROPPED, np.int32)}
        for c in self.spec.stream.plan.keys:
            out[c] = rows[c].to_numpy(dtype=object)
        out[EVENT_TIME] = pd.array(rows[EVENT_TIME], dtype="Int64")
        out[REASON] = rows[REASON].to_numpy(dtype=object)
        out[WINDOW_START] = pd.array([None] * n, dtype="Int64")
        out[WINDOW_END] = pd.array([None] * n, dtype="Int64")
        out[EMIT_TIME] = np.full(n, p, np.int64)
        if self.spec.stream.sources:
            out[SOURCE] = pd.array(rows[SOURCE], dtype="Int64")
        return pd.DataFrame(out)

    def run(self, meta: Meta, view: Reports, state_blob: bytes | None, rows, reports: pd.DataFrame,
            dropped: pd.DataFrame | None = None):
        """Advance the bucket. Returns the output frames, the new view, and the new engine state
        blob (`state_blob` itself when the step did not run). `dropped`: the rows the stage before
        dropped, listed first with `keep_dropped`."""
        view, p = view.merge(reports)
        p = meta.p if p is None else max(p, meta.p)
        before = ([self.passed_on(dropped, p)] if self.spec.stream.keep_dropped and dropped is not None
                  and len(dropped) else [])
        wm_new = view.watermark(meta.wm)
        finish = view.finished
        has_rows = rows is not None and len(rows) > 0
        if self.step.due(meta, p, wm_new, has_rows, finish):
            state = loads_state(state_blob) if state_blob is not None else {}
            if finish and has_rows and not meta.finished:
                # the panes of the first stage's last batch, then the end of the input as an
                # instant of its own, as a replay ends (docs/semantics.md 1.2, "End of input")
                first, state = self.step.run(meta, state, rows, p=p, wm_new=wm_new, finish=False)
                frames, state = self.step.run(meta, state, None, p=p, wm_new=wm_new, finish=True)
                frames = first[:-1] + frames[:-1] + [added(first[-1], frames[-1])]
            else:
                frames, state = self.step.run(meta, state, rows, p=p, wm_new=wm_new, finish=finish)
            blob = dumps_state(state) if state else None
            meta.bytes = len(blob) if blob is not None else 0
            frames[-1] = self.step.live(frames[-1], meta)
        else:
            frames, blob = self.step.skip(meta, p, wm_new), state_blob
        return before + frames, view, blob


def added(first: pd.DataFrame, then: pd.DataFrame) -> pd.DataFrame:
    """The metrics row of two steps of one call: `then`'s, with `first`'s counters added (but one
    bucket advanced)."""
    out = then.copy()
    for m in STREAM_COUNTERS:
        if m != "buckets_advanced":
            c = metric_column(m)
            out[c] = first[c].to_numpy() + then[c].to_numpy()
    return out


class ChainOperator:
    """One bucket's calls in one task, given the state handle's two variables by udfs/tws.py's
    `ChainedProcessor`: the bucket's state value (`streaming.STATE_SCHEMA`: Meta and engine
    state) and its view of the first stage's buckets (`chain.Reports`, bytes)."""

    def __init__(self, spec: ChainSpec, state, reports, previous):
        self.spec = spec
        self.state = state
        self.reports = reports
        self.previous = previous  # an older sqlflow's value (`streaming.read_state`)
        self.step = ChainStep(spec)

    def input_rows(self, key, rows):
        data, reports, dropped = self.step.split(rows)
        # a chained stage has no initial state: a bucket's first call finds no value
        meta, old, before = read_state(self.state, self.previous, self.spec.stream, int(key[0]), initialised=False)
        kept = self.reports.get()
        n1 = self.spec.upstream_buckets
        view = Reports.start(n1) if kept is None else Reports.of_bytes(bytes(kept[0]), n1)
        frames, new_view, blob = self.step.run(meta, view, old, data, reports, dropped)
        if new_view is not view:
            self.reports.update((new_view.to_bytes(),))
        stream = self.spec.stream
        if stream.report:
            meta.seq += 1
            frames[-1] = self.step.step.report(frames[-1], meta, int(key[0]))
        row = meta.row()
        if row != before or blob != old:
            self.state.update((*row, blob))
        yield one_frame(frames, stream.output_columns())


#: the name of a chained bucket's second state variable (udfs/tws.py), and its schema
REPORTS_NAME, REPORTS_SCHEMA = "reports", "blob binary"
