"""Scenario 4 of the comparison suite: the sessions query of scenario 2 in Apache Beam's Python SDK.

    python benchmarks/beam_sessions.py INPUT.parquet OUT_PANES.parquet   (prints one JSON line)

The sqlflow query it mirrors:

    SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total
    FROM events WATERMARK event_time DELAY OF INTERVAL 1 MINUTE ARRIVAL arrival_time
    GROUP BY user_id WINDOW SESSIONS(GAP 5m)
    TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
    ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING

in Beam: `WindowInto(Sessions(300), trigger=AfterWatermark(early=AfterProcessingTime(60),
late=AfterCount(1)), ACCUMULATING, allowed_lateness=3600)` and a combiner of (count, sum) per key,
on the DirectRunner in streaming mode, fed by a TestStream that replays the recorded arrivals:
rows arriving in the same second are added together, then processing time advances to the next
such second and the watermark to the largest event time so far minus one minute. Differences
that cannot be avoided, and how they lean:

- Beam's Python SDK has no retractions; ACCUMULATING is the nearest mode (less work for Beam).
- AfterProcessingTime(60) counts a minute from the pane's first element; PERIOD 1m fires on the
  minute. Early panes differ in number and timing; final values do not.
- Arrivals are grouped by the second (Beam's TestStream needs an event per instant, sqlflow
  replays each millisecond as its own instant): fewer instants for Beam.

Only the pipeline's run is timed (building the TestStream is not). Each run is its own process,
so peak memory (ru_maxrss) is Beam's alone. Every pane is written to OUT_PANES (user_id,
window_start, window_end in microseconds, pane_index, timing, is_last, clicks, total).

Beam 2.77's DirectRunner ends this pipeline with "Monitor task detected a pipeline stall": the
GroupByWindow step keeps watermark holds of merged session windows that received late data, so
its output watermark never reaches +infinity although the input is exhausted and every pane has
been emitted. The run is timed up to that point and `stalled_at_end` is recorded; the suite checks
that the final panes equal sqlflow's, which shows nothing was missing.
"""
from __future__ import annotations

import json
import logging
import os
import resource
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SECOND = 1_000_000
MINUTE = 60 * SECOND


def test_stream(path: str):
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms.window import TimestampedValue
    from apache_beam.utils.timestamp import Duration, Timestamp

    table = pq.read_table(path)
    micros = lambda name: table.column(name).cast(pa.int64()).to_numpy()  # noqa: E731
    event, arrival = micros("event_time"), micros("arrival_time")
    order = np.argsort(arrival, kind="stable")
    event, arrival = event[order], arrival[order]
    keys = table.column("user_id").to_numpy()[order].tolist()
    amounts = table.column("amount").to_numpy()[order].tolist()
    second = arrival // SECOND
    watermark = np.maximum.accumulate(event) - MINUTE
    starts = np.r_[0, np.flatnonzero(np.diff(second)) + 1]
    ends = np.r_[starts[1:], len(second)]
    stream = TestStream()
    last_watermark = None
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        if i:
            stream.advance_processing_time(Duration(micros=int(second[s] - second[s - 1]) * SECOND))
        stream.add_elements([TimestampedValue((keys[j], amounts[j]), Timestamp(micros=int(event[j])))
                             for j in range(s, e)])
        w = int(watermark[e - 1]) // 1000 * 1000  # Beam's watermarks are milliseconds
        if last_watermark is None or w > last_watermark:
            stream.advance_watermark_to(Timestamp(micros=w))
            last_watermark = w
    stream.advance_processing_time(Duration(micros=2 * 3600 * SECOND))  # every timer falls due
    stream.advance_watermark_to_infinity()
    return stream, len(event), len(starts)


def run(input_path: str, panes_path: str) -> dict:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.transforms import trigger, window

    class CountSum(beam.CombineFn):
        def create_accumulator(self):
            return (0, 0)

        def add_input(self, acc, amount):
            return (acc[0] + 1, acc[1] + amount)

        def merge_accumulators(self, accs):
            accs = list(accs)
            return (sum(a[0] for a in accs), sum(a[1] for a in accs))

        def extract_output(self, acc):
            return acc

    class WritePanes(beam.DoFn):
        """Appends each pane as a CSV line (the DirectRunner runs in this process)."""

        def __init__(self, path):
            self.path = path

        def setup(self):
            self.out = open(self.path, "a")

        def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
            key, (clicks, total) = kv
            self.out.write(f"{key},{w.start.micros},{w.end.micros},{pane.index},{pane.timing},"
                           f"{int(pane.is_last)},{clicks},{total}\n")

        def finish_bundle(self):
            self.out.flush()

    stream, rows, instants = test_stream(input_path)
    csv = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False).name
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(options=options)
    (pipeline
     | stream
     | beam.WindowInto(window.Sessions(5 * 60),
                       trigger=trigger.AfterWatermark(early=trigger.AfterProcessingTime(60),
                                                      late=trigger.AfterCount(1)),
                       accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                       allowed_lateness=3600)
     | beam.CombinePerKey(CountSum())
     | beam.ParDo(WritePanes(csv)))
    start = time.perf_counter()
    stalled = None
    try:
        pipeline.run().wait_until_finish()
    except Exception as error:  # noqa: BLE001 - the DirectRunner's stall report (see the module docstring)
        stalled = repr(error)
    seconds = time.perf_counter() - start

    import pandas as pd
    names = ["user_id", "window_start", "window_end", "pane_index", "timing", "is_last", "clicks", "total"]
    panes = pd.read_csv(csv, names=names, header=None) if os.path.getsize(csv) else pd.DataFrame(columns=names)
    os.unlink(csv)
    panes.to_parquet(panes_path, index=False)
    return {"rows": rows, "instants": instants, "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds),
            "panes": len(panes), "stalled_at_end": stalled,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "beam": beam.__version__}


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.ERROR)  # the DirectRunner warns once per bundle otherwise
    print(json.dumps(run(sys.argv[1], sys.argv[2])))
