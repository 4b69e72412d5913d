"""Running a plan as a Spark stream over files written batch by batch, and the engine oracles the
streaming panes must equal: `Engine.advance` per micro-batch and the replay `Engine.run`.

Every micro-batch records (through the operator's observed metrics) its processing time and
watermark; the oracles replay exactly those: rows of the k-th data batch arrive at its time,
are judged against the watermark of the batch before, then the watermark steps to the batch's own.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.engine.runner import Engine
from sqlflow.engine.watermarks import Timeline
from sqlflow.spark import streaming as S
from sqlflow.time import MINUTE, NEG_INF, SECOND

#: the pane columns that are TIMESTAMPs on Spark and int64 microseconds in the engine
TIME_COLUMNS = ("window_start", "window_end", "emit_time", "output_time")
SORT = ["emit_time", "window_start", "window_end", "k", "pane_index", "is_retraction"]


def write_batches(files, batches: list[pd.DataFrame]) -> None:
    for batch in batches:
        files.write(batch.rename(columns={EVENT_TIME: "et"}))


def source(spark, files, schema: str = "k string, et long, v long"):
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(files.path))
            .withColumnRenamed("et", EVENT_TIME))


def collect_panes(spark, name: str) -> pd.DataFrame:
    """The memory sink's panes with times as int64 microseconds (NULL windows as None)."""
    df = spark.table(name)
    cols = []
    for f in df.schema.fields:
        if f.name in TIME_COLUMNS:
            cols.append(f"unix_micros({f.name}) AS {f.name}")
        else:
            cols.append(f"`{f.name}`")
    return canonical(df.selectExpr(*cols).toPandas())


def canonical(panes: pd.DataFrame) -> pd.DataFrame:
    panes = panes.copy()
    if "is_retraction" not in panes:
        panes["is_retraction"] = False
    for c in (c for c in TIME_COLUMNS if c in panes):
        panes[c] = panes[c].astype("Int64")
    for c in panes.columns:
        if panes[c].dtype == object and len(panes) and isinstance(panes[c].iloc[0], (list, np.ndarray)):
            panes[c] = panes[c].map(lambda v: tuple(v) if v is not None else None)
    cols = [c for c in SORT if c in panes]
    return panes.sort_values(cols, na_position="first", kind="stable").reset_index(drop=True)


def batch_log(query, files_path: str, name: str = S.METRICS_NAME) -> list[dict]:
    """Per micro-batch: processing time, watermark (engine us), data rows read, finished."""
    log = []
    for progress in query.recentProgress:
        observed = progress.get("observedMetrics", {}).get(name)
        if observed is None or observed["batch_time"] is None:
            continue
        rows = sum(s["numInputRows"] for s in progress["sources"] if files_path in s["description"])
        log.append({"batch": progress["batchId"], "p": int(observed["batch_time"]),
                    "wm": int(observed["watermark"]), "rows": rows, "finished": bool(observed["finished"]),
                    "spark_dropped": sum(op["numRowsDroppedByWatermark"] for op in progress["stateOperators"])})
    return log


def advance_oracle(plan: EnginePlan, batches: list[pd.DataFrame], log: list[dict]):
    """Engine.advance over the same micro-batches: (panes, engine drop count)."""
    engine = Engine(plan)
    state, prev, out, dropped = {}, NEG_INF, [], 0
    data = iter(batches)
    for b in log:
        rows = next(data) if b["rows"] else batches[0].iloc[:0]
        result, state = engine.advance(state, rows, p=b["p"], wm_prev=prev, wm_new=b["wm"],
                                       end_of_input=b["finished"])
        out.append(result.panes)
        dropped += result.metrics["dropped_too_late"]
        prev = max(prev, b["wm"])
    assert next(data, None) is None, "every data batch was seen"
    return canonical(pd.concat(out, ignore_index=True)), dropped


def replay_oracle(plan: EnginePlan, batches: list[pd.DataFrame], log: list[dict]):
    """The replay path: each row arrives at its batch's time; the watermark steps at batch times."""
    times = [b["p"] for b in log if b["rows"]]
    rows = pd.concat([batch.assign(**{ARRIVAL_TIME: t}) for batch, t in zip(batches, times)], ignore_index=True)
    steps = Timeline.from_steps([b["p"] for b in log], np.maximum.accumulate([b["wm"] for b in log]))
    result = Engine(plan).run(rows, timeline=steps, replay=True, p_end=log[-1]["p"],
                              timer_instants=np.array([b["p"] for b in log], np.int64))
    return canonical(result.panes), result.metrics["dropped_too_late"]


def run_stream(spark, files, plan: EnginePlan, batches: list[pd.DataFrame], *, delay: int, name: str,
               finish: bool = True, **options):
    """Run the stream to its end over files written beforehand (`files`: a StreamFiles directory);
    returns (panes, query, batch log, PaneStream)."""
    tmp_path = files.path.parent
    write_batches(files, batches)
    stream = S.build_stream(source(spark, files), plan, delay=delay,
                            finish_dir=str(tmp_path / "finish") if finish else None, **options)
    query = S.start(stream, format="memory", query_name=name, checkpoint=str(tmp_path / "cp"),
                    available_now=True, finish=finish)
    return collect_panes(spark, name), query, batch_log(query, str(files.path)), stream


def paper_rows() -> pd.DataFrame:
    """The paper's running example (sqlflow/data/paper_example.json): k, v, event time, and the
    one-minute round each row arrives in (figure 11)."""
    import json
    from importlib import resources

    example = json.loads(resources.files("sqlflow").joinpath("data/paper_example.json").read_text())

    def clock(text: str) -> int:
        h, m, s = map(int, text.split(":"))
        return (h * 3600 + m * 60 + s) * SECOND

    events = example["inputs"]["events"]
    arrival = np.array([clock(e["proc_time"]) for e in events])
    return pd.DataFrame({"k": [e["key"] for e in events], EVENT_TIME: [clock(e["event_time"]) for e in events],
                         "v": [e["value"] for e in events], "round": -(-arrival // MINUTE)})
