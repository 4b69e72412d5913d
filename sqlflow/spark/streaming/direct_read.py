"""The driver-local step's rows of a micro-batch of files, read by pyarrow (docs/streaming.md 3.0,
"Reading a batch's files directly").

The owned-sink executor's driver-local step collects each micro-batch's rows as Arrow. For a
stream read from CSV or parquet files, Spark's scan, projection and collect of a batch of 200,000
rows took 150-170 ms, and pyarrow reads, checks and converts the same file in 10-25 ms
(docs/dev/streaming-performance.md, 5). So where the stream's input is a chain of projections
over one file source that pyarrow reads exactly as Spark does, the step reads the batch's files
itself: Spark still chooses the files (its offsets, its source log) and the running query's plan
names them; Spark's scan never runs.

What "exactly" takes (`DirectRead.plan`, once per run; `DirectRead.rows`, each batch):
- the input's columns are file columns, or `timestamp_millis` / `timestamp_micros` /
  `timestamp_seconds` of a BIGINT column, or `unix_micros` of a TIMESTAMP, through projections,
  aliases, views and widening casts, over one file source (no filter, no partition columns);
- parquet: every column read has the file's type as Spark reads it (BIGINT int64, INT int32,
  STRING a UTF-8 string, TIMESTAMP a UTC timestamp in micro- or milliseconds), by its exact name,
  in a file no legacy Spark wrote (its calendar rebase);
- CSV: Spark's default parsing but for `header` and `sep`, every column of the file an integer
  (BIGINT or INT); a batch whose fields are not all ASCII integers or empty (NULL), whose lines
  have another count of fields, or whose file starts with a byte-order mark is read by Spark
  (where Spark's parser would give NULL or drop a field, pyarrow's could differ);
- the keys' hash buckets are Spark's `pmod(hash(keys), n)` (Murmur3, `spark_hash`) on BIGINT, INT
  and (of parquet) STRING keys.
Anything else: Spark scans and collects, as before. `spark.sqlflow.streaming.directRead` false
turns it off. Tests: tests/streaming/test_direct_read.py (hypothesis against Spark's own read).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

#: source options that choose files, not how they parse (the batch's files come from Spark)
_FILE_OPTIONS = {"path", "maxfilespertrigger", "maxbytespertrigger", "maxfileage", "latestfirst", "filenameonly",
                 "maxcachedfiles", "discardcachedinputratio", "pathglobfilter", "recursivefilelookup",
                 "modifiedbefore", "modifiedafter", "cleansource", "sourcearchivedir"}
_CSV_OPTIONS = {"header", "sep", "delimiter"}
_MASK32 = np.uint64(0xFFFFFFFF)
_SEED = 42  # Spark's `hash`


@dataclass(frozen=True)
class DirectRead:
    """How one stream's batches of files become the driver-local step's rows."""

    fmt: str  # "csv" or "parquet"
    #: the file source's columns, in order, and their Spark type names ("bigint", "int", "timestamp")
    file_columns: tuple[tuple[str, str], ...]
    header: bool
    sep: str
    #: each input column: (name, expression) over file columns, as nested tuples
    columns: tuple[tuple[str, tuple], ...]
    keys: tuple[str, ...]  # input columns hashed to the bucket
    key_types: tuple[str, ...]
    buckets: int
    bucket: str  # the bucket's column
    kind: str  # the kind's column
    data: int  # its value (DATA)
    schema: Any  # the batch's Arrow schema, as Spark's collect gives it

    # ------------------------------------------------------------------ once per run

    @staticmethod
    def plan(data, keys, buckets: int, bucket: str, kind: str, kind_data: int, schema) -> "DirectRead | None":
        """The reading of `data` (the owned run's input stream, a classic DataFrame) with its hash
        bucket and kind columns appended (`schema`: the batch's Arrow schema); None where its plan
        is not one this module reads exactly."""
        try:
            return _plan(data._jdf.queryExecution().analyzed(), tuple(keys), buckets, bucket, kind, kind_data, schema)
        except Exception:  # noqa: BLE001  (a plan of a form not foreseen: Spark reads it)
            return None

    # ------------------------------------------------------------------ each batch

    def rows(self, files: list[str], max_bytes: int | None = None):
        """The batch's rows from its `files` (URIs of the local file system), or None where Spark
        must read them (a file not local, more than `max_bytes` of files, a CSV field Spark's
        parser reads otherwise, a type that differs)."""
        import pyarrow as pa

        paths = []
        for uri in files:
            parsed = urlparse(uri)
            if parsed.scheme not in ("", "file"):
                return None
            paths.append(unquote(parsed.path))
        try:
            if not paths or (max_bytes is not None and sum(os.path.getsize(p) for p in paths) > max_bytes):
                return None
        except OSError:
            return None
        read = self._csv if self.fmt == "csv" else self._parquet
        try:
            table = read(paths)
        except (pa.ArrowException, OSError, ValueError, OverflowError):
            return None
        if table is None:
            return None
        out = {}
        for name, expr in self.columns:
            value = _evaluate(expr, table)
            if value is None:
                return None
            out[name] = value
        n = table.num_rows
        hashed = np.full(n, _SEED, np.int32)
        for key, dtype in zip(self.keys, self.key_types):
            hashed = spark_hash(out[key], dtype, hashed)
        out[self.bucket] = pa.array(np.mod(hashed.astype(np.int64), self.buckets).astype(np.int32))
        out[self.kind] = pa.array(np.full(n, self.data, np.int32))
        arrays = [out[f.name].cast(f.type) for f in self.schema]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _csv(self, paths: list[str]):
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pcsv

        names = [c for c, _ in self.file_columns]
        tables = []
        for path in paths:
            with open(path, "rb") as f:
                if f.read(3) == b"\xef\xbb\xbf":  # a byte-order mark: Spark's parser keeps it in the first field
                    return None
            tables.append(pcsv.read_csv(
                path,
                read_options=pcsv.ReadOptions(column_names=names, skip_rows=1 if self.header else 0),
                parse_options=pcsv.ParseOptions(delimiter=self.sep, quote_char='"', escape_char="\\",
                                                newlines_in_values=False, ignore_empty_lines=True),
                convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in names},
                                                    null_values=[""], strings_can_be_null=True,
                                                    quoted_strings_can_be_null=True)))
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        columns = []
        for name, dtype in self.file_columns:
            text = table[name]
            # ASCII digits after the sign (`Long.parseLong`'s grammar; pyarrow's own parser takes
            # spaces and hexadecimal too): a leading "+-" run then fails the cast, as Spark's parse
            digits = pc.ascii_is_decimal(pc.utf8_ltrim(text, "+-"))
            if not pc.all(pc.or_kleene(pc.is_null(text), digits)).as_py():
                return None
            columns.append(pc.cast(text, pa.int64() if dtype == "bigint" else pa.int32()))  # overflow: raises
        return pa.Table.from_arrays(columns, names=names)

    def _parquet(self, paths: list[str]):
        import pyarrow as pa
        import pyarrow.parquet as pq

        wanted = {c: t for c, t in self.file_columns if any(c in _columns_of(e) for _, e in self.columns)}
        for path in paths:
            schema = pq.read_schema(path)
            meta = schema.metadata or {}
            if b"org.apache.spark.legacyDateTime" in meta or b"org.apache.spark.legacyINT96" in meta:
                return None
            for name, dtype in wanted.items():
                if schema.get_field_index(name) < 0 or not _parquet_type_is(schema.field(name).type, dtype):
                    return None
        table = pq.read_table(paths, columns=list(wanted), use_threads=True, partitioning=None)
        columns = []
        for name in wanted:
            column = table[name]
            if pa.types.is_timestamp(column.type):  # as microseconds since the epoch, UTC
                column = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            columns.append(column)
        return pa.Table.from_arrays(columns, names=list(wanted))


def spark_hash(values, dtype: str, seed: np.ndarray) -> np.ndarray:
    """Spark's Murmur3 `hash` of one more column (`values`, a pyarrow array of BIGINT, INT or
    STRING), chained from `seed` (the columns before, or 42): a NULL leaves the hash as it was.

    >>> import pyarrow as pa
    >>> spark_hash(pa.array([0, 1, None, -5], pa.int64()), "bigint", np.full(4, 42, np.int32)).tolist()
    [-1670924195, -1712319331, 42, 424949597]
    >>> spark_hash(pa.array([0, 1], pa.int32()), "int", np.full(2, 42, np.int32)).tolist()
    [933211791, -559580957]
    >>> spark_hash(pa.array(["", "a", "abcde", "é"]), "string", np.full(4, 42, np.int32)).tolist()
    [142593372, 1485273170, 814637928, 2119106806]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    valid = ~np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), dtype=bool)
    h = seed.astype(np.int64).astype(np.uint64) & _MASK32
    if dtype == "string":
        h = _hash_bytes(values, h)
    else:
        raw = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64).astype(np.uint64)
        if dtype == "bigint":
            h = _mix_h1(h, _mix_k1(raw & _MASK32))
            h = _fmix(_mix_h1(h, _mix_k1(raw >> np.uint64(32))), 8)
        else:
            h = _fmix(_mix_h1(h, _mix_k1(raw & _MASK32)), 4)
    out = h.astype(np.uint32).view(np.int32)
    return np.where(valid, out, seed)


def _hash_bytes(values, h):
    """Spark's `Murmur3_x86_32.hashUnsafeBytes` of each string's UTF-8 bytes from hashes `h`:
    each whole 4-byte little-endian word mixed in, then each byte after them on its own as a
    signed int, then the length; vectorised over the strings, a step per word position."""
    import pyarrow as pa

    values = values.cast(pa.large_string())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset:values.offset + n + 1]
    data = (np.frombuffer(values.buffers()[2], dtype=np.uint8) if values.buffers()[2] is not None
            else np.zeros(0, np.uint8))
    starts, lengths = offsets[:-1], np.diff(offsets)
    aligned = lengths - lengths % 4
    h = h.copy()
    for j in range(0, int(aligned.max(initial=0)), 4):
        rows = np.flatnonzero(aligned > j)
        at = starts[rows] + j
        word = (data[at].astype(np.uint64) | data[at + 1].astype(np.uint64) << np.uint64(8)
                | data[at + 2].astype(np.uint64) << np.uint64(16) | data[at + 3].astype(np.uint64) << np.uint64(24))
        h[rows] = _mix_h1(h[rows], _mix_k1(word))
    for t in range(3):
        rows = np.flatnonzero(lengths > aligned + t)
        signed = data[starts[rows] + aligned[rows] + t].view(np.int8).astype(np.int64)
        h[rows] = _mix_h1(h[rows], _mix_k1(signed.astype(np.uint64) & _MASK32))
    return _fmix(h, lengths)


def _rotl(x, r: int):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _MASK32


def _mix_k1(k):
    k = (k * np.uint64(0xCC9E2D51)) & _MASK32
    return (_rotl(k, 15) * np.uint64(0x1B873593)) & _MASK32


def _mix_h1(h, k):
    return (_rotl(h ^ k, 13) * np.uint64(5) + np.uint64(0xE6546B64)) & _MASK32


def _fmix(h, length):
    h = h ^ np.asarray(length).astype(np.uint64)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _MASK32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _MASK32
    return h ^ (h >> np.uint64(16))


def _parquet_type_is(arrow_type, dtype: str) -> bool:
    import pyarrow as pa

    if dtype == "bigint":
        return arrow_type == pa.int64()
    if dtype == "int":
        return arrow_type == pa.int32()
    if dtype == "string":
        return arrow_type in (pa.string(), pa.large_string())
    return (dtype == "timestamp" and pa.types.is_timestamp(arrow_type) and arrow_type.unit in ("us", "ms")
            and arrow_type.tz is not None)


def _columns_of(expr: tuple) -> set[str]:
    if expr[0] == "col":
        return {expr[1]}
    return _columns_of(expr[1])


def _evaluate(expr: tuple, table):
    """An input column's expression over the read table: an int64 array (times in microseconds),
    or None where Spark would fail (an overflow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    op = expr[0]
    if op == "col":
        column = table[expr[1]]
        return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    inner = _evaluate(expr[1], table)
    if inner is None:
        return None
    if op in ("widen", "unix_micros", "micros"):
        return inner.cast(pa.int64())
    factor = {"millis": 1_000, "seconds": 1_000_000}[op]
    try:
        return pc.multiply_checked(inner.cast(pa.int64()), factor)
    except pa.ArrowInvalid:  # Spark's multiplyExact fails the batch: Spark reads it, and says so
        return None


# ---------------------------------------------------------------------- the plan, through py4j

def _name(node) -> str:
    return node.getClass().getSimpleName()


def _type(attr) -> str:
    return attr.dataType().simpleString()


def _plan(plan, keys, buckets, bucket, kind, kind_data, schema) -> DirectRead | None:
    definitions: dict[int, Any] = {}  # expression id -> its defining expression, from every projection
    top = plan
    node = plan
    while True:
        name = _name(node)
        if name == "Project":
            items = node.projectList()
            for i in range(items.size()):
                item = items.apply(i)
                if _name(item) == "Alias":
                    definitions[item.exprId().id()] = item.child()
        elif name not in ("SubqueryAlias", "View"):
            break
        node = node.child()
    if _name(node) != "StreamingRelation":
        return None
    source = node.dataSource()
    fmt = str(source.className()).lower()
    if fmt not in ("csv", "parquet") or source.partitionColumns().size() > 0:
        return None
    options = {str(k).lower(): str(v) for k, v in _scala_map(source.options()).items()}
    allowed = _FILE_OPTIONS | (_CSV_OPTIONS if fmt == "csv" else set())
    if set(options) - allowed:
        return None
    relation = node.output()
    file_columns = tuple((str(relation.apply(i).name()), _type(relation.apply(i))) for i in range(relation.size()))
    by_id = {relation.apply(i).exprId().id(): str(relation.apply(i).name()) for i in range(relation.size())}
    if fmt == "csv" and any(t not in ("bigint", "int") for _, t in file_columns):
        return None
    sep = options.get("sep", options.get("delimiter", ","))
    header = options.get("header", "false").strip().lower()
    if len(sep) != 1 or sep in ('"', "\\", "\n", "\r") or header not in ("true", "false"):
        return None
    output = top.output()
    columns = []
    types = {}
    for i in range(output.size()):
        attr = output.apply(i)
        expr = _translate(attr, definitions, by_id)
        if expr is None or _type(attr) not in (("bigint", "int") if fmt == "csv" else ("bigint", "int", "string")):
            return None
        columns.append((str(attr.name()), expr))
        types[str(attr.name())] = _type(attr)
    if any(k not in types for k in keys) or not keys:
        return None
    if fmt == "parquet" and any(t not in ("bigint", "int", "timestamp", "string") for c, t in file_columns
                                if any(c in _columns_of(e) for _, e in columns)):
        return None
    return DirectRead(fmt, file_columns, header == "true", sep, tuple(columns), keys, tuple(types[k] for k in keys), buckets,
                      bucket, kind, kind_data, schema)


def _translate(expr, definitions: dict, by_id: dict) -> tuple | None:
    """A Catalyst expression (py4j) as `_evaluate`'s tuple over file columns; None where it is not
    one of the forms read exactly."""
    name = _name(expr)
    if name == "AttributeReference":
        key = expr.exprId().id()
        if key in definitions:
            return _translate(definitions[key], definitions, by_id)
        return ("col", by_id[key]) if key in by_id else None
    if name == "Alias":
        return _translate(expr.child(), definitions, by_id)
    children = expr.children()
    if children.size() != 1:
        return None
    child = children.apply(0)
    inner = _translate(child, definitions, by_id)
    if inner is None:
        return None
    source, target = child.dataType().simpleString(), expr.dataType().simpleString()
    if name == "Cast":
        if source == target and source in ("bigint", "int", "timestamp", "string"):
            return inner
        return ("widen", inner) if (source, target) == ("int", "bigint") else None
    functions = {"MillisToTimestamp": "millis", "MicrosToTimestamp": "micros", "SecondsToTimestamp": "seconds",
                 "UnixMicros": "unix_micros"}
    if name in functions and (source in ("bigint", "int") or (name == "UnixMicros" and source == "timestamp")):
        return (functions[name], inner)
    return None


def _scala_map(m) -> dict:
    out = {}
    it = m.iterator()
    while it.hasNext():
        pair = it.next()
        out[pair._1()] = pair._2()
    return out


def batch_files(query_streams, batch_df, batch_id: int, fmt: str) -> list[str] | None:
    """The files of micro-batch `batch_id` of the stream running `batch_df`'s foreachBatch
    (`query_streams`: the JVM StreamingQueryManager of the session that started it): those of the
    batch's one file relation, of format `fmt`; None where the batch reads anything else (another
    source with data, a finish marker) or its plan is not found."""
    query_id = batch_df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    query = query_streams.get(query_id) if query_id else None
    if query is None:
        return None
    execution = query.streamingQuery().lastExecution()
    if execution is None or execution.currentBatchId() != batch_id:
        return None
    leaves = execution.logical().collectLeaves()
    files: list[str] | None = None
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        kind = _name(leaf)
        if kind == "LocalRelation":  # a source without data this batch
            continue
        if kind != "LogicalRelation" or files is not None:
            return None
        relation = leaf.relation()
        if _name(relation.fileFormat()).lower() != {"csv": "csvfileformat", "parquet": "parquetfileformat"}[fmt]:
            return None
        files = [str(f) for f in relation.location().inputFiles()]
    return files
