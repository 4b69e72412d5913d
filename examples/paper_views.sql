-- The paper's example as two temporary views, for `sqlflow -i examples/paper_views.sql ...`
-- (run from the repository root): paper(k, id, v, ts, arrived_at), heuristic(proc_time, watermark).
CREATE OR REPLACE TEMPORARY VIEW paper (k STRING, id STRING, v INT, ts TIMESTAMP, arrived_at TIMESTAMP)
USING csv OPTIONS (path 'examples/data/paper_example.csv', header 'true');

CREATE OR REPLACE TEMPORARY VIEW heuristic (proc_time TIMESTAMP, watermark TIMESTAMP)
USING csv OPTIONS (path 'examples/data/paper_watermark.csv', header 'true');
