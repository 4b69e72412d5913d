-- Sessions on the bundled clickstream (examples/data/clickstream.csv), replayed in arrival order:
-- early panes every 5 minutes, late panes for late clicks, retractions when sessions grow or merge,
-- then a report of sessions by length that applies the retractions.
--     sqlflow -f examples/sessions.sql --header

CREATE OR REPLACE TEMPORARY VIEW clicks (user_id STRING, page STRING, ts TIMESTAMP, arrived_at TIMESTAMP)
USING csv OPTIONS (path 'examples/data/clickstream.csv', header 'true');

-- Bob's panes: his late clicks merge two sessions into one.
SELECT user_id, window_start, window_end, pane_timing, emit_time, is_retraction, COUNT(*) AS clicks
FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES ARRIVAL arrived_at
WHERE user_id = 'bob'
GROUP BY user_id
WINDOW SESSIONS(GAP 10m)
TRIGGER WATERMARK EARLY PERIOD 5m LATE COUNT 1
ALLOWED LATENESS 1h
EMIT ACCUMULATING AND RETRACTING
ORDER BY emit_time, is_retraction DESC, window_start;

-- Every user's sessions by length: retractions are subtracted, so this is the batch answer.
WITH sessions AS (
  SELECT user_id, COUNT(*) AS clicks
  FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES ARRIVAL arrived_at
  GROUP BY user_id
  WINDOW SESSIONS(GAP 10m)
  TRIGGER WATERMARK EARLY PERIOD 5m LATE COUNT 1
  ALLOWED LATENESS 1h
  EMIT ACCUMULATING AND RETRACTING
)
SELECT CASE WHEN clicks < 5 THEN '1-4' WHEN clicks < 10 THEN '5-9' ELSE '10+' END AS length,
       COUNT(*) AS sessions, SUM(clicks) AS clicks
FROM sessions
GROUP BY 1
ORDER BY 1;
