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
when a third stage reads it.

Imports the engine, never pyspark: the TWS processor is udfs/tws.py's `ChainedProcessor`, a
light shell that builds a `ChainOperator` on its first call on an executor.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sqlflow.columns import DATA, KIND, REPORT, REPORT_COLUMNS, STREAM_COUNTERS, metric_column
from sqlflow.udfs.stage_reports import Reports
from sqlflow.udfs.operator_frames import one_frame
from sqlflow.udfs.streaming import BucketStep, Meta, StreamSpec, dumps_state, loads_state, stored


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

    def split(self, frames) -> tuple[pd.DataFrame | None, pd.DataFrame]:
        """The call's data rows (None: none) and report rows."""
        data, reports = [], []
        for frame in frames:
            frame.columns = self.spec.stream.frame_columns  # Spark renames columns named __x
            kind = frame[KIND].to_numpy()
            if (kind == DATA).any():
                data.append(frame[kind == DATA])
            if (kind == REPORT).any():
                reports.append(frame.loc[kind == REPORT, list(REPORT_COLUMNS)])
        rows = pd.concat(data, ignore_index=True) if data else None
        return rows, (pd.concat(reports, ignore_index=True) if reports
                      else pd.DataFrame({c: pd.Series([], dtype="int64") for c in REPORT_COLUMNS}))

    def run(self, meta: Meta, view: Reports, state_blob: bytes | None, rows, reports: pd.DataFrame):
        """Advance the bucket. Returns the output frames, the new view, and the new engine state
        blob (`state_blob` itself when the step did not run)."""
        view, p = view.merge(reports)
        p = meta.p if p is None else max(p, meta.p)
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
        return frames, view, blob


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

    def __init__(self, spec: ChainSpec, state, reports):
        self.spec = spec
        self.state = state
        self.reports = reports
        self.step = ChainStep(spec)

    def input_rows(self, key, rows):
        data, reports = self.step.split(rows)
        value = self.state.get()  # None when it does not exist (no exists() round trip)
        meta, old = stored(value)
        before = None if value is None else meta.row()
        kept = self.reports.get()
        n1 = self.spec.upstream_buckets
        view = Reports.start(n1) if kept is None else Reports.of_bytes(bytes(kept[0]), n1)
        frames, new_view, blob = self.step.run(meta, view, old, data, reports)
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
