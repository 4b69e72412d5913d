"""SQL scripts: declare a streaming source, run a windowed query into a sink, with a checkpoint.

`run_script(spark, text)` runs the `;`-separated statements of `text` in order and returns one
result per statement. A statement without sqlflow clauses goes to `spark.sql` unchanged, except
the streaming source declaration below. The forms (docs/streaming.md, "SQL scripts"):

    -- settings of the streaming INSERTs that follow (plain Spark SET statements)
    SET spark.sqlflow.checkpointLocation = /tmp/sqlflow/checkpoints;
    SET spark.sqlflow.trigger = availableNow;          -- or '10 seconds', or default
    SET spark.sqlflow.finish = true;                   -- availableNow: emit every window at the end
    SET spark.sqlflow.droppedPath = /data/out-dropped; -- the dropped rows of a file sink's stream

    -- a streaming source: a temporary view read with spark.readStream (OPTIONS streaming true)
    CREATE TEMPORARY VIEW clicks (user_id BIGINT, ts TIMESTAMP, amount BIGINT)
    USING json OPTIONS (path '/data/clicks', streaming true, mode 'DROPMALFORMED', maxFilesPerTrigger 1);

    -- the query and its sink: a file format and path, memory.<name>, console, or a table
    INSERT INTO parquet.`/data/out` SELECT user_id, SUM(amount) AS total
    FROM clicks WATERMARK ts DELAY OF INTERVAL 10 SECONDS
    GROUP BY user_id WINDOW SESSIONS(GAP 5m) EMIT ACCUMULATING AND RETRACTING;

    -- or a current-results table in PostgreSQL (docs/postgres.md): postgres.<table> or
    -- postgres.<schema>.<table>, in the database of spark.sqlflow.postgres.url (or PG* variables)
    INSERT INTO postgres.dashboard.sessions SELECT ...;

Each streaming INSERT checkpoints in `<spark.sqlflow.checkpointLocation>/<query name>`; the query
name is `spark.sqlflow.queryName` when set, else derived from the sink (`parquet_data_out` above).
Restarting the script resumes from there (exactly once for file and table sinks).

>>> sink_of("INSERT INTO parquet.`/data/out` SELECT 1")
Sink(format='parquet', path='/data/out', table=None, name='parquet_data_out')
>>> sink_of("INSERT INTO memory.panes SELECT 1"), sink_of("INSERT INTO console SELECT 1").format
(Sink(format='memory', path=None, table=None, name='panes'), 'console')
>>> sink_of("INSERT INTO db.results SELECT 1")
Sink(format=None, path=None, table='db.results', name='db_results')
>>> sink_of("INSERT INTO postgres.sessions SELECT 1"), sink_of("INSERT INTO postgres.dash.sessions SELECT 1").table
(Sink(format='postgres', path=None, table='sessions', name='postgres_sessions'), 'dash.sessions')
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import SqlflowUnsupportedError
from .analysis import carried_errors
from . import conf
from .conf import FILE_FORMATS
from .sinks.postgres import FORMAT as POSTGRES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

#: sinks named like a database: `INSERT INTO memory.<name>`, `INSERT INTO console[.<name>]`
PSEUDO_DATABASES = ("memory", "console")

_SOURCE = re.compile(r"^\s*CREATE\s+(OR\s+REPLACE\s+)?(GLOBAL\s+)?TEMP(ORARY)?\s+VIEW\b", re.IGNORECASE)


@dataclass(frozen=True)
class Sink:
    """Where a streaming INSERT writes: a file format and path, memory/console, or a table."""

    format: str | None
    path: str | None
    table: str | None
    name: str


def run_script(spark: "SparkSession", text: str, *, wait: bool = False) -> list[Any]:
    """Run every statement of `text`; return per statement a DataFrame (queries, plain statements),
    a StreamingQuery (streaming INSERTs), or None (source declarations).

    Streaming INSERTs with trigger availableNow run to their end before the next statement; others
    keep running (`wait=True` waits for all of them at the end of the script)."""
    from ..frontend import parse_script

    results: list[Any] = []
    for statement in parse_script(text, grouping=False):  # checked once Spark resolved the names
        results.append(run_statement(spark, statement))
    if wait:
        for result in results:
            if _is_query(result):
                with carried_errors():  # raised in a worker: sqlflow's error itself
                    result.awaitTermination()
    return results


def _is_query(result) -> bool:
    return hasattr(result, "awaitTermination") and hasattr(result, "isActive")


def run_statement(spark: "SparkSession", statement, args=None, *, starts_query: bool = False) -> Any:
    """One parsed statement (`sqlflow.frontend.Statement`); `args` are its query parameters, as
    in spark.sql (a dict for `:name` markers, a list for `?`). `starts_query`: the caller starts
    a streaming result itself, inside `streaming.session_conf.settings_for_result`."""
    from sqlglot import exp

    from .api import run_sql

    if statement.is_plain:
        if _SOURCE.match(statement.sql) and re.search(r"\bstreaming\b", statement.sql, re.IGNORECASE):
            declared = declare_source(spark, statement.sql)
            if declared:
                return None
        return spark.sql(statement.sql, args=args)
    tree = statement.tree
    if not isinstance(tree, exp.Insert):
        return run_sql(spark, statement.sql, args, starts_query=starts_query)
    return insert(spark, tree, args)


def sink_of(text_or_tree) -> Sink:
    """The sink an INSERT names."""
    from sqlglot import exp

    from ..frontend.statement import DIALECT

    tree = text_or_tree
    if isinstance(text_or_tree, str):
        import sqlglot

        tree = sqlglot.parse_one(text_or_tree, read=DIALECT)
    target = tree.this
    if isinstance(target, exp.Schema):
        target = target.this
    if not isinstance(target, exp.Table):
        raise SqlflowUnsupportedError("INSERT needs a table, a path (parquet.`/dir`), postgres.<table> or memory.<name> "
                                      "/ console",
                                      clause="INSERT")
    db, name = (target.db or "").lower(), target.name
    if (target.catalog or "").lower() == POSTGRES or (db == POSTGRES and not target.catalog):
        qualified = f"{target.db}.{name}" if (target.catalog or "").lower() == POSTGRES else name
        return Sink(POSTGRES, None, qualified, f"{POSTGRES}_{_slug(qualified)}")
    if db in FILE_FORMATS:
        return Sink(db, name, None, f"{db}_{_slug(name)}")
    if db in PSEUDO_DATABASES:
        return Sink(db, None, None, _slug(name))
    if not db and name.lower() == "console":
        return Sink("console", None, None, "console")
    full = ".".join(p for p in (target.catalog, target.db, name) if p)
    return Sink(None, None, full, _slug(full))


def _slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_") or "query"


def insert(spark: "SparkSession", tree, args=None) -> Any:
    """`INSERT INTO <sink> <windowed query>`: start a streaming query, or write a batch result."""
    from ..frontend.statement import DIALECT
    from .api import run_sql
    from .sinks.postgres import write_panes
    from .streaming import start

    sink = sink_of(tree)
    query_sql = tree.expression.sql(dialect=DIALECT)
    base = conf.get(spark, conf.CHECKPOINT_LOCATION)
    name = conf.get(spark, conf.QUERY_NAME) or sink.name
    checkpoint = f"{base.rstrip('/')}/{name}" if base else None
    trigger = (conf.get(spark, conf.TRIGGER, "default") or "default").strip()
    available_now = trigger.replace("_", "").lower() == "availablenow"
    finish = conf.flag(spark, conf.FINISH)
    interval = None if available_now or trigger.lower() == "default" else trigger
    if finish and checkpoint is None:
        raise SqlflowUnsupportedError(f"{conf.FINISH}=true needs {conf.CHECKPOINT_LOCATION} (the finish marker lives "
                                      "next to the checkpoint)", clause="INSERT")
    df = run_sql(spark, query_sql, args, finish_dir=f"{checkpoint}-finish" if finish else None, starts_query=True)
    if sink.format == POSTGRES:
        url = conf.get(spark, conf.POSTGRES_URL)
        if not df.isStreaming:
            write_panes(df, url, sink.table)
            return df
    if not df.isStreaming:
        return _write_batch(df, sink)
    if sink.format in FILE_FORMATS + (None, POSTGRES) and checkpoint is None:
        raise SqlflowUnsupportedError(f"a streaming INSERT into {sink.table or sink.path} needs a checkpoint: "
                                      f"SET {conf.CHECKPOINT_LOCATION} = <directory>", clause="INSERT")
    scratch = sink.format in PSEUDO_DATABASES  # memory and console sinks cannot restart from a checkpoint
    dropped_path = conf.get(spark, conf.DROPPED_PATH)
    if dropped_path is not None and sink.format not in FILE_FORMATS:
        raise SqlflowUnsupportedError(f"{conf.DROPPED_PATH} is set, and the dropped rows go in the sink's file "
                                      f"format: INSERT INTO <format>.`<path>` ({', '.join(FILE_FORMATS)}), not "
                                      f"{sink.table or sink.format}", clause="INSERT",
                                      hint=f"RESET {conf.DROPPED_PATH} before this INSERT")
    return start(df, format=sink.format or "parquet", path=sink.path, table=sink.table,
                 dropped_path=dropped_path,
                 query_name=name if scratch or sink.table else None,
                 checkpoint=None if scratch else checkpoint, trigger_interval=interval,
                 available_now=available_now, finish=finish and available_now,
                 url=conf.get(spark, conf.POSTGRES_URL) if sink.format == POSTGRES else None)


def _write_batch(df, sink: Sink):
    if sink.table is not None:
        df.write.insertInto(sink.table)
    elif sink.format == "memory":
        df.createOrReplaceTempView(sink.name)
    elif sink.format == "console":
        df.show(truncate=False)
    else:
        df.write.mode("append").format(sink.format).save(sink.path)
    return df


# --------------------------------------------------------------------------- streaming sources


def declare_source(spark: "SparkSession", text: str) -> bool:
    """`CREATE TEMPORARY VIEW v (columns) USING fmt OPTIONS (path '...', streaming true, ...)`: a
    streaming temporary view read with spark.readStream (json and csv count malformed records,
    `sqlflow.spark.streaming.read_stream`). False when the statement is not such a declaration."""
    import sqlglot
    from sqlglot import exp

    from .streaming import read_stream

    tree = sqlglot.parse_one(text, read="spark")
    if not isinstance(tree, exp.Create) or (tree.args.get("kind") or "").upper() != "VIEW":
        return False
    props = tree.args.get("properties")
    fmt, options = None, {}
    for prop in (props.expressions if props else []):
        if isinstance(prop, exp.FileFormatProperty):
            fmt = prop.name.lower()
        elif isinstance(prop, exp.OptionsProperty):
            for item in prop.expressions:
                key = item.name if isinstance(item.this, exp.Var) else item.this.sql()
                value = item.args.get("value")
                options[key] = value.this if isinstance(value, (exp.Literal, exp.Boolean)) else value.sql()
    streaming = conf.is_true(options.pop("streaming", "false"))
    if not streaming or fmt is None:
        return False
    schema = tree.this
    if not isinstance(schema, exp.Schema) or not schema.expressions:
        raise SqlflowUnsupportedError("a streaming source needs its columns: CREATE TEMPORARY VIEW v (a INT, ...)",
                                      clause="SOURCE")
    ddl = ", ".join(f"`{c.name}` {_spark_type(c.args['kind'])}" for c in schema.expressions)
    view = schema.this.name
    path = options.pop("path", None)
    if path is None:
        raise SqlflowUnsupportedError("a streaming source needs OPTIONS (path '...')", clause="SOURCE")
    mode = str(options.pop("mode", "PERMISSIVE"))
    if fmt in ("json", "csv"):
        df = read_stream(spark, path, format=fmt, schema=ddl, mode=mode, options=options)
    else:
        df = spark.readStream.format(fmt).schema(ddl).options(**{k: str(v) for k, v in options.items()}).load(path)
    if props is not None and any(isinstance(p, exp.GlobalProperty) for p in props.expressions):
        df.createOrReplaceGlobalTempView(view)
    else:
        df.createOrReplaceTempView(view)
    return True


def _spark_type(kind) -> str:
    """The Spark DDL of a sqlglot data type (sqlglot reads Spark's TIMESTAMP as TIMESTAMPTZ)."""
    text = kind.sql(dialect="spark")
    return "TIMESTAMP" if text.upper() in ("TIMESTAMPTZ", "TIMESTAMP_LTZ") else text
