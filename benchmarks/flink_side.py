"""The Flink side of the comparison suite's scenarios f1 to f5 (benchmarks/flink_compare.py).

Runs inside its own virtualenv (`apache-flink==2.3.*`, whose pinned py4j, apache-beam and
pyarrow clash with sqlflow's; flink_compare.py creates it) as a subprocess talking JSON lines:

    python benchmarks/flink_side.py          (reads requests on stdin, one JSON object a line)

It starts the JVM and a Flink mini-cluster in it once (one TaskManager, 2 slots, parallelism 2)
and prints `@flink-side {"ready": true, "startup_s": ...}`; then it runs one Flink SQL job per
request and answers with one such line (the JVM shares this stdout). Jobs are submitted to the
running cluster as to a session cluster, so start-up is reported, not timed with them (PyFlink's
default local executor would start a new mini-cluster for every job). A request:

    {"window": "tumble" | "session" | "order", "mode": "batch" | "streaming", "path": CSV file or folder,
     "delay_ms": watermark delay (streaming mode), "out": null (blackhole sink) or a folder (CSV)}

The input is `events.csv_dataset`'s CSV (user_id, amount, event and arrival time in epoch
milliseconds). Event time is `TO_TIMESTAMP_LTZ(event_ms, 3)`, in streaming mode with
`WATERMARK FOR event_time AS event_time - <delay>`: Flink's bounded out-of-orderness watermark
(largest event time seen minus the delay, per source subtask; the window operator takes the
smallest). The query: COUNT(*) and SUM(amount) per user_id and TUMBLE(1 minute) or
SESSION(gap 5 minutes) window TVF, default trigger (one final row per window when the watermark
passes its end; the remaining windows at the end of the bounded input); or, for "order" (f5),
the rows themselves `ORDER BY event_time, user_id` in streaming mode (Flink's temporal sort: rows
buffered until the watermark passes them, then emitted in order). The answer:
`{"seconds": the job's time from submission (planning included) to its end, "job_id": ...,
"job_run_s": its running time on the cluster, "vertices": [each operator chain's time and
records], "peak_rss_mb": ...}`; with "out", the rows are written as CSV (user_id, window_start and
window_end in epoch ms, clicks, total).
"""
from __future__ import annotations

import json
import os
import sys
import time

GAP_MS = 5 * 60 * 1000
PARALLELISM = 2
ANSWER = "@flink-side "


def start_cluster():
    """The JVM (PyFlink's gateway) and a mini-cluster in it; returns its REST port."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    flink = jvm.org.apache.flink
    conf = flink.configuration.Configuration()
    conf.setString("rest.port", "0")
    conf.setString("rest.bind-address", "127.0.0.1")
    conf.setString("rest.address", "127.0.0.1")
    config = (flink.runtime.minicluster.MiniClusterConfiguration.Builder().setConfiguration(conf)
              .setNumTaskManagers(1).setNumSlotsPerTaskManager(PARALLELISM).build())
    cluster = flink.runtime.minicluster.MiniCluster(config)
    cluster.start()
    return cluster, cluster.getRestAddress().get().getPort()


def table_env(mode: str, port: int):
    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = EnvironmentSettings.in_batch_mode() if mode == "batch" else EnvironmentSettings.in_streaming_mode()
    env = TableEnvironment.create(settings)
    conf = env.get_config()
    for key, value in {"execution.target": "remote", "rest.address": "127.0.0.1", "rest.port": str(port),
                       "parallelism.default": str(PARALLELISM), "table.local-time-zone": "UTC",
                       "pipeline.name": "sqlflow-compare"}.items():
        conf.set(key, value)
    return env


def interval(ms: int) -> str:
    """A Flink SQL interval literal of `ms` milliseconds (less than 100 days).

    >>> interval(30 * 60 * 1000 + 5)
    "INTERVAL '0 00:30:00.005' DAY TO SECOND(3)"
    """
    seconds, ms = divmod(ms, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{ms:03d}' DAY TO SECOND(3)"


def statements(request: dict, n: int) -> list[str]:
    """The DDL and the INSERT of one request (table names numbered: one catalog per mode)."""
    streaming = request["mode"] == "streaming"
    watermark = (f",\n  WATERMARK FOR event_time AS event_time - {interval(request['delay_ms'])}" if streaming else "")
    source = f"""CREATE TEMPORARY TABLE events_{n} (
  user_id BIGINT, amount BIGINT, event_ms BIGINT, arrival_ms BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(event_ms, 3){watermark}
) WITH ('connector' = 'filesystem', 'path' = '{request['path']}', 'format' = 'csv')"""
    columns = "user_id BIGINT, window_start BIGINT, window_end BIGINT, clicks BIGINT, total BIGINT"
    if request["window"] == "order":  # the rows, ordered by their time attribute (a temporal sort)
        columns = "user_id BIGINT, amount BIGINT, event_ms BIGINT"
    if request.get("out"):
        sink = (f"CREATE TEMPORARY TABLE out_{n} ({columns}) WITH ('connector' = 'filesystem', "
                f"'path' = '{request['out']}', 'format' = 'csv')")
    else:
        sink = f"CREATE TEMPORARY TABLE out_{n} ({columns}) WITH ('connector' = 'blackhole')"
    if request["window"] == "order":
        return [source, sink, f"INSERT INTO out_{n}\nSELECT user_id, amount, event_ms FROM events_{n}\n"
                              "ORDER BY event_time, user_id"]
    if request["window"] == "tumble":
        tvf = f"TUMBLE(TABLE events_{n}, DESCRIPTOR(event_time), INTERVAL '1' MINUTE)"
    else:
        tvf = f"SESSION(TABLE events_{n} PARTITION BY user_id, DESCRIPTOR(event_time), INTERVAL '5' MINUTE)"
    epoch = "TIMESTAMP '1970-01-01 00:00:00'"
    millis = "CAST(TIMESTAMPDIFF(SECOND, {e}, {c}) AS BIGINT) * 1000 + EXTRACT(MILLISECOND FROM {c}) % 1000"
    insert = f"""INSERT INTO out_{n}
SELECT user_id, {millis.format(e=epoch, c='window_start')}, {millis.format(e=epoch, c='window_end')},
       COUNT(*), SUM(amount)
FROM TABLE({tvf})
GROUP BY user_id, window_start, window_end"""
    return [source, sink, insert]


def job_profile(port: int, job_id: str) -> dict:
    """The job as the cluster saw it (REST API): its running time, without planning and
    submission, and each operator chain's time and records (`vertices`)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs/{job_id}", timeout=30) as reply:
        job = json.load(reply)
    return {"job_run_s": round(job["duration"] / 1000, 3),
            "vertices": [{"name": v["name"][:160], "parallelism": v["parallelism"],
                          "seconds": round(v["duration"] / 1000, 3),
                          "records_in": v.get("metrics", {}).get("read-records"),
                          "records_out": v.get("metrics", {}).get("write-records")} for v in job["vertices"]]}


def run(envs: dict, request: dict, n: int, port: int) -> dict:
    env = envs[request["mode"]]
    *ddl, insert = statements(request, n)
    for statement in ddl:
        env.execute_sql(statement)
    start = time.perf_counter()
    result = env.execute_sql(insert)
    result.wait()
    seconds = time.perf_counter() - start
    job_id = str(result.get_job_client().get_job_id())
    return dict({"seconds": round(seconds, 3), "job_id": job_id}, **job_profile(port, job_id))


def peak_rss_mb() -> int:
    """Peak resident memory (VmHWM) of this process and the JVM it started, in MB."""
    total = 0
    pids = [os.getpid()]
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024)


def answer(obj: dict) -> None:
    """One answer line, marked (the JVM shares this stdout and may print on it too)."""
    print(ANSWER + json.dumps(obj), flush=True)


def main() -> int:
    import pyflink.version

    start = time.perf_counter()
    cluster, port = start_cluster()
    envs = {mode: table_env(mode, port) for mode in ("batch", "streaming")}
    startup = time.perf_counter() - start
    answer({"ready": True, "startup_s": round(startup, 3), "flink": pyflink.version.__version__,
            "parallelism": PARALLELISM, "pid": os.getpid()})
    n = 0
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            n += 1
            try:
                reply = dict(run(envs, request, n, port), peak_rss_mb=peak_rss_mb())
            except Exception as error:  # noqa: BLE001 - reported to the caller, which raises it
                reply = {"error": f"{type(error).__name__}: {error}"[:6000]}
            answer(reply)
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
