"""A current-results table in PostgreSQL, kept exactly once from a pane stream (docs/postgres.md).

The table holds one row per GROUP BY key and window: the aggregates and the pane columns of the
last pane applied. Each micro-batch is applied in one transaction (sqlflow/engine/current_table.py
says what a batch changes): the transaction records (query id, table, batch id) in `sqlflow_batches`
in the same database first, and a batch already recorded is skipped; then the batch's upserts
and deletes are copied (`COPY`) into a temporary staging table, and one `DELETE ... USING` and
one `INSERT ... ON CONFLICT DO UPDATE` apply them. Spark re-runs a batch after a failure with the
same id and rows (foreachBatch), so each batch changes the table once.

- `postgres_sink(url, table, query=df)`: a `(DataFrame, batch_id)` function for foreachBatch;
  `sqlflow.start(df, format="postgres", table=..., url=...)` uses it;
- `write_panes(df, url, table)`: a bounded or replayed result's panes, in one transaction.

The driver is psycopg 3 (the optional extra `postgres`): COPY from the driver's memory, and the
transaction that makes a batch exactly once, both in the process that runs foreachBatch (docs
explain why not Spark's JDBC writer). The connection is a URL or libpq's `PG*` environment
variables; a password never appears in a message (`redact`).
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit, urlunsplit

from ...ast import AccumulationMode
from ...columns import ALL_PANE_COLUMNS, IS_RETRACTION, PANE_TYPES, WINDOW_END, WINDOW_START
from ...engine import ADDITIVE, TABLE_PANE_COLUMNS, TableShape, batch_changes
from ...errors import SqlflowAnalysisError, SqlflowExecutionError, SqlflowUnsupportedError
from ..session import keeps_active_session

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

#: the table of applied batches, in the target's database (and schema, when the table names one)
BOOKKEEPING = "sqlflow_batches"
#: the format name of `sqlflow.start` and of SQL scripts (`INSERT INTO postgres.<table>`)
FORMAT = "postgres"
#: `on_step` names, in the order a batch passes them (fault-injection tests kill the driver there)
STEPS = ("begin", "recorded", "applied", "committed")

#: Spark type (DDL name) -> PostgreSQL type of a current-results table's column
PG_TYPES = {
    "string": "text", "boolean": "boolean", "tinyint": "smallint", "smallint": "smallint", "int": "integer",
    "bigint": "bigint", "float": "real", "double": "double precision", "date": "date",
    "timestamp": "timestamp with time zone", "timestamp_ntz": "timestamp without time zone",
}


def redact(url: str | None) -> str:
    """The connection's URL (or key=value string) without its password, for messages.

    >>> redact("postgresql://ann:s3cret@db.example:5432/shop")
    'postgresql://ann:***@db.example:5432/shop'
    >>> redact("host=db password=s3cret dbname=shop"), redact(None)
    ('host=db password=*** dbname=shop', 'the PG* environment variables')
    """
    if not url:
        return "the PG* environment variables"
    if "://" in url:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            if ":" in user:
                user = user.split(":", 1)[0] + ":***"
            netloc = f"{user}@{host}"
        query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return re.sub(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)


def _scrub(text: str, url: str | None) -> str:
    """`text` with any password of `url` (or of PGPASSWORD) replaced."""
    import os

    secrets = [os.environ.get("PGPASSWORD") or ""]
    if url and "://" in url:
        password = urlsplit(url).password
        secrets.append(password or "")
    elif url:
        secrets += re.findall(r"(?i)password\s*=\s*'?([^'\s]+)", url)
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


def connect(url: str | None):
    """A psycopg connection to `url` (None: libpq's PG* variables), or a located error without
    the password."""
    try:
        import psycopg
    except ImportError:
        raise SqlflowUnsupportedError("the PostgreSQL sink needs psycopg: pip install \"sqlflow-dataflow[postgres]\"",
                                      clause="INSERT") from None
    try:
        return psycopg.connect(url or "", autocommit=False, connect_timeout=10)
    except psycopg.Error as e:
        message = _scrub(str(e).strip(), url)
    raise SqlflowExecutionError(f"cannot connect to PostgreSQL at {redact(url)}: {message}", clause="INSERT")


# ------------------------------------------------------------------ what the table holds


def pg_type(name: str, spark_type: Any) -> str:
    """The PostgreSQL type of a column of Spark type `spark_type` (a pyspark DataType)."""
    ddl = spark_type.simpleString()
    if ddl in PG_TYPES:
        return PG_TYPES[ddl]
    m = re.fullmatch(r"decimal\((\d+),(\d+)\)", ddl)
    if m:
        return f"numeric({m.group(1)},{m.group(2)})"
    if re.fullmatch(r"(var)?char\(\d+\)", ddl):
        return "text"
    raise SqlflowUnsupportedError(f"column {name} is {ddl}, which the PostgreSQL sink does not map (it maps "
                                  f"{', '.join(sorted(PG_TYPES))} and decimal)", clause="INSERT",
                                  hint="cast it in the SELECT, e.g. to STRING")


def shape_of(query: "DataFrame", *, keys: tuple[str, ...] | None = None,
             mode: AccumulationMode | str | None = None) -> TableShape:
    """The current-results table of a `sqlflow.sql` result: its GROUP BY output columns, its
    aggregate columns and its accumulation mode, from the windowed SELECT that made it (or `keys`
    and `mode` given). In DISCARDING mode an aggregate that does not add (`current_table.ADDITIVE`)
    is refused here, before anything runs, with the error located at it."""
    from ..report import ATTRIBUTE

    report = getattr(query, ATTRIBUTE, None)
    ws = report.stages[-1].extra.get("select") if report is not None and report.stages else None
    columns = list(query.columns)
    if isinstance(mode, str):
        mode = AccumulationMode(mode.upper().replace("_", " "))
    if mode is None:
        if ws is None:
            raise SqlflowUnsupportedError("the PostgreSQL sink needs to know the query's accumulation mode and keys: "
                                          "give a sqlflow.sql result, or keys= and mode=", clause="INSERT")
        mode = ws.windowing.mode
    assert isinstance(mode, AccumulationMode)  # for mypy: a str was read above
    items = _items(ws, columns) if ws is not None else {}
    if keys is None:
        if ws is None:
            raise SqlflowUnsupportedError("the PostgreSQL sink needs the GROUP BY columns: give a sqlflow.sql result "
                                          "or keys=", clause="INSERT")
        keys = tuple(c for c, (_, aggregate) in items.items() if not aggregate)
    needed = [WINDOW_START, WINDOW_END, *TABLE_PANE_COLUMNS] + ([IS_RETRACTION] if mode.retracting else [])
    missing = [c for c in needed if c not in columns]
    if missing:
        raise SqlflowAnalysisError(f"a current-results table needs the pane columns {', '.join(missing)}, which "
                                   f"the result lacks (it has {', '.join(columns)})", clause="INSERT")
    unknown = [k for k in keys if k not in columns]
    if unknown:
        raise SqlflowAnalysisError(f"keys {', '.join(unknown)} are not columns of the result", clause="INSERT")
    aggregates = tuple(c for c in columns if c not in keys and c not in ALL_PANE_COLUMNS)
    if mode is AccumulationMode.DISCARDING:
        for c in aggregates:
            node = items.get(c, (None, True))[0]
            if node is not None and ws is not None and not _additive(node):
                raise ws.error(SqlflowUnsupportedError,
                               f"EMIT DISCARDING panes of {c} cannot be added into a current-results table: only "
                               f"{' and '.join(ADDITIVE)} (without DISTINCT) add up across panes", "EMIT", node=node,
                               hint="use EMIT ACCUMULATING (each pane then replaces the row), or write the panes "
                                    "to an append sink")
    return TableShape(tuple(keys), aggregates, mode)


def _items(ws, columns: list[str]) -> dict[str, tuple[Any, bool]]:
    """Output name -> (its SELECT item, whether it holds an aggregate), pane columns left out."""
    from sqlglot import exp

    from ...plan.windowed_select import is_pane_ref

    calls = {id(c.node) for c in ws.calls}
    out = {}
    for name, item in zip(columns, ws.select.expressions):
        if is_pane_ref(item.unalias()) or name in ALL_PANE_COLUMNS:
            continue
        aggregate = any(id(n) in calls or isinstance(n, exp.AggFunc) for n in item.walk())
        out[name] = (item, aggregate)
    return out


def _additive(item) -> bool:
    from sqlglot import exp

    from ...plan.aggregate_calls import function_name

    node = item.unalias()
    while isinstance(node, (exp.Filter, exp.IgnoreNulls, exp.RespectNulls)):
        node = node.this
    return function_name(node) in ADDITIVE and node.find(exp.Distinct) is None


# ------------------------------------------------------------------ the table and its statements


def _split_name(table: str) -> tuple[str | None, str]:
    """`schema.table` or `table` (double quotes keep case and dots)."""
    parts = re.findall(r'"((?:[^"]|"")*)"|([^.]+)', table)
    names = [q.replace('""', '"') if q else p.strip() for q, p in parts]
    if len(names) == 1:
        return None, names[0]
    if len(names) == 2:
        return names[0], names[1]
    raise SqlflowAnalysisError(f"a PostgreSQL table is named table or schema.table, not {table}", clause="INSERT")


@dataclass
class PostgresTable:
    """One current-results table: its name, shape and columns, and the statements that keep it."""

    table: str
    shape: TableShape
    types: dict[str, str]                     # column -> PostgreSQL type, in table order
    schema: str | None = None
    name: str = ""
    _checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.schema, self.name = _split_name(self.table)

    def ident(self, name: str | None = None):
        from psycopg import sql

        if name is None:
            return sql.Identifier(self.schema, self.name) if self.schema else sql.Identifier(self.name)
        return sql.Identifier(self.schema, name) if self.schema else sql.Identifier(name)

    def ensure(self, conn) -> None:
        """Create the bookkeeping table and the table when missing; refuse a table of another shape."""
        from psycopg import sql

        with conn.transaction():
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (query_id text NOT NULL, batch_id bigint NOT NULL, "
                                 "table_name text NOT NULL, rows_upserted bigint NOT NULL, rows_deleted bigint "
                                 "NOT NULL, applied_at timestamp with time zone NOT NULL DEFAULT now(), "
                                 "PRIMARY KEY (query_id, table_name, batch_id))").format(self.ident(BOOKKEEPING)))
            found = self._existing(conn)
            if not found:
                columns = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
                                             for c, t in self.types.items())
                key = sql.SQL(", ").join(sql.Identifier(c) for c in self.shape.key_columns)
                conn.execute(sql.SQL("CREATE TABLE {} ({}, CONSTRAINT {} UNIQUE NULLS NOT DISTINCT ({}))").format(
                    self.ident(), columns, sql.Identifier(f"{self.name}_sqlflow_key"[:63]), key))
            else:
                self._check(conn, found)
        self._checked = True

    def _existing(self, conn) -> list[tuple[str, str]]:
        rows = conn.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (self.ident().as_string(conn),)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def _check(self, conn, found: list[tuple[str, str]]) -> None:
        want = list(self.types.items())
        if found != want:
            have = ", ".join(f"{c} {t}" for c, t in found)
            need = ", ".join(f"{c} {t}" for c, t in want)
            raise SqlflowAnalysisError(f"table {self.table} exists with another shape: it has ({have}); the query "
                                       f"writes ({need})", clause="INSERT",
                                       hint="drop or rename it, or write to another table")
        unique = conn.execute(
            "SELECT array_agg(a.attname::text ORDER BY k.n) FROM pg_index i, unnest(i.indkey) WITH ORDINALITY "
            "k(attnum, n), pg_attribute a WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND "
            "a.attrelid = i.indrelid AND a.attnum = k.attnum GROUP BY i.indexrelid",
            (self.ident().as_string(conn),)).fetchall()
        if not any(sorted(r[0]) == sorted(self.shape.key_columns) for r in unique):
            raise SqlflowAnalysisError(f"table {self.table} has no unique key on ({', '.join(self.shape.key_columns)})"
                                       ", which the sink upserts on", clause="INSERT",
                                       hint="ALTER TABLE ... ADD UNIQUE NULLS NOT DISTINCT (...)")

    def apply(self, conn, panes: "pa.Table", *, query_id: str | None, batch_id: int | None,
              on_step: Callable[[str], None] | None = None) -> bool:
        """Apply one batch of panes in one transaction; False when (query_id, batch_id) was
        applied before (then nothing changes). Without a query id the batch is not recorded."""
        import pyarrow as pa
        from psycopg import sql

        step = on_step or (lambda name: None)
        if not self._checked:
            self.ensure(conn)
        changes = batch_changes(_to_pandas(panes), self.shape)
        columns = list(self.shape.columns)
        arrow_schema = pa.schema([panes.schema.field(c) for c in columns])
        ups = pa.Table.from_pandas(changes.upserts[columns], schema=arrow_schema, preserve_index=False)
        dels = pa.Table.from_pandas(changes.deletes, schema=pa.schema([panes.schema.field(c) for c in
                                                                       self.shape.key_columns]),
                                    preserve_index=False)
        step("begin")
        with conn.transaction():
            if query_id is not None:
                fresh = conn.execute(sql.SQL("INSERT INTO {} (query_id, batch_id, table_name, rows_upserted, "
                                             "rows_deleted) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING")
                                     .format(self.ident(BOOKKEEPING)),
                                     (query_id, batch_id, self.table, ups.num_rows, dels.num_rows)).rowcount
                if not fresh:
                    return False
            step("recorded")
            self._stage(conn, ups, dels)
            if dels.num_rows:
                conn.execute(self._delete_sql(dels))
            if ups.num_rows:
                conn.execute(self._upsert_sql())
            step("applied")
        step("committed")
        return True

    def _stage(self, conn, ups: "pa.Table", dels: "pa.Table") -> None:
        """COPY the batch's upserts and deletes into the session's staging table (emptied at commit)."""
        import pyarrow as pa
        import pyarrow.csv as pacsv
        from psycopg import sql

        stage = sql.Identifier("sqlflow_stage")
        columns = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
                                     for c, t in self.types.items())
        conn.execute(sql.SQL("CREATE TEMPORARY TABLE IF NOT EXISTS {} (sqlflow_op text NOT NULL, {}) "
                             "ON COMMIT DELETE ROWS").format(stage, columns))
        conn.execute(sql.SQL("TRUNCATE {}").format(stage))
        parts = [ups.add_column(0, "sqlflow_op", pa.array(["u"] * ups.num_rows, pa.string()))]
        if dels.num_rows:
            filled = {c: dels.column(c) if c in dels.column_names else pa.nulls(dels.num_rows, ups.schema.field(c).type)
                      for c in ups.column_names}
            parts.append(pa.table({"sqlflow_op": pa.array(["d"] * dels.num_rows, pa.string()), **filled}))
        data = pa.concat_tables(parts)
        buffer = io.BytesIO()
        pacsv.write_csv(data, buffer, pacsv.WriteOptions(include_header=False))
        names = sql.SQL(", ").join(sql.Identifier(c) for c in data.column_names)
        with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(stage, names)) as copy:
            copy.write(buffer.getvalue())

    def _delete_sql(self, dels: "pa.Table"):
        """DELETE the staged deletes: `=` on the columns whose staged values are never NULL (which
        the planner can hash or look up in the key's index), IS NOT DISTINCT FROM on the others."""
        from psycopg import sql

        match = [sql.SQL("t.{c} {op} s.{c}").format(
            c=sql.Identifier(c), op=sql.SQL("IS NOT DISTINCT FROM" if dels.column(c).null_count else "="))
            for c in self.shape.key_columns]
        return sql.SQL("DELETE FROM {} t USING {} s WHERE s.sqlflow_op = 'd' AND {}").format(
            self.ident(), sql.Identifier("sqlflow_stage"), sql.SQL(" AND ").join(match))

    def _upsert_sql(self):
        from psycopg import sql

        columns = list(self.shape.columns)
        names = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
        sets = []
        for c in columns:
            if c in self.shape.key_columns:
                continue
            if self.shape.mode is AccumulationMode.DISCARDING and c in self.shape.aggregates:
                value = sql.SQL("CASE WHEN t.{c} IS NULL THEN EXCLUDED.{c} WHEN EXCLUDED.{c} IS NULL THEN t.{c} "
                                "ELSE t.{c} + EXCLUDED.{c} END").format(c=sql.Identifier(c))
            else:
                value = sql.SQL("EXCLUDED.{}").format(sql.Identifier(c))
            sets.append(sql.SQL("{} = {}").format(sql.Identifier(c), value))
        key = sql.SQL(", ").join(sql.Identifier(c) for c in self.shape.key_columns)
        return sql.SQL("INSERT INTO {} AS t ({}) SELECT {} FROM {} WHERE sqlflow_op = 'u' "
                       "ON CONFLICT ({}) DO UPDATE SET {}").format(
            self.ident(), names, names, sql.Identifier("sqlflow_stage"), key, sql.SQL(", ").join(sets))


def _to_pandas(panes: "pa.Table"):
    """The batch as pandas with NULL-able integers and booleans kept exact (no float detour)."""
    import pandas as pd
    import pyarrow as pa

    mapping = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
               pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return panes.to_pandas(types_mapper=mapping.get)


def table_types(shape: TableShape, schema) -> dict[str, str]:
    """Column -> PostgreSQL type of the table of `shape` for a result of Spark `schema`."""
    fields = {f.name: f.dataType for f in schema.fields}
    out = {}
    for c in shape.columns:
        if c in PANE_TYPES and c not in (WINDOW_START, WINDOW_END) and c not in fields:
            raise SqlflowAnalysisError(f"the result has no column {c}", clause="INSERT")
        out[c] = pg_type(c, fields[c])
    return out


# ------------------------------------------------------------------ where users call it


class PostgresSink:
    """A foreachBatch function keeping `table` (see `postgres_sink`)."""

    def __init__(self, url: str | None, table: str, *, query: "DataFrame | None" = None,
                 keys: tuple[str, ...] | list[str] | None = None, mode: AccumulationMode | str | None = None,
                 query_id: str | None = None, on_step: Callable[[int, str], None] | None = None) -> None:
        self.url, self.table_name, self.query_id, self.on_step = url, table, query_id, on_step
        self.keys = tuple(keys) if keys is not None else None
        self.mode = mode
        self.table: PostgresTable | None = None
        self._conn = None
        #: the query id where Spark's cannot be read (Spark Connect runs foreachBatch elsewhere)
        self.fallback_query_id: str | None = None
        if query is not None:  # planning time: the shape, the types, the table (or its refusal)
            shape = shape_of(query, keys=self.keys, mode=mode)
            self.table = PostgresTable(table, shape, table_types(shape, query.schema))
            with _told(self.url, f"creating or checking {table}"):
                self.table.ensure(self.connection())

    def __getstate__(self) -> dict:  # pickled to where foreachBatch runs (Spark Connect): no connection
        return {**self.__dict__, "_conn": None}

    def connection(self):
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.url)
        return self._conn

    @keeps_active_session
    def __call__(self, batch: "DataFrame", batch_id: int) -> None:
        if self.table is None:
            shape = shape_of(batch, keys=self.keys, mode=self.mode)
            self.table = PostgresTable(self.table_name, shape, table_types(shape, batch.schema))
            with _told(self.url, f"creating or checking {self.table_name}"):
                self.table.ensure(self.connection())
        query_id = self.query_id or _spark_query_id(batch) or self.fallback_query_id
        if query_id is None:
            raise SqlflowUnsupportedError("the PostgreSQL sink runs in foreachBatch of a streaming query, or needs "
                                          "query_id=", clause="INSERT")
        panes = batch.toArrow()
        hook = None if self.on_step is None else (lambda name: self.on_step(batch_id, name))  # type: ignore[misc]
        self.write(panes, query_id, batch_id, hook)

    def write(self, panes: "pa.Table", query_id: str | None, batch_id: int | None, hook=None) -> bool:
        assert self.table is not None
        with _told(self.url, f"writing {self.table_name}"):
            return self.table.apply(self.connection(), panes, query_id=query_id, batch_id=batch_id, on_step=hook)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _spark_query_id(batch: "DataFrame") -> str | None:
    """The running streaming query's id (stable across restarts from its checkpoint), where the
    batch's session can tell it (a classic session: foreachBatch runs in the driver)."""
    try:
        return batch.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext here
        return None


class _told:
    """Turns psycopg's errors into a located SqlflowExecutionError without the URL's password
    (and without psycopg's exception chained to it)."""

    def __init__(self, url: str | None, what: str) -> None:
        self.url, self.what = url, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, tb) -> None:
        import psycopg

        if error is None or not isinstance(error, psycopg.Error):
            return None
        message = _scrub(str(error).strip(), self.url)
        raise SqlflowExecutionError(f"{self.what} at {redact(self.url)} failed: {message}",
                                    clause="INSERT") from None


def postgres_sink(url: str | None = None, table: str | None = None, *, query: "DataFrame | None" = None,
                  keys: tuple[str, ...] | list[str] | None = None, mode: AccumulationMode | str | None = None,
                  query_id: str | None = None,
                  on_step: Callable[[int, str], None] | None = None) -> PostgresSink:
    """A `(DataFrame, batch_id)` function for `writeStream.foreachBatch` that keeps `table` in the
    database at `url` (None: the PG* environment variables) as the current result of a pane stream.

    `query`: the `sqlflow.sql` result being written: its keys, aggregates and accumulation mode
    decide the table's shape, which is created (or checked) now, before any batch. Without it,
    give `keys=` (the GROUP BY output columns) and `mode=`; the table is then made at the first
    batch. `query_id`: what identifies the query in `sqlflow_batches` (default: Spark's query id,
    kept in the checkpoint). `on_step(batch_id, step)`: called at each of `STEPS` (for tests)."""
    if not table:
        raise SqlflowUnsupportedError("the PostgreSQL sink needs a table name", clause="INSERT")
    return PostgresSink(url, table, query=query, keys=keys, mode=mode, query_id=query_id, on_step=on_step)


def write_panes(panes: "DataFrame", url: str | None = None, table: str | None = None, *,
                keys: tuple[str, ...] | list[str] | None = None, mode: AccumulationMode | str | None = None,
                run_id: str | None = None) -> bool:
    """Apply a bounded or replayed result's panes (all of them, as one batch) to `table`, in one
    transaction. With `run_id`, the write is recorded in `sqlflow_batches` and a second call with
    the same id changes nothing (returns False)."""
    sink = postgres_sink(url, table, query=panes, keys=keys, mode=mode)
    try:
        return sink.write(panes.toArrow(), run_id, 0 if run_id is not None else None)
    finally:
        sink.close()


def read_table(spark, url: str | None, table: str) -> "DataFrame":
    """The table as it is now, as a Spark DataFrame ordered by its key (what the magic shows for
    `INSERT INTO postgres.<table>` while the stream runs)."""
    import pyarrow as pa
    from psycopg import sql

    schema, name = _split_name(table)
    ident = sql.Identifier(schema, name) if schema else sql.Identifier(name)
    with connect(url) as conn:
        try:
            cur = conn.execute(sql.SQL("SELECT * FROM {} ORDER BY 1").format(ident))
        except Exception as e:  # noqa: BLE001 - psycopg's errors, told without the URL's password
            raise SqlflowExecutionError(f"reading {table} at {redact(url)} failed: {_scrub(str(e).strip(), url)}",
                                        clause="INSERT") from None
        names = [d.name for d in cur.description or ()]
        rows = cur.fetchall()
    data = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
    return spark.createDataFrame(data.to_pandas()) if rows else spark.createDataFrame([], ", ".join(
        f"`{n}` string" for n in names) or "empty string")
