-- The Dataflow paper's running example (section 2.4): ten integers summed per key.
-- Run from the repository root:  sqlflow -f examples/paper.sql
-- ${data} is the folder of the CSV files (default set below; override with -d data=...).

SET hivevar:data=examples/data;

CREATE OR REPLACE TEMPORARY VIEW paper (k STRING, id STRING, v INT, ts TIMESTAMP, arrived_at TIMESTAMP)
USING csv OPTIONS (path '${data}/paper_example.csv', header 'true');

/* Figure 10: fixed two-minute windows over bounded data: one pane per window. */
SELECT k, window_start, window_end, pane_timing, SUM(v) AS total
FROM paper
GROUP BY k
WINDOW FIXED(SIZE 2m) ON ts
ORDER BY window_start;
