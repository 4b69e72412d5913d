-- The Dataflow paper's running example (section 2.4): ten integers, summed per key.
-- Run from the repository root:
--     sqlflow -f examples/paper.sql --header
-- ${data} is the folder of the CSV files (set below; or give -d data=... and drop the SET).

SET hivevar:data=examples/data;

-- The ten inputs: value v, event time ts, arrival (processing) time arrived_at.
CREATE OR REPLACE TEMPORARY VIEW paper (k STRING, id STRING, v INT, ts TIMESTAMP, arrived_at TIMESTAMP)
USING csv OPTIONS (path '${data}/paper_example.csv', header 'true');

-- The heuristic watermark of figures 12-14: from proc_time on, the watermark is `watermark`
-- (empty = +infinity).
CREATE OR REPLACE TEMPORARY VIEW heuristic (proc_time TIMESTAMP, watermark TIMESTAMP)
USING csv OPTIONS (path '${data}/paper_watermark.csv', header 'true');

-- Spark returns rows in no particular order: ORDER BY puts panes in emission order.

/* Figure 10: fixed two-minute windows over bounded data: one pane per window. */
SELECT k, window_start, window_end, pane_timing, SUM(v) AS total
FROM paper
GROUP BY k
WINDOW FIXED(SIZE 2m) ON ts
ORDER BY window_start;

/* Figure 12: the same windows replayed as a stream would have seen them (arrival order and
   the heuristic watermark): the 9 arrives after its window fired, so it comes as a LATE pane. */
SELECT k, window_start, window_end, pane_timing, emit_time, SUM(v) AS total
FROM paper WATERMARK ts TIMELINE heuristic ARRIVAL arrived_at
GROUP BY k
WINDOW FIXED(SIZE 2m)
ALLOWED LATENESS 1h
ORDER BY emit_time, window_start;

/* Figure 14: sessions with early firings every minute, then late firings, retracting. */
SELECT k, window_start, window_end, pane_timing, emit_time, is_retraction, SUM(v) AS total
FROM paper WATERMARK ts TIMELINE heuristic ARRIVAL arrived_at
GROUP BY k
WINDOW SESSIONS(GAP 1m)
TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
ALLOWED LATENESS 1h
EMIT ACCUMULATING AND RETRACTING
ORDER BY emit_time, is_retraction DESC, window_start;
