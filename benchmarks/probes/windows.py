"""Spark's session_window and window: boundaries, gaps exactly equal, dynamic gaps
(zero/negative/NULL), output struct types, startTime offsets, pre-1970 timestamps."""
from __future__ import annotations

from pyspark.sql import functions as F

from _common import spark


def show(df, title):
    print(f"--- {title}")
    for r in df.collect():
        print("   ", r)


def main():
    s = spark()
    s.sql("""CREATE OR REPLACE TEMP VIEW ev AS SELECT * FROM VALUES
      ('exact',  TIMESTAMP'2024-01-01 00:00:00', 1),
      ('exact',  TIMESTAMP'2024-01-01 00:05:00', 2),
      ('minus1', TIMESTAMP'2024-01-01 00:00:00', 1),
      ('minus1', TIMESTAMP'2024-01-01 00:04:59.999999', 2)
      AS t(k, ts, v)""")
    sw = s.sql("SELECT k, session_window(ts, '5 minutes') AS w, count(*) AS n FROM ev GROUP BY k, session_window(ts, '5 minutes') ORDER BY k, w.start")
    show(sw, "session_window(ts, '5 minutes'): rows exactly 5 min apart vs 5 min - 1 us")
    print("    schema:", sw.schema["w"].dataType.simpleString())
    show(s.sql("SELECT k, session_window.start AS s, session_window.end + INTERVAL 1 MICROSECOND AS e, count(*) AS n FROM ev "
               "GROUP BY k, session_window(ts, '4 minutes 59 seconds 999999 microseconds') ORDER BY k, s"),
         "our rule (exactly-gap-apart rows do not merge) from Spark: gap - 1 us, then end + 1 us")
    print("    default column name:", s.table("ev").groupBy(F.session_window("ts", "5 minutes")).count().columns)

    s.sql("""CREATE OR REPLACE TEMP VIEW dyn AS SELECT * FROM VALUES
      ('ok',   TIMESTAMP'2024-01-01 00:00:00', '5 minutes'),
      ('zero', TIMESTAMP'2024-01-01 00:00:00', '0 seconds'),
      ('neg',  TIMESTAMP'2024-01-01 00:00:00', '-5 minutes'),
      ('null', TIMESTAMP'2024-01-01 00:00:00', CAST(NULL AS STRING)),
      ('ok2',  TIMESTAMP'2024-01-01 00:00:00', '1 minute'),
      ('ok2',  TIMESTAMP'2024-01-01 00:00:30', '10 minutes')
      AS t(k, ts, gap)""")
    show(s.sql("SELECT k, session_window(ts, gap) AS w, count(*) AS n FROM dyn GROUP BY k, session_window(ts, gap) ORDER BY k"),
         "session_window(ts, gap_column): zero / negative / NULL gaps (rows missing from the output are dropped)")
    try:
        s.sql("SELECT k, session_window(ts, CASE WHEN k = 'ok' THEN INTERVAL 5 MINUTES ELSE INTERVAL 0 SECONDS END) AS w "
              "FROM dyn GROUP BY k, w").collect()
        print("--- session_window(ts, <DAY TO SECOND interval expression>): accepted")
    except Exception as e:  # noqa: BLE001
        print("--- session_window(ts, <DAY TO SECOND interval expression>):", str(e).splitlines()[0][:200])
    show(s.sql("SELECT k, session_window(ts, CAST(CASE WHEN k = 'ok' THEN INTERVAL 5 MINUTES ELSE INTERVAL 0 SECONDS END AS STRING)) AS w, count(*) AS n "
               "FROM dyn GROUP BY k, session_window(ts, CAST(CASE WHEN k = 'ok' THEN INTERVAL 5 MINUTES ELSE INTERVAL 0 SECONDS END AS STRING))"),
         "NOT a workaround: gap CAST(<ANSI interval> AS STRING) gives \"INTERVAL '05' MINUTE\", which does not parse: every row dropped")
    show(s.sql("SELECT k, session_window(ts, make_interval(0, 0, 0, 0, 0, CASE WHEN k = 'ok' THEN 5 ELSE 0 END, 0)) AS w, count(*) AS n "
               "FROM dyn GROUP BY k, session_window(ts, make_interval(0, 0, 0, 0, 0, CASE WHEN k = 'ok' THEN 5 ELSE 0 END, 0))"),
         "workaround: gap expression make_interval(...) (a CalendarInterval)")

    s.sql("""CREATE OR REPLACE TEMP VIEW pts AS SELECT * FROM VALUES
      (TIMESTAMP'2024-01-01 00:02:00'), (TIMESTAMP'2024-01-01 00:07:00'), (TIMESTAMP'2024-01-01 00:06:59.999999'),
      (TIMESTAMP'1969-12-31 23:58:00'), (TIMESTAMP'1960-01-01 00:01:00'), (TIMESTAMP'1970-01-01 00:00:00')
      AS t(ts)""")
    w = s.sql("SELECT ts, window(ts, '10 minutes', '5 minutes', '2 minutes') AS w FROM pts ORDER BY ts, w.start")
    show(w, "window(ts, '10 minutes', '5 minutes', '2 minutes') (sliding, startTime 2 min): boundaries on t=00:02, 00:07, pre-1970")
    print("    schema:", w.schema["w"].dataType.simpleString())
    show(s.sql("SELECT ts, window(ts, '10 minutes') AS w FROM pts ORDER BY ts"), "window(ts, '10 minutes') tumbling")
    show(s.sql("SELECT ts, window(ts, '10 minutes', '10 minutes', '-3 minutes') AS w FROM pts ORDER BY ts"),
         "window(ts, '10 minutes', '10 minutes', '-3 minutes'): negative startTime")
    try:
        s.sql("SELECT window(ts, '10 minutes', '5 minutes', '12 minutes') FROM pts").collect()
        print("--- startTime >= slide: accepted")
    except Exception as e:  # noqa: BLE001
        print("--- startTime >= slide:", str(e).splitlines()[0][:160])
    try:
        s.sql("SELECT window(ts, '5 minutes', '10 minutes') FROM pts").collect()
        print("--- slide > window duration: accepted")
    except Exception as e:  # noqa: BLE001
        print("--- slide > window duration:", str(e).splitlines()[0][:160])
    show(s.sql("SELECT window(CAST(NULL AS TIMESTAMP), '10 minutes') AS w"), "window(NULL)")
    show(s.sql("SELECT k, session_window(ts, '5 minutes') AS w FROM VALUES ('n', CAST(NULL AS TIMESTAMP)) AS t(k, ts) GROUP BY k, session_window(ts, '5 minutes')"),
         "session_window(NULL ts) with GROUP BY")
    show(s.sql("SELECT window_time(w) AS wt FROM (SELECT window(ts, '10 minutes') AS w FROM pts LIMIT 1)"), "window_time(window)")
    s.stop()


if __name__ == "__main__":
    main()
