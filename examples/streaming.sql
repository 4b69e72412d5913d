-- A streaming job: a file source, sessions with early firings and retractions, a parquet sink with
-- a checkpoint. Run it from the repository root (${out} is a scratch directory):
--     sqlflow -f examples/streaming.sql -d out=/tmp/sqlflow-demo
-- Run it again: it resumes from the checkpoint and, with no new input, adds nothing.

SET spark.sqlflow.checkpointLocation = ${out}/checkpoints;
SET spark.sqlflow.trigger = availableNow;   -- process what is there, then stop
SET spark.sqlflow.finish = true;            -- and emit every window at the end of the input

-- a streaming source: the bundled clickstream, read as a stream of CSV files
CREATE OR REPLACE TEMPORARY VIEW clicks (user_id STRING, page STRING, ts TIMESTAMP, arrived_at TIMESTAMP)
USING csv OPTIONS (path 'examples/data/clickstream*.csv', header 'true', streaming true, mode 'FAILFAST');

-- the query and its sink: every pane (early, on time, late, retraction) is a row of the sink
INSERT INTO parquet.`${out}/sessions`
SELECT user_id, COUNT(*) AS clicks
FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES
GROUP BY user_id
WINDOW SESSIONS(GAP 10m)
TRIGGER WATERMARK EARLY PERIOD 5m LATE COUNT 1
ALLOWED LATENESS 1h
EMIT ACCUMULATING AND RETRACTING;

-- what the sink holds: sessions per user, retractions subtracted
SELECT user_id, SUM(IF(is_retraction, -1, 1)) AS sessions, SUM(IF(is_retraction, -clicks, clicks)) AS clicks
FROM parquet.`${out}/sessions`
GROUP BY user_id
ORDER BY user_id;
