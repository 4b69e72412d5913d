"""The owned-sink executor: a pane stream whose sink sqlflow writes, run micro-batch by micro-batch
through `foreachBatch` (docs/streaming.md, section 3.0).

Per micro-batch N (Spark's batch id, its timestamp p(N) from the offset log):

1. the watermark: W(N) = the largest event time of the batches before N minus the delay (Spark's
   rule, whole milliseconds; `udfs.batch_step.batch_watermark`), kept in the state's bookkeeping;
   the batch's rows are judged against W(N-1) and the watermark steps to W(N) (`Engine.advance`);
2. where the aggregates combine exactly (`combine.combinable`: FIXED windows, a watermark-only
   trigger, COUNT/SUM/MIN/MAX) and no `dropped_path` asks for the dropped rows one by one, Spark's
   own aggregation turns the batch's rows into partial aggregates per key and window, with their
   weight and earliest and latest event time;
3. a batch of at most `spark.sqlflow.streaming.driverStepRows` rows is stepped in the driver:
   collected as Arrow, combined by pyarrow where Spark would combine it, every bucket stepped in
   turn from its state file (`udfs.batch_step.driver_batch`), the panes to the sink as a local
   DataFrame; a larger one runs one Arrow call per hash bucket of keys: the batch's rows of the
   bucket with the bucket's state of batch N-1 (`udfs/batch_step.py`, the step the
   transformWithState operator runs), giving its panes and its new state;
4. the state of every bucket is written as version N (`<checkpoint>/sqlflow-state/v=N/`, parquet,
   one row per bucket with its format version; `_sqlflow.json` beside it, written last, marks the
   version complete and holds the watermark log), then the panes go to the sink, idempotently
   (files: `<path>/batch_id=N`, overwritten), and with a `dropped_path` the batch's dropped rows
   (the engine's, and under ASCENDING PER those behind their partition) to
   `<dropped_path>/batch_id=N` alike. Spark commits the batch after that;
5. the driver-local step of a file or noop sink delivers its panes while Spark commits the batch
   and plans the next (`Delivery`): they are written to the version (`OUTBOX`) before its
   bookkeeping, the sink's write runs in a thread once the batch function returns, and the file
   goes when the write is done. The next batch, and the query's `processAllAvailable`,
   `awaitTermination` and `stop` (`OwnedQuery`), wait for it, and a failed write fails them all;
   a run that finds a complete version's panes still there (the write failed, or the driver died
   after Spark's commit, before it) writes them as it starts.

A batch Spark re-runs after a failure (same id, same rows, same timestamp) reads the latest complete
version before N and rewrites version N and output N: exactly once by batch id. Old versions are
pruned (the last `KEEP_VERSIONS` stay).

On Spark Connect the run (`OwnedRun`) is pickled to a Python process beside the server: no py4j
object and no client session in it (`OwnedRun.__getstate__`), the checkpoint read and written
with Python's file I/O (a local one), the counters counted by an aggregation rather than an
`Observation`, and kept in the bookkeeping for the client (`Book.progress`, `OwnedRun.refresh`).
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StreamingQuery

from ... import ast
from ...columns import (BEHIND_PARTITION, BUCKET, DATA, DROPPED, DROPPED_EVENT_TIME, DROPPED_REASON,
                        DROPPED_SOURCE, EMIT_TIME, EVENT_TIME, FINISH, HEARTBEAT, KIND, LATEST, PANE, PARTITION,
                        SOURCE, STATE, STATE_BYTES, STATE_FORMAT,
                        STATE_META, WEIGHT, WINDOW_END, WINDOW_START, PARTIAL_OVERFLOW, metric_column, part_column,
                        state_meta_column)
from ...engine import COMBINING, STREAM, Aggregate, EnginePlan, path_for, state_codec
from ...errors import SqlflowExecutionError, SqlflowUnsupportedError
from ...plan.relations import quoted
from ...time import NEG_INF, POS_INF
from ...udfs.batch_step import (BUCKET_LAYOUT, SPARK_LAYOUT, BatchSpec, BatchStep, StateFiles, batch_watermark,
                                driver_batch, file_system, metrics_columns, state_columns)
from ...udfs.micro_batch_combine import batch_partials
from ...udfs.streaming import StreamSpec
from ..conf import (ARROW_LOCAL_RELATION_THRESHOLD, DRIVER_STEP_BYTES_PER_ROW, FILE_FORMATS, STREAMING_DIRECT_READ,
                    cores, driver_step_rows, estimated_bytes, flag, streaming_buckets)
from ..lifetimes import is_connect
from ..session import keeps_active_session
from .checkpoint_files import CheckpointFiles
from .pane_stream import named_and_triggered, no_finish_dir
from .combine import combinable
from .direct_read import DirectRead, batch_files
from .per_partition import BEHIND, PartitionRule, flag_behind, rows_of, step_partitions, table_of
from .stateful import dropped_columns, operator_schema, packable, pane_columns

#: where the state versions live under the checkpoint, and how many stay
STATE_DIR = "sqlflow-state"
KEEP_VERSIONS = 3
#: the bookkeeping of a complete version (written last)
BOOK = "_sqlflow.json"
#: the observed struct of a batch's counters
BATCH_COUNTERS = "sqlflow_batch"
#: the sinks the owned executor writes
SINKS = (*FILE_FORMATS, "memory", "noop", "console")
#: the sinks whose write of a driver-local step's panes overlaps Spark's commit (`Delivery`): not
#: the memory sink (its view is read as soon as a batch is processed) nor the console (its
#: output would interleave with the next batch's)
DELIVERED_AFTER = (*FILE_FORMATS, "noop")
#: a version's panes not yet written to the sink (`Delivery`), an Arrow IPC file in the version
OUTBOX = "_panes.arrow"
#: the most bytes of the driver's Arrow rows a task of `local_frame` carries: Spark warns of every
#: task above 1000 KiB ("contains a task of very large size"), one line a batch of f3o's panes
LOCAL_TASK_BYTES = 768 * 1024
#: how many batches' counters a Spark Connect run keeps in its bookkeeping (`Book.progress`; as
#: Spark's `recentProgress`)
REMOTE_PROGRESS = 100
#: the live-state counters summed over the buckets' STATE rows: (state meta field, counter)
LIVE_COUNTERS = (("keys", "state_keys"), ("windows", "state_windows"), ("bytes", "state_bytes"))
#: seconds the distributed step waits for its batch's counters after the sink's action (Spark
#: delivers an observation as the action that computed it ends: a bound, never a hang)
COUNTERS_WAIT = 10.0


@dataclass
class OwnedRecipe:
    """What the owned executor needs to run a pane stream (kept by `PaneStream.owned`)."""

    data: DataFrame  # the engine input stream (engine columns, no watermark)
    plan: EnginePlan
    delay: int  # us
    time_shift: int
    schema: T.StructType  # the panes' schema
    engine_types: dict
    decode: dict
    metrics_name: str
    finish_dir: str | None
    buckets: int | None
    why_not: str | None  # None: the owned executor can run it
    #: ASCENDING PER: the driver computes the watermark per partition (`per_partition`); `data`
    #: then has column PARTITION (and SOURCE, of several sources) and `delay` is unused
    partition: PartitionRule | None = None


def owned_obstacle(plan: EnginePlan, schema: T.StructType, *, sources=(), report=False,
                   grouping="bucket", spark_drops_late=False) -> str | None:
    """Why the owned executor cannot run this stream (None: it can)."""
    if sources:
        return "several watermarked sources"
    if report:
        return "a later windowed stage reads its output watermark"
    if grouping != "bucket" or spark_drops_late:
        return "grouping by key or Spark dropping late rows (measurement options of the operator)"
    if plan.windowing.domain is not ast.TimeDomain.EVENT_TIME:
        return f"ON {plan.windowing.domain.value} (each row's time is its micro-batch's)"
    if path_for(plan, input=STREAM).name != "micro-batch":
        return "a custom window function that merges (the per-key loop)"
    if not packable(schema):
        return "an input column of a type other than integers, floating point, strings and booleans"
    return None


def connect_obstacle(spark, checkpoint: str | None) -> str | None:
    """Why the owned-sink executor cannot run a stream on this Spark Connect session (None: it
    can). Its foreachBatch function runs in a Python process beside the server, which reads and
    writes the checkpoint's files with Python's file I/O, as the client reads the run's counters
    from them: a server in local mode, beside the client, and a local checkpoint."""
    from .checkpoint_files import local_only

    master = str(spark.conf.get("spark.master", "") or "")
    if not master.startswith("local"):
        return (f"Spark Connect with a server not in local mode (master {master!r}): the executor shares the "
                "checkpoint's local files with the server's Python process")
    if checkpoint is not None:
        try:
            local_only(checkpoint)
        except SqlflowUnsupportedError:
            return (f"Spark Connect with a checkpoint that is not a local absolute path ({checkpoint!r}): the "
                    "executor reads and writes it with Python's file I/O (Hadoop's file systems are the JVM's)")
    return None


def partial_plan(plan: EnginePlan) -> EnginePlan:
    """The plan over partial aggregates (`part_column(j)` holds aggregate j's partial)."""
    aggregates = tuple(Aggregate(COMBINING[a.kind], part_column(j), a.output, a.ignore_nulls)
                       for j, a in enumerate(plan.aggregates))
    return EnginePlan(plan.windowing, aggregates, keys=plan.keys, custom_windows=plan.custom_windows)


def partials_sql(plan: EnginePlan, view: str) -> str:
    """The query of a micro-batch's data rows (temp view `view`) as partial aggregates per bucket,
    key and FIXED window (Spark's own aggregation), with their weight and earliest and latest
    event time. A bucket's markers (NULL keys and times) form a group of their own, which keeps its
    kind. Grouped by the bucket first, so that Spark's hash partitioning by bucket serves the
    aggregation and the per-bucket call alike (one shuffle). SQL text: built once, it costs one
    round trip to the JVM a batch, where `pyspark.sql.functions` calls cost dozens.

    >>> from sqlflow.engine import Aggregate
    >>> w = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(60))), None, ast.AllowedLateness(ast.Duration(0)),
    ...                   ast.Emit(ast.AccumulationMode.DISCARDING))
    >>> print(partials_sql(EnginePlan(w, (Aggregate("sum", "v", "total"),), keys=("k",)), "rows"))
    SELECT `__sqlflow_bucket`, `__sqlflow_kind`, `k`, `__sqlflow_et`, `__sqlflow_latest`, `__sqlflow_part0`, \
`__sqlflow_weight`, (`__sqlflow_part0` IS NULL AND `__n0` > 0) AS `__sqlflow_partial_overflow` FROM (SELECT \
`__sqlflow_bucket`, `__sqlflow_kind`, `k`, min(`__sqlflow_et`) AS `__sqlflow_et`, max(`__sqlflow_et`) AS \
`__sqlflow_latest`, count(1) AS `__sqlflow_weight`, try_sum(`v`) AS `__sqlflow_part0`, count(`v`) AS `__n0` FROM \
`rows` GROUP BY `__sqlflow_bucket`, `__sqlflow_kind`, `k`, `__sqlflow_et` - pmod(`__sqlflow_et` - 0, 60))
    """
    window = plan.window
    if not isinstance(window, ast.Fixed):
        raise ValueError(f"a stream's rows combine per FIXED window, not {window}")
    et = quoted(EVENT_TIME)
    start = f"{et} - pmod({et} - {window.offset.micros}, {window.size.micros})"
    aggs = [f"min({et}) AS {et}", f"max({et}) AS {quoted(LATEST)}", f"count(1) AS {quoted(WEIGHT)}"]
    overflow = []
    for j, a in enumerate(plan.aggregates):
        c, part = (quoted(a.column) if a.column else "NULL"), quoted(part_column(j))
        if a.kind == "count_star":
            aggs.append(f"count(1) AS {part}")
        elif a.kind == "count":
            aggs.append(f"count({c}) AS {part}")
        elif a.kind == "sum":
            aggs += [f"try_sum({c}) AS {part}", f"count({c}) AS `__n{j}`"]
            overflow.append(f"({part} IS NULL AND `__n{j}` > 0)")
        else:
            aggs.append(f"{'min' if a.kind == 'min' else 'max'}({c}) AS {part}")
    group = [quoted(BUCKET), quoted(KIND), *[quoted(k) for k in plan.keys]]
    inner = f"SELECT {', '.join(group + aggs)} FROM {quoted(view)} GROUP BY {', '.join(group + [start])}"
    columns = [*group, et, quoted(LATEST), *[quoted(part_column(j)) for j in range(len(plan.aggregates))], quoted(WEIGHT)]
    flag = " OR ".join(overflow) or "false"
    return f"SELECT {', '.join(columns)}, {flag} AS {quoted(PARTIAL_OVERFLOW)} FROM ({inner})"


@dataclass
class Book:
    """A complete state version's bookkeeping (`BOOK`)."""

    batch: int
    p: int
    wm: int  # the watermark the batch stepped to (us)
    seen: int | None  # the largest event time up to and including the batch
    finished: bool
    buckets: int
    format: int = state_codec.FORMAT_VERSION
    log: list = field(default_factory=list)  # (p, W) of the batches so far (the last 1,000)
    #: ASCENDING PER: each partition's [value, latest event time, last arrival] after the batch
    partitions: list | None = None
    #: how the version's state files lie (`udfs.batch_step`: SPARK_LAYOUT, one parquet dataset
    #: Spark wrote, the first layout; BUCKET_LAYOUT, one file per bucket its call wrote)
    layout: int = SPARK_LAYOUT
    #: on Spark Connect (whose client cannot read the run's memory): the run that wrote the
    #: version (`OwnedRun.token`) and the per-batch counters of its last `REMOTE_PROGRESS` batches
    run: str | None = None
    progress: list | None = None

    def text(self) -> str:
        return json.dumps(self.__dict__)

    @staticmethod
    def of(text: str, where: str) -> "Book":
        values = json.loads(text)
        if values.get("format") != state_codec.FORMAT_VERSION:
            raise state_codec.StateFormatError(
                f"the state at {where} has format version {values.get('format')}; this sqlflow reads format "
                f"version {state_codec.FORMAT_VERSION}", clause="STREAM")
        layout = values.get("layout", SPARK_LAYOUT)
        if layout not in (SPARK_LAYOUT, BUCKET_LAYOUT):
            raise state_codec.StateFormatError(
                f"the state at {where} has layout {layout}; this sqlflow reads layouts {SPARK_LAYOUT} and "
                f"{BUCKET_LAYOUT}", clause="STREAM")
        return Book(**values)


@dataclass
class OwnedSink:
    """Where the owned executor writes each batch's result (idempotently by batch id)."""

    format: str
    path: str | None = None
    query_name: str | None = None
    options: dict[str, Any] | None = None
    batches: dict = field(default_factory=dict)  # memory: batch id -> rows
    session: Any = None  # memory: the session whose view holds the rows (foreachBatch's is a clone)
    #: where the dropped rows go, in the sink's file format (None: not kept)
    dropped_path: str | None = None
    #: their keys' names as the query names them, by column (a `sqlflow.sql` result's)
    dropped_names: dict[str, str] = field(default_factory=dict)

    def write(self, df: DataFrame, batch_id: int) -> None:
        if self.format in FILE_FORMATS:
            self._save(df, self.path, batch_id)
        elif self.format == "noop":
            df.write.format("noop").mode("overwrite").save()
        elif self.format == "console":
            df.show(truncate=False)
        elif self.format == "memory":
            self.batches[batch_id] = df.toArrow()
            import pyarrow as pa

            tables = [self.batches[b] for b in sorted(self.batches)]
            spark = self.session or df.sparkSession
            # one chunk: pyspark 4.3 makes a DataFrame of the first chunk of a chunked table only
            spark.createDataFrame(pa.concat_tables(tables).combine_chunks(), schema=df.schema).createOrReplaceTempView(
                self.query_name or "sqlflow_panes")

    def write_dropped(self, df: DataFrame, batch_id: int) -> None:
        """The batch's dropped rows to `<dropped_path>/batch_id=N` (overwritten: a re-run batch
        writes them once)."""
        self._save(df.withColumnsRenamed(self.dropped_names) if self.dropped_names else df, self.dropped_path,
                   batch_id)

    def _save(self, df: DataFrame, path: str | None, batch_id: int) -> None:
        writer = df.write.mode("overwrite").format(self.format)
        if self.options:
            writer = writer.options(**{k: str(v) for k, v in self.options.items()})
        writer.save(f"{(path or '').rstrip('/')}/batch_id={batch_id}")


#: fault injection for tests: called with (point, batch id) where a crash must lose and duplicate
#: nothing: "mid-batch" (the batch planned, nothing written), "after-outputs" (the state version's
#: files and the sink written, or the panes to the version's `OUTBOX`, not the bookkeeping),
#: "after-sink" (the bookkeeping written too, before Spark's commit), "before-delivery" (in the
#: `Delivery` thread, before the sink's write of the panes in the `OUTBOX`)
fault = None


def _reached(point: str, batch_id: int) -> None:
    if fault is not None:
        fault(point, batch_id)


#: the running owned queries, by query id: their per-batch counters and watermark log
RUNS: dict[str, "OwnedRun"] = {}


class OwnedRun:
    """The foreachBatch function of one owned query."""

    def __init__(self, spark: SparkSession, recipe: OwnedRecipe, checkpoint: str, sink: OwnedSink,
                 final=None):
        self.recipe, self.sink, self.final = recipe, sink, final
        #: a Spark Connect session: this object is pickled to a Python process beside the server,
        #: which runs the batches; the client reads the run's counters from the bookkeeping
        self.remote = is_connect(spark)
        self.files = CheckpointFiles(spark, checkpoint)
        plan = recipe.plan
        latest = self._latest_book(None)
        default = recipe.buckets or streaming_buckets(spark, keyed=bool(plan.keys))[0]
        self.buckets = latest.buckets if latest is not None else (max(1, int(default)) if plan.keys else 1)
        # dropped rows are listed row by row: a combined element would stand for several rows
        self.keep_dropped = sink.dropped_path is not None
        # (of several sources, each row keeps its source: too-late rows are counted per source)
        sources = recipe.partition.names if recipe.partition is not None else ()
        self.combine = not self.keep_dropped and not sources and combinable(plan, recipe.data.schema)
        run_plan = partial_plan(plan) if self.combine else plan
        engine_cols = [f.name for f in recipe.data.schema.fields if f.name != PARTITION]
        if self.combine:
            engine_cols = [*plan.keys, EVENT_TIME, *[part_column(j) for j in range(len(plan.aggregates))], WEIGHT]
        self.spec = StreamSpec(plan=run_plan, input_columns=tuple(engine_cols), weight=WEIGHT if self.combine else None,
                               shift=recipe.time_shift, keep_dropped=self.keep_dropped, sources=sources)
        self.spark_schema = T.StructType(operator_schema(self.spec, recipe.schema, recipe.engine_types).fields
                                         + [f for f in state_schema().fields])
        from pyspark.sql.pandas.types import to_arrow_schema
        self.arrow_schema = to_arrow_schema(self.spark_schema)
        self.pane_projection = pane_columns(spark, self.spec, recipe.schema, recipe.decode)
        self.dropped_projection = dropped_columns(spark, plan, sources)
        self.token = uuid.uuid4().hex
        self.progress: list[dict] = []
        self.timings: list[dict] = []
        #: the driver-local step's phases of the batch (`timings`: collect, step, sink)
        self.parts: dict = {}
        self.book: Book | None = None  # the version this run wrote last
        self.pruned = False  # the versions before this run's have been pruned
        self.log: list[tuple[int, int]] = list(map(tuple, latest.log)) if latest is not None else []
        self.partitions = max(1, min(self.buckets, cores(spark)))
        #: the buckets' calls read and write their state files themselves (one Spark job a batch);
        #: else (a checkpoint pyarrow's file systems cannot open) Spark writes the versions
        self.bucket_files = self.files.opened_by_pyarrow()
        # built once, kept across batches (each pyspark.sql.functions call is a round trip to the JVM)
        self.rows_view = f"__sqlflow_owned_rows_{self.token}"
        self.partials_sql = partials_sql(plan, self.rows_view) if self.combine else ""
        self.markers: DataFrame | None = None
        self.pane_seq: tuple | None = None
        self.counters: Any = None
        self.row_fields: T.StructType | None = None
        self.local_seq: Any = None
        self.arrow_panes: Any = None  # `arrow_projection`'s function of the panes (None: Spark projects them)
        self.pane_fields: T.StructType | None = None
        #: `statement_projection` of the statement over the panes (None: not yet asked; (): Spark runs it)
        self.final_columns: tuple | None = None
        #: the driver-local step's limit, and the rows the last batch collected for it
        self.driver_rows = driver_step_rows(spark)
        self.last_rows = 0
        #: the driver-local step reads a batch of files itself where it can (`direct_read`): the
        #: session's query manager, which names the batch's files; the reading, planned at the
        #: first batch (None: not yet; False: Spark reads every batch)
        self.query_streams = (spark._jsparkSession.streams()
                              if not self.remote and flag(spark, STREAMING_DIRECT_READ, True) else None)
        self.direct: DirectRead | bool | None = None if self.query_streams is not None else False
        self.direct_read = False  # this batch's rows were read directly
        #: the driver-local step's panes go to the sink after the batch function returns (`Delivery`)
        self.delivers_after = not self.remote and sink.format in DELIVERED_AFTER
        self.delivery: Delivery | None = None  # the last batch's, running or done
        self.undelivered: tuple | None = None  # the batch's panes for its `Delivery` (DataFrame, batch id)
        self.outbox_checked = False  # a version's panes left by an earlier run were looked for

    def __getstate__(self) -> dict:
        """What a Spark Connect foreachBatch carries to the server: no DataFrame or session of the
        client (the input stream, the memory sink's session), nothing built over them."""
        from dataclasses import replace

        state = dict(self.__dict__)
        state["recipe"] = replace(self.recipe, data=cast(Any, None))
        state["sink"] = replace(self.sink, session=None, batches={})
        state.update(markers=None, pane_seq=None, counters=None, local_seq=None, delivery=None, undelivered=None,
                     query_streams=None, direct=False)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.remote and self.sink.format == "memory":
            # the foreachBatch worker unpickles this with the query's own session active, whose
            # views the client sees (each batch's session is a clone of it)
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            self.sink.session = ConnectSession.getActiveSession()

    def refresh(self) -> None:
        """A Spark Connect run, read from the client: its progress and watermark log as the latest
        complete version's bookkeeping has them (the batches ran in another process)."""
        book = self._latest_book(None)
        if book is not None and book.run == self.token:
            self.progress = list(book.progress or [])
            self.log = [tuple(s) for s in book.log]

    # ------------------------------------------------------------------ the stream

    def input(self) -> DataFrame:
        """The streaming DataFrame foreachBatch runs on: the engine input with its bucket and kind,
        and the finish markers, one row per bucket."""
        recipe, plan = self.recipe, self.recipe.plan
        data = recipe.data
        bucket = (F.pmod(F.hash(*[F.col(k) for k in plan.keys]), F.lit(self.buckets)) if plan.keys else F.lit(0))
        rows = data.withColumn(BUCKET, bucket.cast("int")).withColumn(KIND, F.lit(DATA).cast("int"))
        if recipe.finish_dir is not None:
            import os
            os.makedirs(recipe.finish_dir, exist_ok=True)
            control = data.sparkSession.readStream.schema("finish string").json(recipe.finish_dir)
            fin = control.select(F.explode(F.sequence(F.lit(0), F.lit(self.buckets - 1))).alias(BUCKET))
            fin = fin.select(*[(F.col(BUCKET) if c == BUCKET else F.lit(FINISH).cast("int").alias(c) if c == KIND
                                else F.lit(None).cast(rows.schema[c].dataType).alias(c)) for c in rows.columns])
            rows = rows.unionByName(fin)
        return rows

    # ------------------------------------------------------------------ one micro-batch

    @keeps_active_session
    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        self.wait_delivered()  # the batch before's panes are in the sink before anything of this one is written
        if not self.outbox_checked:
            self.deliver_left(batch_df.sparkSession)
        try:
            self._batch(batch_df, batch_id)
        except BaseException:
            self.undelivered = None  # (a version without bookkeeping: the batch runs again)
            raise
        if self.undelivered is not None:
            panes, batch = self.undelivered
            self.undelivered = None
            self.delivery = Delivery(self, panes, batch)

    def _batch(self, batch_df: DataFrame, batch_id: int) -> None:
        clock = [time.perf_counter()]

        def lap() -> None:
            clock.append(time.perf_counter())

        # the version this run wrote for the batch before, else the checkpoint's latest before it
        book = self.book if self.book is not None and self.book.batch == batch_id - 1 else self._latest_book(batch_id)
        p = self.files.batch_timestamp_ms(batch_id) * 1000
        wm_prev = book.wm if book is not None else NEG_INF
        seen = book.seen if book is not None else None
        finished = book.finished if book is not None else False
        rule = self.recipe.partition
        behind = 0
        table = flagged = None
        if rule is not None:  # ASCENDING PER: the watermark of the partitions (per_partition.py)
            table = table_of(book.partitions if book is not None else None, sources=bool(rule.sources))
            flagged = flag_behind(batch_df, table, rule).persist()
            table, wm_new, behind = step_partitions(flagged, table, p=p, rule=rule, wm_prev=wm_prev)
            wm_new = POS_INF if finished else wm_new
            batch_df = flagged.where(~F.col(BEHIND)).drop(BEHIND, PARTITION)
        else:
            wm_new = POS_INF if finished else max(wm_prev, batch_watermark(seen, self.recipe.delay,
                                                                             self.recipe.time_shift))
        where = self.files.path(f"{STATE_DIR}/v={book.batch}") if book is not None else "the checkpoint"
        version = f"{STATE_DIR}/v={batch_id}"
        files = (StateFiles(self.files.uri(f"{STATE_DIR}/v={book.batch}") if book is not None else None,
                            book.layout if book is not None else BUCKET_LAYOUT, self.files.uri(version))
                 if self.bucket_files else None)
        step = BatchStep(self.spec, self.arrow_schema, BatchSpec(p, wm_prev, wm_new, finished=finished, where=where,
                                                                  files=files), self.token)
        try:
            lap()
            _reached("mid-batch", batch_id)
            rows = self._small_batch(batch_df, batch_id) if files is not None else None
            if rows is not None:  # the driver-local step
                summary = self._driver_step(step, rows, batch_df.sparkSession, batch_id, flagged, p)
            else:
                summary = self._distributed_step(step, batch_df, batch_id, flagged, p, version,
                                                 where if book is not None else None)
            lap()
            _reached("after-outputs", batch_id)
            top = summary.pop("seen")
            seen = top if seen is None else (seen if top is None else max(seen, top))
            finished = finished or bool(summary.pop("finished_any"))
            self.log = [s for s in self.log if s[0] < p][-999:] + [(p, wm_new)]
            summary.update(batch_time=p, watermark=wm_new, finished=int(finished))
            if rule is not None:
                summary["input_rows"] += behind
                summary["dropped_behind_partition"] = behind
            entry = {"batchId": batch_id, **summary}
            progress = ([e for e in self.progress if e["batchId"] < batch_id][-(REMOTE_PROGRESS - 1):] + [entry]
                        if self.remote else None)
            new = Book(batch_id, p, POS_INF if finished else wm_new, seen, finished, self.buckets,
                       log=[list(s) for s in self.log], partitions=rows_of(table) if table is not None else None,
                       layout=BUCKET_LAYOUT if files is not None else SPARK_LAYOUT,
                       run=self.token if self.remote else None, progress=progress)
            self.files.write_text(f"{version}/{BOOK}", new.text())
            self.book = new
            self._prune(batch_id)
            _reached("after-sink", batch_id)
        finally:
            if flagged is not None:
                flagged.unpersist()
        lap()
        # seconds per phase: planning (state lookup, offsets), the batch's step (the driver-local
        # one's collect, engine and sink, or the distributed one's job: partials, the buckets' calls
        # writing the state version, the sink), the bookkeeping
        self.timings.append(dict(zip(("plan", "job", "book"), (round(b - a, 3) for a, b in zip(clock, clock[1:]))))
                            | self.parts)
        if progress is not None:
            self.progress = progress
        else:
            self.progress.append(entry)

    # ------------------------------------------------------------------ the driver-local step

    def _small_batch(self, batch_df: DataFrame, batch_id: int):
        """The batch's rows as Arrow in the driver when the driver-local step runs it, else None
        (docs/streaming.md 3.0, "The driver-local step"). The rule: at most
        `spark.sqlflow.streaming.driverStepRows` rows (0: never). The size is learnt without a
        second pass where it can be: after a batch with more rows than that, the next goes to the
        distributed step directly; otherwise the rows are collected with a limit of that many plus
        one, and a batch that reaches it goes to the distributed step (its rows read twice, once
        per jump in size; the driver holds at most the limit). A batch whose size Spark knows
        before reading it (a file source's files) and that is at most `DRIVER_STEP_BYTES_PER_ROW`
        bytes per row of the limit is collected whole instead: a limit over several partitions
        is an extra stage, a shuffle of the rows to one partition (55 ms a batch of 200,000 CSV
        rows, a quarter of the collect). A batch of CSV or parquet files that pyarrow reads as
        Spark does is read by pyarrow instead (`direct_read`)."""
        self.parts = {}
        self.direct_read = False
        limit = self.driver_rows
        if limit <= 0:
            return None
        if self.last_rows > limit:
            self.last_rows = 0  # the batch after this one tries the driver again: sizes come down too
            return None
        clock = time.perf_counter()
        rows = self._direct_rows(batch_df, batch_id)
        if rows is None:
            size = estimated_bytes(batch_df)
            whole = size is not None and size <= limit * DRIVER_STEP_BYTES_PER_ROW
            rows = (batch_df if whole else batch_df.limit(limit + 1)).toArrow()
        else:
            self.direct_read = True
        self.last_rows = rows.num_rows
        self.parts = {"collect": clock}
        return rows if rows.num_rows <= limit else None

    def _direct_rows(self, batch_df: DataFrame, batch_id: int):
        """The batch's rows read by pyarrow from its files (`direct_read.DirectRead`), or None
        (Spark reads them): the reading is planned from the input stream at the first batch."""
        if self.direct is None:
            from pyspark.sql.pandas.types import to_arrow_schema

            plan = self.recipe.plan
            self.direct = (DirectRead.plan(self.recipe.data, plan.keys, self.buckets, BUCKET, KIND, DATA,
                                           to_arrow_schema(batch_df.schema))
                           if self.recipe.partition is None and not self.keep_dropped else None) or False
        if not isinstance(self.direct, DirectRead) or self.query_streams is None:
            return None
        from py4j.protocol import Py4JError

        try:
            files = batch_files(self.query_streams, batch_df, batch_id, self.direct.fmt)
        except Py4JError:  # a plan of a form not foreseen (Spark's internals): Spark reads the batch
            return None
        # the driver holds what the collect's rule lets it: its files' bytes within the limit's
        return self.direct.rows(files, self.driver_rows * DRIVER_STEP_BYTES_PER_ROW) if files else None

    def _driver_step(self, step: BatchStep, rows, spark: SparkSession, batch_id: int, flagged: DataFrame | None,
                     p: int) -> dict:
        """Every bucket's step in the driver (`udfs.batch_step.driver_batch`, vectorised over each
        bucket's keys, the same state files), the rows combined by pyarrow where Spark would
        combine them, the panes (and the dropped rows) to the sink as a DataFrame of the driver's
        table; the counters from the buckets' output, as the distributed step observes them."""
        clock = time.perf_counter()
        if self.combine:
            rows = batch_partials(rows, self.recipe.plan)
        out = driver_batch(step, rows, self.buckets)
        chosen = self._chosen(spark, out, PANE)[0]
        engine = time.perf_counter()
        if self.delivers_after:  # written after the batch function returns (`Delivery`)
            write_outbox(self.files.uri(f"{STATE_DIR}/v={batch_id}"), chosen)
            # built here, not in the thread: creating a DataFrame makes its session the active one
            # of every thread (`keeps_active_session`), which only the batch function puts back
            self.undelivered = (self._local_panes(spark, chosen), batch_id)
        else:
            self.sink.write(self._local_panes(spark, chosen), batch_id)
        if self.keep_dropped:
            dropped = local_frame(spark, *self._chosen(spark, out, DROPPED), self.partitions)
            self.sink.write_dropped(self._dropped(dropped, flagged, p), batch_id)
        self.parts = {"collect": round(clock - self.parts["collect"], 3), "step": round(engine - clock, 3),
                      "sink": round(time.perf_counter() - engine, 3)}
        return self._counted(out) | {"driver_steps": 1, "direct_reads": int(self.direct_read)}

    def _chosen(self, spark: SparkSession, out, kind: int) -> tuple[Any, T.StructType]:
        """The buckets' rows of one kind, the operator's row columns (not its counters and state),
        and their Spark schema."""
        import pyarrow.compute as pc

        self._pane_setup(spark)
        assert self.row_fields is not None
        return out.select(self.row_fields.names).filter(pc.equal(out[KIND], kind)).combine_chunks(), self.row_fields

    def _pane_setup(self, spark: SparkSession) -> None:
        """The operator's row columns and the projections of the panes, built at the first call."""
        if self.row_fields is None:
            from pyspark.sql.classic.column import _to_seq

            skip = {*metrics_columns(), *[metric_column(m) for m in self.spec.source_counters()], *state_columns()}
            self.row_fields = T.StructType([f for f in self.spark_schema.fields if f.name not in skip])
            if not self.remote:  # (Spark Connect builds a plan in this process: nothing to keep)
                self.local_seq = _to_seq(spark.sparkContext, [c._jc for c in self.pane_projection])
            self.arrow_panes = arrow_projection(self.row_fields, self.recipe.schema, self.recipe.decode)
            # as Spark's projection types them: the pane's type, nullable as the operator's column
            nullable = {f.name: f.nullable for f in self.row_fields.fields}
            self.pane_fields = T.StructType([T.StructField(f.name, f.dataType, nullable[f.name])
                                             for f in self.recipe.schema.fields if f.name in nullable])

    def _local_panes(self, spark: SparkSession, chosen) -> DataFrame:
        """The batch's panes (`chosen`: the buckets' PANE rows, `_chosen`) as the sink takes them
        (a `sqlflow.sql` result's statement over them) as a DataFrame of the driver's Arrow table:
        projected by pyarrow where it computes them exactly (`arrow_projection`; the statement by
        `statement_projection`), else by Spark (the projection's Java columns kept across batches)."""
        import pyarrow as pa

        self._pane_setup(spark)
        fields = self.row_fields
        assert fields is not None
        table = self.arrow_panes(chosen) if self.arrow_panes is not None else None
        if table is None or self.pane_fields is None:
            frame = local_frame(spark, chosen, fields, self.partitions)
            panes = (frame.select(*self.pane_projection) if self.remote
                     else DataFrame(frame._jdf.select(self.local_seq), spark))
        elif self.final is None:
            return local_frame(spark, table, self.pane_fields, self.partitions)
        else:
            if self.final_columns is None:  # (Spark Connect has no analysed plan to read: Spark runs it)
                self.final_columns = (() if self.remote else statement_projection(self.final, spark, self.pane_fields)
                                      or ())
            if self.final_columns:
                picks, schema = self.final_columns
                return local_frame(spark, pa.Table.from_arrays([table[c] for c in picks], names=schema.names),
                                   schema, self.partitions)
            panes = local_frame(spark, table, self.pane_fields, self.partitions)
        return self.final(panes) if self.final is not None else panes

    # ------------------------------------------------------------------ delivery after the batch

    def deliver(self, panes: DataFrame, batch_id: int) -> None:
        """Batch `batch_id`'s panes (the DataFrame of its `OUTBOX`) to the sink, then its outbox gone."""
        self.sink.write(panes, batch_id)
        clear_outbox(self.files.uri(f"{STATE_DIR}/v={batch_id}"))

    def wait_delivered(self) -> None:
        """Wait for the last batch's `Delivery`; its error, if it failed, every time (its panes
        stay in the outbox for the next run, so no later batch may write a version: the run's
        next batch fails too, and the run that follows delivers them first)."""
        delivery = self.delivery
        if delivery is not None:
            delivery.join()
            if delivery.error is not None:
                raise delivery.error

    def deliver_left(self, spark: SparkSession) -> None:
        """As a run starts (on Spark Connect, at its first batch): the panes an earlier run left in
        a complete version's outbox (the write failed, or its driver died after Spark committed the
        batch, before the write) to the sink."""
        self.outbox_checked = True
        if not self.bucket_files:  # (only a driver-local step leaves one)
            return
        for v in self._versions():  # (the latest complete one at most, unless a run failed oddly)
            if self.files.exists(f"{STATE_DIR}/v={v}/{BOOK}"):
                table = read_outbox(self.files.uri(f"{STATE_DIR}/v={v}"))
                if table is not None:
                    self.deliver(self._local_panes(spark, table), v)

    def _counted(self, out) -> dict:
        """The batch's counters from the buckets' output (`_counters`' names and values, by pyarrow)."""
        import pyarrow.compute as pc

        def total(t, column: str) -> int:
            v = pc.sum(t[column]).as_py()
            return 0 if v is None else int(v)

        values: dict[str, int | None] = {m: total(out, metric_column(m)) for m in self._counter_names()}
        state = out.filter(pc.equal(out[KIND], STATE))
        for f, m in LIVE_COUNTERS:
            values[m] = total(state, state_meta_column(f))
        top = pc.max(out[state_meta_column("seen")]).as_py()
        values["seen"] = None if top is None else int(top)
        values["finished_any"] = int(bool(pc.any(state[state_meta_column("finished")]).as_py()))
        return values | {"input_rows": values["engine_rows"]}

    # ------------------------------------------------------------------ the distributed step

    def _distributed_step(self, step: BatchStep, batch_df: DataFrame, batch_id: int, flagged: DataFrame | None,
                          p: int, version: str, where: str | None) -> dict:
        """One Spark job: the batch repartitioned by bucket (Spark's partials where they combine),
        one grouped Arrow call per bucket (reading and writing its state file; or cogrouped with
        the state version Spark wrote at `where`, a checkpoint pyarrow cannot open), the sink's
        write its action, the counters observed."""
        self.parts = {}
        spark = batch_df.sparkSession
        n = self.partitions
        own_files = step.batch is not None and step.batch.files is not None
        if own_files:  # every bucket is called (a marker row each) and reads and writes its own state file
            batch_df = batch_df.unionByName(self._markers(batch_df))
        rows = batch_df.repartition(n, BUCKET)
        if self.combine:
            rows.createOrReplaceTempView(self.rows_view)
            rows = spark.sql(self.partials_sql)
        if own_files:
            def bucket_call(key, rows):  # pyspark reads the arity of a function, not of a callable
                return step(key, rows)

            out = rows.groupBy(BUCKET).applyInArrow(bucket_call, self.spark_schema)
        else:
            states = (spark.read.schema(state_schema()).parquet(where) if where is not None
                      else spark.createDataFrame([], state_schema()))

            def bucket_batch(key, rows, state):  # pyspark reads the arity of a function, not of a callable
                return step(key, rows, state)

            out = (rows.groupBy(BUCKET)
                   .cogroup(states.repartition(n, BUCKET).groupBy(BUCKET))
                   .applyInArrow(bucket_batch, self.spark_schema))
        if self.remote:
            return self._remote_outputs(out, batch_id, flagged, p, version, own_files)
        observation = Observation(f"sqlflow_owned_{batch_id}_{uuid.uuid4().hex[:8]}")
        observed = self._observed(out, observation)
        # two outputs (or a state version Spark writes) read the buckets' output twice: kept once
        cached = self.keep_dropped or not own_files
        if cached:
            observed = observed.persist()
        try:
            if not own_files:  # the state version through Spark (a checkpoint pyarrow cannot open)
                (observed.where(F.col(KIND) == STATE).select(*state_columns())
                 .write.mode("overwrite").parquet(self.files.path(version)))
            # with own files, one job: the buckets write the state version, the sink the panes
            panes = self._panes(observed)
            self.sink.write(delivering(self.final(panes)) if self.final is not None else panes, batch_id)
            if self.keep_dropped:
                self.sink.write_dropped(self._dropped(observed, flagged, p), batch_id)
            summary = self._summary(observation.get) if delivered(observation, spark, COUNTERS_WAIT) else None
            if summary is None or (own_files and summary["buckets_called"] < self.buckets):
                # the sink's action stopped early (console's show, a LIMIT: the other buckets now), or
                # its counters did not come: the buckets' output again, counted by a write (which
                # delivers them; the buckets rewrite the same state files from the same version)
                again = Observation(f"sqlflow_owned_{batch_id}_{uuid.uuid4().hex[:8]}")
                self._observed(out, again).write.format("noop").mode("overwrite").save()
                if not delivered(again, spark, COUNTERS_WAIT):
                    raise SqlflowExecutionError(
                        f"the owned-sink executor did not get the counters of micro-batch {batch_id} from Spark "
                        f"within {COUNTERS_WAIT:g} s of its write; the batch is not committed (Spark runs it "
                        "again when the query restarts)", clause="STREAM")
                summary = self._summary(again.get)
            summary.pop("buckets_called", None)
        finally:
            if cached:
                observed.unpersist()
        return summary | {"driver_steps": 0, "direct_reads": 0}

    def _remote_outputs(self, out: DataFrame, batch_id: int, flagged: DataFrame | None, p: int, version: str,
                        own_files: bool) -> dict:
        """The distributed step's outputs on Spark Connect, whose foreachBatch has no `Observation`
        to wait for with a bound: the buckets' output kept (`persist`), the sink (and the state
        version, the dropped rows) written from it, then its counters by an aggregation of it (which
        also runs the buckets a sink's action did not reach)."""
        kept = out.persist()
        try:
            if not own_files:
                (kept.where(F.col(KIND) == STATE).select(*state_columns())
                 .write.mode("overwrite").parquet(self.files.path(version)))
            panes = self._panes(kept)
            self.sink.write(self.final(panes) if self.final is not None else panes, batch_id)
            if self.keep_dropped:
                self.sink.write_dropped(self._dropped(kept, flagged, p), batch_id)
            counted = kept.agg(F.struct(*self._counters()).alias(BATCH_COUNTERS)).collect()[0]
        finally:
            kept.unpersist()
        summary = self._summary(counted.asDict())
        summary.pop("buckets_called", None)
        return summary | {"driver_steps": 0, "direct_reads": 0}

    # ------------------------------------------------------------------ shared

    def _markers(self, like: DataFrame) -> DataFrame:
        """One HEARTBEAT row per bucket (columns as `like`'s, NULL but the bucket and kind): every
        bucket is called in every batch, rows or not, so its timers and watermark crossings fire.
        Built once (one partition), so it costs a batch no round trips to the JVM."""
        if self.markers is None or self.remote:  # (a Connect batch's session may be another clone)
            cols = [(F.col("id").cast("int").alias(BUCKET) if f.name == BUCKET
                     else F.lit(HEARTBEAT).cast("int").alias(KIND) if f.name == KIND
                     else F.lit(None).cast(f.dataType).alias(f.name)) for f in like.schema.fields]
            self.markers = like.sparkSession.range(0, self.buckets, 1, 1).select(*cols)
        return self.markers

    def _panes(self, out: DataFrame) -> DataFrame:
        """The pane rows of the buckets' output, projected (the projection's Java columns kept
        across batches: a list of columns costs a round trip to the JVM each)."""
        if self.remote:
            return out.where(F.col(KIND) == PANE).select(*self.pane_projection)
        from pyspark.sql.classic.column import _to_seq

        if self.pane_seq is None:
            self.pane_seq = (F.col(KIND) == PANE)._jc, _to_seq(out.sparkSession.sparkContext,
                                                               [c._jc for c in self.pane_projection])
        where, projection = self.pane_seq
        return DataFrame(out._jdf.filter(where).select(projection), out.sparkSession)

    def _dropped(self, out: DataFrame, flagged: DataFrame | None, p: int) -> DataFrame:
        """The batch's dropped rows, as the operator's side output lists them (`dropped_columns`):
        the engine's, and under ASCENDING PER first those behind their partition (no window; their
        `emit_time` the batch's time, when they arrived)."""
        dropped = out.where(F.col(KIND) == DROPPED).select(*self.dropped_projection)
        if flagged is None:
            return dropped
        sources = self.spec.sources  # of several, the row's source's name
        behind = flagged.where(F.col(BEHIND)).select(
            *[F.col(k) for k in self.recipe.plan.keys],
            F.timestamp_micros(F.col(EVENT_TIME)).alias(DROPPED_EVENT_TIME),
            F.lit(BEHIND_PARTITION).alias(DROPPED_REASON),
            *[F.lit(None).cast("timestamp").alias(c) for c in (WINDOW_START, WINDOW_END)],
            F.timestamp_micros(F.lit(p)).alias(EMIT_TIME),
            *([F.element_at(F.array(*[F.lit(n) for n in sources]), F.col(SOURCE).cast("int") + 1)
               .alias(DROPPED_SOURCE)] if sources else []))
        return behind.unionByName(dropped)

    def _observed(self, out: DataFrame, observation) -> DataFrame:
        """`out` counting the batch (its METRICS and STATE rows) into `observation`, as one
        struct built once (`BATCH_COUNTERS`, its fields the counters)."""
        if self.counters is None:
            self.counters = F.struct(*self._counters()).alias(BATCH_COUNTERS)
        return out.observe(observation, self.counters)

    def _counter_names(self) -> tuple[str, ...]:
        """The counters summed over the buckets' METRICS rows (and each source's, of several)."""
        return ("engine_rows", "panes", "retractions", "dropped_too_late", "dropped_closed_window",
                "dropped_null_event_time", "dropped_bad_gap", "buckets_advanced", *self.spec.source_counters())

    def _counters(self) -> list:
        """The batch's counters over its METRICS and STATE rows (and each source's, of several)."""
        counters = [F.coalesce(F.sum(metric_column(m)), F.lit(0)).alias(m) for m in self._counter_names()]
        live = [F.coalesce(F.sum(F.when(F.col(KIND) == STATE, F.col(state_meta_column(f)))), F.lit(0)).alias(m)
                for f, m in LIVE_COUNTERS]
        return [*counters, *live, F.max(state_meta_column("seen")).alias("seen"),
                F.coalesce(F.max(F.col(state_meta_column("finished")).cast("int")), F.lit(0)).alias("finished_any"),
                F.count(F.when(F.col(KIND) == STATE, F.lit(1))).alias("buckets_called")]

    @staticmethod
    def _summary(values: dict) -> dict:
        counted = values[BATCH_COUNTERS]
        out = {k: (None if v is None else int(v)) for k, v in counted.asDict().items()}
        out["buckets_called"] = out.get("buckets_called") or 0
        return out | {"input_rows": int(out["engine_rows"] or 0)}

    # ------------------------------------------------------------------ versions

    def _versions(self) -> list[int]:
        names = self.files.list_dir(STATE_DIR)
        return sorted(int(n[2:]) for n in names if n.startswith("v=") and n[2:].isdigit())

    def _latest_book(self, before: int | None) -> Book | None:
        """The bookkeeping of the latest complete version before batch `before` (None: any)."""
        for v in reversed(self._versions()):
            if before is not None and v >= before:
                continue
            text = self.files.read_text(f"{STATE_DIR}/v={v}/{BOOK}")
            if text is not None:
                return Book.of(text, self.files.path(f"{STATE_DIR}/v={v}"))
        return None

    def _prune(self, batch_id: int) -> None:
        """Delete the versions before the last KEEP_VERSIONS (all of them after a restart; then only
        the one that falls out)."""
        if self.pruned:
            if batch_id - KEEP_VERSIONS >= 0:  # (deleting a version that is not there does nothing)
                self.files.delete(f"{STATE_DIR}/v={batch_id - KEEP_VERSIONS}")
            return
        versions = [v for v in self._versions() if v <= batch_id]
        for v in versions[:-KEEP_VERSIONS]:
            self.files.delete(f"{STATE_DIR}/v={v}")
        self.pruned = True


class Delivery(threading.Thread):
    """The sink's write of a driver-local batch's panes, in a thread started as the batch function
    returns: Spark commits the batch and plans the next meanwhile (f3o 8% and f4o 6% faster,
    docs/dev/streaming-performance.md 5). The panes are in the version's `OUTBOX` by then, so a
    driver that dies before the write loses nothing (`OwnedRun.deliver_left`)."""

    def __init__(self, run: "OwnedRun", panes: DataFrame, batch_id: int):
        super().__init__(name=f"sqlflow-delivery-{batch_id}", daemon=False)
        self.run_, self.batch_id = run, batch_id
        self.panes: DataFrame | None = panes
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            _reached("before-delivery", self.batch_id)
            assert self.panes is not None
            self.run_.deliver(self.panes, self.batch_id)
        except BaseException as e:  # noqa: BLE001  (raised where the run waits for it)
            self.error = e
        finally:
            self.panes = None


class OwnedQuery(StreamingQuery):
    """The StreamingQuery of an owned run whose panes are delivered after each batch (`Delivery`):
    `processAllAvailable`, `awaitTermination` and `stop` return once the last batch's panes are in
    the sink."""

    def __init__(self, query: StreamingQuery, run: OwnedRun):
        super().__init__(query._jsq)
        self._run = run

    def processAllAvailable(self) -> None:
        super().processAllAvailable()
        self._run.wait_delivered()

    def awaitTermination(self, timeout: int | None = None) -> bool | None:
        ended = super().awaitTermination(timeout)
        if ended is not False:
            self._run.wait_delivered()
        return ended

    def stop(self) -> None:
        super().stop()
        self._run.wait_delivered()


def write_outbox(version: str, table) -> None:
    """A batch's panes as the `OUTBOX` of its version (a URI or path): written whole or not at all
    (a hidden temporary name, then a rename)."""
    import pyarrow as pa

    fs, root = file_system(version)
    fs.create_dir(root, recursive=True)
    tmp = f"{root}/.{OUTBOX}.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(tmp) as f, pa.ipc.new_file(f, table.schema) as writer:
        writer.write_table(table)
    fs.move(tmp, f"{root}/{OUTBOX}")


def read_outbox(version: str):
    """The panes in a version's `OUTBOX` (None: none, they were delivered)."""
    import pyarrow as pa

    fs, root = file_system(version)
    try:
        with fs.open_input_file(f"{root}/{OUTBOX}") as f:
            return pa.ipc.open_file(f).read_all()
    except FileNotFoundError:
        return None


def clear_outbox(version: str) -> None:
    fs, root = file_system(version)
    try:
        fs.delete_file(f"{root}/{OUTBOX}")
    except FileNotFoundError:
        pass


def delivering(df: DataFrame) -> DataFrame:
    """`df` (a `sqlflow.sql` statement's result over a view of the observed panes) as a DataFrame
    whose actions deliver the observations in its plan. An action on the DataFrame `spark.sql`
    made runs that DataFrame's own query execution, whose logical plan is the parsed statement,
    the view only a name in it; Spark completes an `Observation` whose node it finds in the
    action's logical plan, so a collect, `toArrow` or `show` of it would never complete the
    batch's counters (a write, which plans the analysed plan, does). A projection of all its
    columns is a new DataFrame over the analysed plan, the observed node in it: the same rows."""
    return df.select("*")


def delivered(observation: Observation, spark: SparkSession, seconds: float) -> bool:
    """Whether Spark delivered `observation`'s metrics, waiting at most `seconds` for them
    (pyspark's `Observation.get` waits without a bound, forever for an action that cannot
    deliver them)."""
    from py4j.protocol import Py4JJavaError

    jo = getattr(observation, "_jo", None)
    if jo is None:  # not observed in any DataFrame
        return False
    future = jo.future()
    if future.isCompleted():
        return True
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        jvm.scala.concurrent.Await.ready(future, jvm.scala.concurrent.duration.Duration.create(
            int(seconds * 1000), "ms"))
    except Py4JJavaError:  # a TimeoutException: not within `seconds`
        return False
    return bool(future.isCompleted())


def arrow_projection(rows: T.StructType, schema: T.StructType, decode: dict | None):
    """`stateful.pane_columns`' projection of the operator's rows (`rows`) to the panes' `schema`
    as a function of an Arrow table, where pyarrow computes exactly what Spark's would: every
    column already of its pane type but the times (the engine's microseconds, `timestamp_micros`),
    no aggregate decoded by SQL but a SUM of integers in ANSI mode (`handover.guarded_flag`: the
    column itself where its overflow flag does not hold). None otherwise (Spark projects the
    panes). The function gives None for a table where such a flag holds: Spark's projection then
    fails with Spark's overflow error.

    >>> import pyarrow as pa
    >>> from sqlflow.spark.handover import guarded_sum
    >>> rows = T.StructType([T.StructField("k", T.StringType()), T.StructField("window_start", T.LongType())])
    >>> panes = T.StructType([T.StructField("k", T.StringType()), T.StructField("window_start", T.TimestampType())])
    >>> project = arrow_projection(rows, panes, None)
    >>> project(pa.table({"k": ["a"], "window_start": [60_000_000]})).to_pylist()[0]["window_start"].isoformat()
    '1970-01-01T00:01:00+00:00'
    >>> arrow_projection(rows, panes, {"k": "x"}) is None, arrow_projection(panes, panes, None) is None
    (True, True)
    >>> sums = T.StructType([T.StructField("s", T.LongType()), T.StructField("s__overflow", T.BooleanType())])
    >>> project = arrow_projection(sums, T.StructType(sums.fields[:1]), {"s": guarded_sum("s", "SUM(v) overflows")})
    >>> project(pa.table({"s": [3, 4], "s__overflow": [False, None]})).to_pylist()
    [{'s': 3}, {'s': 4}]
    >>> project(pa.table({"s": [3, -2], "s__overflow": [False, True]})) is None
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_type

    from ...columns import PANE_TIMES
    from ..handover import guarded_flag

    have = {f.name: f.dataType for f in rows.fields}
    flags = []
    for name, sql in (decode or {}).items():
        flag = guarded_flag(name, sql)
        if flag is None or not isinstance(have.get(flag), T.BooleanType):
            return None
        flags.append(flag)
    types = []
    for f in schema.fields:
        source = have.get(f.name)
        if f.name in PANE_TIMES and isinstance(f.dataType, T.TimestampType) and isinstance(source, T.LongType):
            types.append(pa.timestamp("us", tz="UTC"))
        elif source is not None and source == f.dataType and f.name not in PANE_TIMES:
            types.append(None)
        else:
            return None
    try:
        arrow = pa.schema([pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC") if t is None else t)
                           for f, t in zip(schema.fields, types)])
    except (TypeError, ValueError, NotImplementedError):  # a type pyspark's Arrow conversion does not take
        return None

    def project(table):
        if any(pc.any(table[flag]).as_py() for flag in flags):
            return None
        return pa.Table.from_arrays([table[f.name] if t is None else table[f.name].cast(t)
                                     for f, t in zip(schema.fields, types)], schema=arrow)

    return project


def statement_projection(final, spark: SparkSession, panes: T.StructType):
    """Where the statement over the panes (`final`, a `sqlflow.sql` result's) only picks and
    renames the panes' columns (Spark's analysed plan a Project of the panes' attributes, aliased
    or not, over the panes' relation): its columns' pane columns and its schema, so that pyarrow
    gives the driver-local step's panes as the statement does, without a temporary view and an
    analysis a batch. None otherwise (Spark runs the statement over every batch's panes)."""
    empty = spark.createDataFrame([], panes)
    result = final(empty)
    plan = result._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "Project":
        return None
    leaf = plan.child()
    while leaf.getClass().getSimpleName() in ("SubqueryAlias", "View"):
        leaf = leaf.child()
    if not leaf.fastEquals(empty._jdf.queryExecution().analyzed()):
        return None
    output = leaf.output()
    by_id = {output.apply(i).exprId().id(): panes.fields[i].name for i in range(output.size())}
    items = plan.projectList()
    picks = []
    for i in range(items.size()):
        item = items.apply(i)
        if item.getClass().getSimpleName() == "Alias":
            item = item.child()
        if item.getClass().getSimpleName() != "AttributeReference" or item.exprId().id() not in by_id:
            return None
        picks.append(by_id[item.exprId().id()])
    schema = result.schema
    if len(picks) != len(schema.fields) or any(panes[c].dataType != f.dataType for c, f in zip(picks, schema.fields)):
        return None
    return picks, schema


def local_frame(spark: SparkSession, table, schema: T.StructType, parts: int = 1) -> DataFrame:
    """A DataFrame of an Arrow table in the driver, sent to the JVM as `parts` Arrow batches (one
    partition each; more where a batch would pass `LOCAL_TASK_BYTES`, which each of its tasks
    carries) and read by the tasks as Arrow, not as a LocalRelation: pyspark would cut it
    into `spark.sql.execution.arrow.maxRecordsPerBatch` rows a batch (a LocalRelation of several
    batches cost a noop write 0.26 s against 0.08-0.11 s for one, 27,000 panes), and Spark makes
    a table under `spark.sql.execution.arrow.localRelationThreshold` bytes a LocalRelation, its
    rows Java-serialised into every task (the noop write of a 3o batch's panes 0.23-0.26 s
    against 0.07-0.10 s as Arrow; docs/dev/streaming-performance.md 1)."""
    if is_connect(spark):  # sent to the server as Arrow
        return spark.createDataFrame(table, schema=schema)
    create = getattr(spark, "_create_from_arrow_table", None)  # pyspark 4.x's, with a batch size
    if create is not None and table.num_rows > 0:
        parts = max(parts, -(-table.nbytes // LOCAL_TASK_BYTES))
        size = -(-table.num_rows // max(1, parts))
        conf = spark.conf
        prior = conf.get(ARROW_LOCAL_RELATION_THRESHOLD, None)
        conf.set(ARROW_LOCAL_RELATION_THRESHOLD, "0")
        try:
            return create(table, schema, spark.conf.get("spark.sql.session.timeZone"), False, False, size)
        except TypeError:  # another pyspark's signature: its public way, in its own batch size
            pass
        finally:
            if prior is None:
                conf.unset(ARROW_LOCAL_RELATION_THRESHOLD)
            else:
                conf.set(ARROW_LOCAL_RELATION_THRESHOLD, prior)
    return spark.createDataFrame(table, schema=schema)


def state_schema() -> T.StructType:
    """The state files' schema (`udfs.batch_step.state_columns`)."""
    types = {BUCKET: T.IntegerType(), STATE_FORMAT: T.IntegerType(), STATE_BYTES: T.BinaryType()}
    types.update({state_meta_column(f): T.BooleanType() if f == "finished" else T.LongType() for f in STATE_META})
    return T.StructType([T.StructField(c, types[c], True) for c in state_columns()])


def start_owned(recipe: OwnedRecipe, *, sink: OwnedSink, checkpoint: str, query_name: str | None = None,
                trigger_interval: str | None = None, available_now: bool = False, finish: bool = False,
                final=None):
    """Start the owned executor's query (see `sink.start`); returns the StreamingQuery."""
    if recipe.why_not is not None:
        raise SqlflowUnsupportedError(f"the owned-sink executor cannot run this stream: {recipe.why_not}",
                                      clause="STREAM", hint="run it with executor='operator'")
    if sink.format not in SINKS:
        raise SqlflowUnsupportedError(f"the owned-sink executor writes {', '.join(SINKS)}, not {sink.format}",
                                      clause="STREAM")
    spark = recipe.data.sparkSession
    sink.session = spark
    run = OwnedRun(spark, recipe, checkpoint, sink, final)
    w = named_and_triggered(run.input().writeStream.foreachBatch(run).option("checkpointLocation", checkpoint),
                            query_name=query_name, available_now=available_now, finish=finish,
                            trigger_interval=trigger_interval)
    from .sink import RETRY_PAUSE, START_ATTEMPTS, run_with_retries

    # on Spark Connect `start` starts the foreachBatch function's Python process, which may not
    # connect back in time under load: nothing ran, so it is started again
    from .session_conf import settings_for

    def launch():
        with settings_for(spark, [], checkpoint):  # the checkpoint's file manager, for this query only
            return w.start()

    if not run.remote:  # (a Spark Connect run's process looks at its first batch)
        run.deliver_left(spark)

    query = run_with_retries(launch, lambda q: None, attempts=START_ATTEMPTS if run.remote else 1,
                             pause=RETRY_PAUSE)
    if run.delivers_after:
        query = OwnedQuery(query, run)
    RUNS[str(query.id)] = run
    if finish:
        if recipe.finish_dir is None:
            raise no_finish_dir()
        from .pane_stream import write_finish_marker
        query.processAllAvailable()
        write_finish_marker(recipe.finish_dir)
        query.processAllAvailable()
        query.stop()
    elif available_now:
        query.awaitTermination()
    return query


def run_of(query) -> OwnedRun | None:
    """The owned executor's run behind a query (None: another executor runs it); on Spark Connect
    its progress and watermark log as of the latest complete batch (`OwnedRun.refresh`)."""
    run = RUNS.get(str(query.id))
    if run is not None and run.remote:
        run.refresh()
    return run

