"""The main job: sqlflow on local Spark over bundled data, end to end.

    python -m sqlflow.demo                       # local[2]
    python -m sqlflow.demo --master "local-cluster[2,1,1024]"

1. A sessions report with early firings over a bundled clickstream (sqlflow/data/clickstream.csv,
   2,000 clicks of 60 users on one morning, each with the time it happened and the time it reached
   the server): the panes a streaming job would have emitted, replayed from the arrival times,
   with retractions when sessions grow or merge; then the sessions counted by length downstream,
   retractions applied.
2. The Dataflow paper's running example, figure 14 (sessions, early/late firings, accumulating
   and retracting), computed by Spark and checked against the paper.

`python -m sqlflow.demo --generate PATH` writes the clickstream again (it is deterministic).
"""
from __future__ import annotations

import argparse
import json
import sys
from importlib import resources

import numpy as np
import pandas as pd

SESSIONS_REPORT = """
SELECT user_id, COUNT(*) AS clicks, ROUND(SUM(amount), 2) AS revenue
FROM clicks WATERMARK event_time DELAY OF 1m ARRIVAL arrival_time
GROUP BY user_id
WINDOW SESSIONS(GAP 10m)
TRIGGER WATERMARK EARLY PERIOD 1m
ALLOWED LATENESS 5m
EMIT ACCUMULATING AND RETRACTING
"""

SESSIONS_BY_LENGTH = f"""
WITH sessions AS ({SESSIONS_REPORT})
SELECT CASE WHEN window_end - window_start < INTERVAL 15 MINUTES THEN 'under 15 min'
            ELSE '15 min or more' END AS length,
       COUNT(*) AS sessions, SUM(clicks) AS clicks, MAX(clicks) AS busiest
FROM sessions
GROUP BY 1
ORDER BY 1 DESC
"""

FIGURE_14 = """
SELECT k, SUM(v) AS total
FROM events WATERMARK et TIMELINE heuristic ARRIVAL at
GROUP BY k
WINDOW SESSIONS(GAP 1m)
TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
ALLOWED LATENESS 1h
EMIT ACCUMULATING AND RETRACTING
"""

CLICKSTREAM_SCHEMA = "user_id STRING, url STRING, amount DOUBLE, event_time TIMESTAMP, arrival_time TIMESTAMP"
PAGES = ["/home", "/search", "/product/espresso", "/product/grinder", "/product/beans", "/cart", "/checkout"]


# ----------------------------------------------------------------------------- the data


def generate_clickstream(n_users: int = 60, n_clicks: int = 2000, seed: int = 7) -> pd.DataFrame:
    """A deterministic morning of clicks: visits of a few minutes to half an hour, clicks seconds to
    minutes apart, most arriving within seconds, some minutes late (a phone back online)."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-03-01 08:00:00")
    rows: list[tuple] = []
    while len(rows) < n_clicks:
        user = f"u{rng.integers(1, n_users + 1):03d}"
        t = start + pd.Timedelta(seconds=int(rng.integers(0, 3 * 3600)))
        for _ in range(int(rng.geometric(1 / 7))):
            page = PAGES[int(rng.integers(0, len(PAGES)))]
            amount = round(float(rng.uniform(5, 120)), 2) if page == "/checkout" else 0.0
            u = rng.random()
            delay = (rng.uniform(0.1, 5) if u < 0.9 else rng.uniform(10, 90) if u < 0.98
                     else rng.uniform(120, 1200))
            rows.append((user, page, amount, t, t + pd.Timedelta(seconds=round(delay, 3))))
            t += pd.Timedelta(seconds=int(rng.exponential(45)) + 1)
    frame = pd.DataFrame(rows[:n_clicks], columns=["user_id", "url", "amount", "event_time", "arrival_time"])
    frame = frame.sort_values(["arrival_time", "user_id"]).reset_index(drop=True)
    for column in ("event_time", "arrival_time"):
        frame[column] = frame[column].dt.strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3]
    return frame


def clickstream_path() -> str:
    return str(resources.files("sqlflow").joinpath("data/clickstream.csv"))


def load_clickstream(spark):
    """The bundled clickstream as temp view `clicks` (times are UTC)."""
    df = spark.read.csv(clickstream_path(), header=True, schema=CLICKSTREAM_SCHEMA)
    df.createOrReplaceTempView("clicks")
    return df


def paper_example() -> dict:
    """The paper's running example as the package ships it (data/paper_example.json)."""
    return json.loads(resources.files("sqlflow").joinpath("data/paper_example.json").read_text())


def clock_micros(text: str) -> int | None:
    """A time of day of the paper's example ('12:05:19') as microseconds of 1970-01-01; '+inf'
    (a watermark that has passed every time) as None.

    >>> clock_micros("00:01:02"), clock_micros("+inf")
    (62000000, None)
    """
    if text == "+inf":
        return None
    h, m, s = map(int, text.split(":"))
    return (h * 3600 + m * 60 + s) * 1_000_000


def load_paper_example(spark) -> dict:
    """The paper's ten data as temp view `events(k, id, v, et, at)` and its heuristic watermark as
    `heuristic(proc_time, watermark)`, on 1970-01-01 (the paper gives times of day only)."""
    from pyspark.sql import functions as F

    example = paper_example()
    micros = clock_micros

    events = [(e["key"], e["id"], e["value"], micros(e["event_time"]), micros(e["proc_time"]))
              for e in example["inputs"]["events"]]
    spark.createDataFrame(events, "k string, id string, v bigint, et bigint, at bigint").select(
        "k", "id", "v", F.timestamp_micros("et").alias("et"), F.timestamp_micros("at").alias("at")
    ).createOrReplaceTempView("events")
    steps = [(micros(s["proc_time"]), micros(s["watermark"])) for s in example["inputs"]["watermarks"]]
    spark.createDataFrame(steps, "p bigint, w bigint").select(
        F.timestamp_micros("p").alias("proc_time"), F.timestamp_micros("w").alias("watermark")
    ).createOrReplaceTempView("heuristic")
    return example


# ----------------------------------------------------------------------------- printing


def _clock(value) -> str:
    return "" if value is None or pd.isna(value) else pd.Timestamp(value).strftime("%H:%M:%S")


def _number(value):
    return value.item() if isinstance(value, np.generic) else value


def format_panes(rows: list, value_columns: list[str]) -> str:
    """Panes as a table in emission order: retractions shown with a minus sign."""
    header = ["emitted", "window", "pane", "timing"] + value_columns
    lines = []
    for r in rows:
        sign = -1 if r["is_retraction"] else 1
        values = [_number(r[c]) for c in value_columns]
        values = [str(v * sign if isinstance(v, (int, float)) and sign < 0 and v else v) for v in values]
        window = f"[{_clock(r['window_start'])}, {_clock(r['window_end'])})"
        timing = "retract" if r["is_retraction"] else r["pane_timing"]
        lines.append([_clock(r["emit_time"]), window, str(r["pane_index"]), timing] + values)
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out += ["  ".join(v.ljust(w) for v, w in zip(line, widths)) for line in lines]
    return "\n".join(out)


def _ordered(df):
    from pyspark.sql import functions as F

    return df.orderBy("emit_time", F.col("is_retraction").desc(), "window_start").collect()


# ----------------------------------------------------------------------------- the job


def sessions_report(spark, out=print, users: int = 2) -> dict:
    import sqlflow

    load_clickstream(spark)
    df = sqlflow.sql(spark, SESSIONS_REPORT)
    out("== 1. Sessions with early firings, replayed from the arrival times")
    out(SESSIONS_REPORT.strip())
    out("")
    out(sqlflow.explain(SESSIONS_REPORT, spark).split("\nSpark SQL:")[0])
    panes = df.toPandas()  # small: 2,000 clicks give about as many panes
    panes = panes.sort_values(["emit_time", "is_retraction", "window_start"], ascending=[True, False, True])
    # show users whose sessions were refined or merged, but not too many panes
    per_user = panes.groupby("user_id")["is_retraction"].agg(["size", "sum"])
    shown = per_user[(per_user["sum"] > 0) & per_user["size"].between(4, 12)].index[:users]
    for user in shown:
        out(f"\npanes of user {user}:")
        out(format_panes(panes[panes["user_id"] == user].to_dict("records"), ["clicks", "revenue"]))
    metrics = sqlflow.metrics(df)
    out(f"\n{metrics['input_rows']} clicks -> {metrics['panes']} panes and {metrics['retractions']} retractions; "
        f"{metrics['dropped_too_late']} clicks arrived too late for their session "
        f"(see sqlflow.dropped(df))")
    out("\nsessions by length, retractions applied downstream:")
    by_length = sqlflow.sql(spark, SESSIONS_BY_LENGTH).toPandas()
    out(by_length.to_string(index=False))
    return {"metrics": metrics, "by_length": by_length.to_dict("records")}


def paper_figure_14(spark, out=print) -> dict:
    import sqlflow

    example = load_paper_example(spark)
    df = sqlflow.sql(spark, FIGURE_14)
    rows = _ordered(df)
    out("\n== 2. The Dataflow paper, figure 14: sessions, early/late firings, accumulating and retracting")
    out(FIGURE_14.strip())
    out("")
    out(format_panes(rows, ["total"]))
    got = [(-r["total"] if r["is_retraction"] else r["total"]) for r in rows]
    figure = next(f for f in example["figures"] if f["figure"] == 14)
    expected = [p["value"] for p in figure["expected_panes"]]
    same = got == expected
    out(f"\nsigned values {got}\nthe paper's   {expected}: {'identical' if same else 'DIFFERENT'}")
    return {"values": got, "matches_paper": same}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sqlflow.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--generate", metavar="PATH", help="write the clickstream CSV to PATH and exit")
    options = parser.parse_args(argv)
    if options.generate:
        generate_clickstream().to_csv(options.generate, index=False)
        return 0
    from .errors import SqlflowError
    from .spark.session import local_session

    try:
        spark = local_session(app_name="sqlflow-demo", master=options.master)
    except SqlflowError as error:  # no Java: what to install, not a traceback
        print(error, file=sys.stderr)
        return 1
    try:
        sessions_report(spark)
        result = paper_figure_14(spark)
    finally:
        spark.stop()
    return 0 if result["matches_paper"] else 1


if __name__ == "__main__":
    sys.exit(main())
