-- Plain Spark SQL goes to Spark unchanged: views, SET, ${variables}, several statements.
--   sqlflow -f examples/hello.sql -d greeting=hello
SET spark.sql.shuffle.partitions=2;

CREATE OR REPLACE TEMPORARY VIEW numbers AS
SELECT id AS n, id % 2 = 0 AS even FROM range(1, 6);

SELECT n, even, '${greeting}' AS word   -- a statement spanning lines
FROM numbers
WHERE n <= 3;

SELECT even, COUNT(*) AS how_many, SUM(n) AS total FROM numbers GROUP BY even ORDER BY even;
