"""Running a pane stream: write it to a sink with a checkpoint, a trigger, and optionally finish it."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from ...columns import DROPPED, PANE
from ...errors import SqlflowUnsupportedError
from ..analysis import carried_errors
from ..lifetimes import is_connect
from ..log_filter import quiet
from ..conf import FILE_FORMATS, STREAMING_EXECUTOR, STREAMING_EXECUTORS
from ..conf import get as conf_get
from ..report import ATTRIBUTE
from ..sinks.postgres import FORMAT as POSTGRES
from ..sinks.postgres import postgres_sink
from .pane_stream import (PaneStream, aggregated, clear_finish_markers, fresh_checkpoint, named_and_triggered,
                          no_finish_dir,
                          pane_streams)
from ..session import keeps_active_session
from .session_conf import settings_for
from .stateful import project_batch

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.streaming import StreamingQuery

#: the executor `start` picks for a stream whose sink sqlflow writes (`choose_executor`)
DEFAULT_EXECUTOR = "operator"
#: sinks that keep nothing across a restart
_SCRATCH = ("memory", "console")


def start(stream: PaneStream | DataFrame, *, format: str = "parquet", path: str | None = None,
          table: str | None = None, query_name: str | None = None, checkpoint: str | None = None,
          trigger_interval: str | None = None, available_now: bool = False, finish: bool = False,
          options: dict[str, Any] | None = None, await_termination: bool | None = None,
          dropped_path: str | None = None, output_mode: str | None = None,
          executor: str | None = None, url: str | None = None) -> "StreamingQuery":
    """Write a pane stream to a sink and start it.

    - `format`: json, csv, parquet (with `path`), memory (with `query_name`), console, or any
      format Spark knows; `table`: write to a catalog table instead (`toTable`);
    - `checkpoint`: the checkpoint location (required for file sinks and tables; restart a query
      from it after a failure: exactly-once for file sinks and tables);
    - `trigger_interval`: e.g. "10 seconds": micro-batch period, and so the resolution of PERIOD and
      DELAY triggers (default: as soon as the previous batch is done);
    - `available_now`: process what is available, then stop; with `finish=True` the stream is
      then finished (every window emitted) by a second availableNow run that reads the finish
      marker. Both wait for termination and return the last query. A run from a fresh
      checkpoint first deletes the markers earlier runs left in its finish directory (a marker
      belongs to the run that wrote it).
    - `output_mode`: Spark's output mode; default append, or complete for a result that
      aggregates the panes downstream (docs/pipelines.md: a streaming aggregation without a
      watermark; complete and update need a sink that supports them: memory, console, foreachBatch);
    - `format="postgres"` with `table` (`schema.table`) and `url` (None: the PG* environment
      variables): keep a current-results table in PostgreSQL, exactly once with a checkpoint
      (sqlflow/spark/sinks/postgres.py, docs/postgres.md); `options` may give its `keys`, `mode`
      and `query_id` for a stream that is not a `sqlflow.sql` result;
    - `dropped_path`: also write the rows the stream dropped (file formats only): of a
      `sqlflow.sql` result (the panes then as its statement gives them, its own columns) or of a
      PaneStream. Both outputs are then written by foreachBatch, one directory per micro-batch
      (`<path>/batch_id=N`, overwritten when Spark re-runs a batch after a failure, so still
      exactly once), on either executor; read them with spark.read.<format>(path). On the
      operator a stream built without `keep_dropped` runs as its twin built with it
      (`PaneStream.keeping_dropped`: the stateful operator, whose state a checkpoint keeps: add
      or remove `dropped_path` with a new checkpoint).
    - `executor`: "owned" runs the stream through foreachBatch (sqlflow/spark/streaming/owned.py:
      a small micro-batch stepped in the driver, a larger one by Spark's aggregation for partial
      aggregates and one Arrow call per bucket, state versions under the checkpoint, each batch's
      output in `<path>/batch_id=N`), "operator" the stream's own
      operator, "auto" (default: `spark.sqlflow.streaming.executor`) the owned one wherever it can
      (`choose_executor` says why not).
    """
    if isinstance(stream, PaneStream):
        finishers, df = [stream], stream.panes
    else:
        finishers, df = pane_streams(stream), stream
    quiet(df.sparkSession)  # Spark's warnings about the internals of the stream
    if dropped_path is not None:
        _check_dropped(stream, finishers, df, format=format, path=path, checkpoint=checkpoint,
                       output_mode=output_mode)
    chosen, _ = choose_executor(df.sparkSession, finishers, df, format=format, table=table, output_mode=output_mode,
                                executor=executor, checkpoint=checkpoint)
    if chosen == "owned":
        return _start_owned(stream, finishers[0], format=format, path=path, query_name=query_name,
                            checkpoint=checkpoint, trigger_interval=trigger_interval, available_now=available_now,
                            finish=finish, options=options, dropped_path=dropped_path)
    if finish and (not finishers or any(s.finish_dir is None for s in finishers)):
        raise no_finish_dir()
    if finish and not available_now:
        raise SqlflowUnsupportedError("finish=True needs available_now=True (or call PaneStream.finish() "
                                      "on a running stream)", clause="STREAM")

    foreach = dropped_path is not None or format == POSTGRES
    if dropped_path is not None:  # the operator lists the dropped rows: this stream, or its twin that does
        finishers = [_keeping_dropped(finishers[0])]
    if format == POSTGRES:
        if table is None or checkpoint is None:
            raise SqlflowUnsupportedError("a postgres sink needs a table and a checkpoint location", clause="INSERT")
        sink = postgres_sink(url, table, query=df, **(options or {}))
        sink.fallback_query_id = f"checkpoint {checkpoint}"
        w = df.writeStream.foreachBatch(sink)
    elif dropped_path is not None:
        kept = finishers[0]
        assert kept.raw is not None and path is not None  # _check_dropped, _keeping_dropped
        final = None if isinstance(stream, PaneStream) else _statement_over(stream)
        w = kept.raw.writeStream.foreachBatch(_split_batch(kept, format, path, dropped_path, options, final,
                                                           _dropped_names(stream)))
    else:
        w = df.writeStream.outputMode(output_mode or ("complete" if aggregated(df) else "append"))
        if options:
            w = w.options(**{k: str(v) for k, v in options.items()})
    if checkpoint is not None:
        w = w.option("checkpointLocation", checkpoint)
    w = named_and_triggered(w, query_name=query_name, available_now=available_now, finish=finish,
                            trigger_interval=trigger_interval)
    if table is None and not foreach:
        w = w.format(format)
        if format in FILE_FORMATS:
            if path is None:
                raise SqlflowUnsupportedError(f"a {format} sink needs a path", clause="INSERT")
            if checkpoint is None:
                raise SqlflowUnsupportedError(f"a {format} sink needs a checkpoint location", clause="INSERT")
    stateful = any(s.operator == "stateful" for s in finishers)

    def launch() -> "StreamingQuery":
        if fresh_checkpoint(df.sparkSession, checkpoint, query_name):  # a new run: no earlier run's marker ends it
            clear_finish_markers(finishers)
        with settings_for(df.sparkSession, finishers, checkpoint):  # RocksDB, partitions, files: this query's
            if foreach:
                return w.start()
            if table is not None:
                return w.toTable(table)
            if format in FILE_FORMATS:
                return w.start(path)
            return w.start()

    def run(query: "StreamingQuery") -> None:
        if finish:
            # availableNow fixes every source's end offset when it starts, so the finish marker could
            # not come after the data in one run: process what is there, finish, process, stop.
            query.processAllAvailable()
            for finisher in finishers:
                finisher.finish()
            query.processAllAvailable()
            query.stop()
        elif available_now if await_termination is None else await_termination:
            query.awaitTermination()

    # a memory or console sink cannot restart from a checkpoint of its own (Spark refuses: "does
    # not support recovering from checkpoint location"): started again only on a fresh one
    restartable = table is not None or foreach or format not in _SCRATCH or checkpoint is None
    with carried_errors():  # raised in a worker: sqlflow's error, not Spark's stack around it
        return run_with_retries(launch, run, attempts=START_ATTEMPTS if stateful and restartable else 1,
                                pause=RETRY_PAUSE)


def _check_dropped(stream, finishers: list[PaneStream], df, *, format: str, path: str | None,
                   checkpoint: str | None, output_mode: str | None) -> None:
    """What `dropped_path` needs, whichever executor runs the stream (a located error else)."""
    if format not in FILE_FORMATS or path is None or checkpoint is None:
        raise SqlflowUnsupportedError("dropped_path needs a file format, a path and a checkpoint", clause="STREAM")
    if len(finishers) != 1:
        raise SqlflowUnsupportedError(
            f"dropped_path needs one windowed SELECT (or ordering) over a stream; this has {len(finishers) or 'none'}"
            + (": give each its own INSERT INTO (or start)" if finishers else ""), clause="STREAM")
    if output_mode not in (None, "append") or aggregated(df):
        raise SqlflowUnsupportedError(
            "dropped_path writes each micro-batch's panes and dropped rows by batch id; a statement that aggregates "
            "the panes downstream (complete or update mode) has no result per batch", clause="STREAM",
            hint="write the windowed SELECT with its dropped rows, and aggregate its output where you read it")
    only = finishers[0]
    if only.dropped is None and only.keeping_dropped is None and (only.owned is None or only.owned.why_not):
        raise SqlflowUnsupportedError("dropped_path needs a stream whose operator lists its dropped rows "
                                      "(a PaneStream built with keep_dropped=True)", clause="STREAM")


def _keeping_dropped(stream: PaneStream) -> PaneStream:
    """The stream whose operator output lists its dropped rows: itself, or its twin built so
    (`PaneStream.keeping_dropped`: the stateful operator, for the operator path's foreachBatch)."""
    if stream.dropped is not None and stream.raw is not None:
        return stream
    if stream.keeping_dropped is None:
        raise SqlflowUnsupportedError("dropped_path needs a stream whose operator lists its dropped rows "
                                      "(a PaneStream built with keep_dropped=True)", clause="STREAM")
    return stream.keeping_dropped()


def choose_executor(spark, finishers: list[PaneStream], df, *, format: str, table: str | None = None,
                    output_mode: str | None = None, executor: str | None = None,
                    checkpoint: str | None = None) -> tuple[str, str]:
    """Which executor runs a stream that `start` writes ("owned" or "operator") and why."""
    wanted = (executor or conf_get(spark, STREAMING_EXECUTOR, DEFAULT_EXECUTOR) or DEFAULT_EXECUTOR).lower()
    if wanted not in STREAMING_EXECUTORS:
        raise SqlflowUnsupportedError(f"{STREAMING_EXECUTOR} must be auto, owned or operator, got {wanted!r}",
                                      clause="STREAM")
    if wanted == "operator":
        return "operator", f"{STREAMING_EXECUTOR} = operator"
    obstacle = owned_obstacle_of(finishers, df, format=format, table=table, output_mode=output_mode,
                                 checkpoint=checkpoint)
    if obstacle is None:
        return "owned", ("sqlflow writes the sink: foreachBatch, a small micro-batch stepped in the driver, a larger "
                         "one by Spark's partial aggregation and one Arrow call per bucket")
    if wanted == "owned":
        raise SqlflowUnsupportedError(f"the owned-sink executor cannot run this stream: {obstacle}", clause="STREAM",
                                      hint=f"SET {STREAMING_EXECUTOR} = auto")
    return "operator", f"not the owned-sink executor: {obstacle}"


def owned_obstacle_of(finishers: list[PaneStream], df, *, format: str, table: str | None = None,
                      output_mode: str | None = None, checkpoint: str | None = None) -> str | None:
    """Why the owned-sink executor cannot run this stream into this sink (None: it can)."""
    from .owned import SINKS, connect_obstacle

    if len(finishers) != 1:
        return "not one windowed SELECT over a stream" if finishers else "not a sqlflow pane stream"
    recipe = finishers[0].owned
    if recipe is None:
        return "a chained stage (it reads another stage's panes)"
    if recipe.why_not is not None:
        return recipe.why_not
    if table is not None:
        return "a table sink"
    if output_mode not in (None, "append") or aggregated(df):
        return "an aggregation of the panes downstream (complete or update mode)"
    if format not in SINKS:
        return f"a {format} sink"
    if is_connect(df.sparkSession):
        return connect_obstacle(df.sparkSession, checkpoint)
    return None


def _start_owned(stream, pane_stream: PaneStream, *, format, path, query_name, checkpoint, trigger_interval,
                 available_now, finish, options, dropped_path=None):
    from .owned import OwnedSink, start_owned

    if format in FILE_FORMATS and (path is None or checkpoint is None):
        raise SqlflowUnsupportedError(f"a {format} sink needs a path and a checkpoint location", clause="INSERT")
    if finish and not available_now:
        raise SqlflowUnsupportedError("finish=True needs available_now=True (or call PaneStream.finish() "
                                      "on a running stream)", clause="STREAM")
    if finish and pane_stream.finish_dir is None:  # before anything starts, as on the operator
        raise no_finish_dir()
    if fresh_checkpoint(pane_stream.panes.sparkSession, checkpoint, query_name):  # a new run: no earlier marker ends it
        clear_finish_markers([pane_stream])
    if checkpoint is None:  # memory, noop, console: a checkpoint of its own, as Spark gives those sinks
        import tempfile
        checkpoint = tempfile.mkdtemp(prefix="sqlflow-owned-")
    final = None
    if not isinstance(stream, PaneStream):  # a sqlflow.sql result: its statement over each batch's panes
        final = _statement_over(stream)
    sink = OwnedSink(format, path=path, query_name=query_name, options=options, dropped_path=dropped_path,
                     dropped_names=_dropped_names(stream))
    return start_owned(pane_stream.owned, sink=sink, checkpoint=checkpoint, query_name=query_name,
                       trigger_interval=trigger_interval, available_now=available_now, finish=finish, final=final)


def _dropped_names(stream) -> dict[str, str]:
    """A `sqlflow.sql` result's names of its dropped rows' keys, by column (as in the query: `k`
    for `GROUP BY k`, not the stage's own name)."""
    report = getattr(stream, ATTRIBUTE, None)
    if report is None:
        return {}
    return next((s.extra.get("dropped_names", {}) for s in report.stages if "stream" in s.extra), {})


def _statement_over(df):
    """A function of one micro-batch's panes giving the statement's result over them: the panes
    stand in for the stream stage's view in the statement's Spark SQL."""
    report = getattr(df, ATTRIBUTE)
    stage = next(s for s in report.stages if "stream" in s.extra)
    view, sql, args = stage.extra["stream_view"], report.sql, report.args

    def final(panes):
        panes.createOrReplaceTempView(view)
        return panes.sparkSession.sql(sql, args or None)

    return final


#: Spark's message when a Python process the driver started for a stateful query (TWS's pre-init
#: runner) did not connect back within Spark's fixed 10 seconds (docs/streaming.md, section 10)
CONNECT_BACK = "Python worker failed to connect back"
#: how many times `start` starts a stateful query that failed so, when it waits for the query,
#: and the seconds it waits before the n-th new start (n x this: the load may pass)
START_ATTEMPTS = 3
RETRY_PAUSE = 5.0


def run_with_retries(launch, run, *, attempts: int, pause: float = 0.0):
    """`run(launch())`, started again (from the same checkpoint) when the query failed because its
    Python process did not connect back in time: Spark plans the first batch of a run before it
    writes anything, so a new start computes the same output. A start that fails so (Spark
    Connect's foreachBatch starts its Python process in `start`) is made again too. Returns the
    last query.

    >>> class Failed(Exception):
    ...     pass
    >>> tries = []
    >>> def run(query):
    ...     tries.append(query)
    ...     if len(tries) < 3:
    ...         raise Failed(f"[STREAM_FAILED] ... terminated with exception: {CONNECT_BACK}.")
    >>> run_with_retries(lambda: f"query {len(tries) + 1}", run, attempts=3), len(tries)
    ('query 3', 3)
    >>> run_with_retries(lambda: "q", lambda q: 1 / 0, attempts=3)
    Traceback (most recent call last):
    ZeroDivisionError: division by zero
    >>> starts = []
    >>> def launch():
    ...     starts.append(1)
    ...     if len(starts) < 2:
    ...         raise Failed(CONNECT_BACK)
    ...     return "started"
    >>> run_with_retries(launch, lambda q: None, attempts=3), len(starts)
    ('started', 2)
    """
    for attempt in range(1, attempts + 1):
        query = None
        try:
            query = launch()
            run(query)
            return query
        except Exception as error:  # only the connect-back failure is retried
            if attempt == attempts or CONNECT_BACK not in str(error):
                raise
            if query is not None and hasattr(query, "stop"):
                query.stop()
            time.sleep(pause * attempt)
    raise AssertionError("unreachable")


def _split_batch(stream: PaneStream, format: str, path: str, dropped_path: str, options, final=None,
                 dropped_names: dict[str, str] | None = None):
    """foreachBatch: the panes and the dropped rows of one micro-batch, each to its own directory
    named after the batch (overwritten when Spark re-runs the batch: exactly once). `final`: a
    `sqlflow.sql` result's statement over the batch's panes (`_statement_over`), and
    `dropped_names` its names of the dropped rows' keys, as the owned-sink executor writes them."""

    from .owned import OwnedSink  # the owned-sink executor's file sink: the same directories and overwriting

    sink = OwnedSink(format, path=path, options=options, dropped_path=dropped_path, dropped_names=dropped_names or {})

    @keeps_active_session
    def write(batch_df, batch_id: int) -> None:
        batch_df.persist()
        try:
            panes = project_batch(batch_df, stream, PANE)
            sink.write(final(panes) if final is not None else panes, batch_id)
            sink.write_dropped(project_batch(batch_df, stream, DROPPED), batch_id)
        finally:
            batch_df.unpersist()

    return write
