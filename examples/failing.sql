-- A script that fails on its third statement: `sqlflow -f examples/failing.sql` prints the
-- first two results, then the error with its line, column and a caret, and exits with status 1.
CREATE OR REPLACE TEMPORARY VIEW clicks AS
SELECT 'u1' AS user_id, TIMESTAMP'2015-09-01 12:00:00' AS ts;

SELECT COUNT(*) AS n FROM clicks;

SELECT user_id, COUNT(*) AS clicks
FROM clicks
GROUP BY user_id
WINDOW SESSION(GAP 30m) ON ts;

SELECT 'never reached';
