"""GROUP BY keys of collated strings (Spark 4 collations: UTF8_LCASE, UNICODE_CI, locales...).

Spark's GROUP BY compares such keys by their collation ('a' = 'A' in UTF8_LCASE) and shows an
arbitrary member of each group; its `session_window` compares them by their bytes. sqlflow
follows the GROUP BY on every window and shows one deterministic member (docs/semantics.md, 7.1):

- bounded data and replays run on the engine, which gets each key replaced by its
  **representative**, the smallest of its input's values equal to it under the collation,
  compared by bytes (UTF8_BINARY), computed by Spark (`representative`); equal keys are then the
  same bytes, for the hash buckets, the combining before the shuffle and the engine alike;
- the native rewrite is ruled out (`native_blocked`): Spark would show an arbitrary member, and
  group sessions by bytes;
- streams and keys with a collated string inside a MAP are refused (`refuse`): no window function
  over a stream, no order to choose the smallest map by;
- MIN, MAX and COUNT(DISTINCT) of collated strings run natively on bounded data (the engine
  compares strings by their bytes) and are refused on streams (`engine_calls`).

>>> from pyspark.sql import types as T
>>> collation_of(T.ArrayType(T.StringType("UTF8_LCASE"))), collation_of(T.StringType())
('UTF8_LCASE', None)
>>> print(representative("k", T.StructType([T.StructField("s", T.StringType("UNICODE_CI"))])))
CAST(min(CAST(k AS STRUCT<`s`: STRING COLLATE UTF8_BINARY>)) OVER (PARTITION BY k) AS STRUCT<`s`: STRING COLLATE UNICODE_CI>)
>>> representative("k", T.StringType()) is None
True
"""
from __future__ import annotations

from ..errors import SqlflowUnsupportedError

#: the collation whose equality is byte equality (Spark's default)
BINARY = "UTF8_BINARY"


def _children(dtype) -> list:
    from pyspark.sql import types as T

    if isinstance(dtype, T.ArrayType):
        return [dtype.elementType]
    if isinstance(dtype, T.MapType):
        return [dtype.keyType, dtype.valueType]
    if isinstance(dtype, T.StructType):
        return [f.dataType for f in dtype.fields]
    return []


def collation_of(dtype) -> str | None:
    """The first collation in `dtype` (nested values too) that is not UTF8_BINARY, or None."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.StringType):
        name = getattr(dtype, "collation", BINARY) or BINARY
        return None if name.upper() == BINARY else name
    return next((c for c in map(collation_of, _children(dtype)) if c is not None), None)


def in_map(dtype) -> str | None:
    """The collation (not UTF8_BINARY) of a string inside a MAP in `dtype`, or None."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.MapType):
        return collation_of(dtype)
    return next((c for c in map(in_map, _children(dtype)) if c is not None), None)


def ddl(dtype, binary: bool = False) -> str:
    """The SQL type of `dtype`, every string UTF8_BINARY if `binary` (field names quoted)."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.StringType):
        return f"STRING COLLATE {BINARY if binary else (getattr(dtype, 'collation', None) or BINARY)}"
    if isinstance(dtype, T.ArrayType):
        return f"ARRAY<{ddl(dtype.elementType, binary)}>"
    if isinstance(dtype, T.MapType):
        return f"MAP<{ddl(dtype.keyType, binary)}, {ddl(dtype.valueType, binary)}>"
    if isinstance(dtype, T.StructType):
        fields = ", ".join("`" + f.name.replace("`", "``") + f"`: {ddl(f.dataType, binary)}" for f in dtype.fields)
        return f"STRUCT<{fields}>"
    return dtype.simpleString().upper()


def representative(expr: str, dtype) -> str | None:
    """SQL for the representative of key `expr` (module doc), or None when it has no collated string."""
    if collation_of(dtype) is None:
        return None
    return f"CAST(min(CAST({expr} AS {ddl(dtype, True)})) OVER (PARTITION BY {expr}) AS {ddl(dtype)})"


def _hint(node_sql: str, collation: str) -> str:
    lower = f" or lower({node_sql})" if collation.upper() == "UTF8_LCASE" else ""
    return f"group by its bytes, CAST({node_sql} AS STRING COLLATE UTF8_BINARY){lower}"


def refuse(ws, rel, schema, *, stream: bool) -> None:
    """Raise a located error for a GROUP BY key sqlflow cannot group as Spark's GROUP BY does:
    a collated string inside a MAP (any input), any collated string on a stream."""
    types = {f.name: f.dataType for f in schema.fields}
    for key, node in zip(rel.keys, ws.keys):
        text = node.sql(dialect="spark")
        nested = in_map(types[key])
        if nested is not None:
            raise ws.error(SqlflowUnsupportedError, f"GROUP BY {text}: a MAP holding strings of collation {nested} "
                           "cannot be grouped by that collation here (no smallest map to show for a group)",
                           "GROUP BY", node=node, hint=f"cast its strings to STRING COLLATE UTF8_BINARY, e.g. "
                           f"CAST({text} AS {ddl(types[key], True)})")
        collation = collation_of(types[key])
        if stream and collation is not None:
            raise ws.error(SqlflowUnsupportedError, f"GROUP BY {text}: keys of collation {collation} compare by "
                           "that collation, which sqlflow's streams cannot do (they group keys by their bytes)",
                           "GROUP BY", node=node, hint=_hint(text, collation))


#: aggregate kinds that compare their argument's values (the engine compares strings by bytes)
COMPARING = frozenset({"min", "max", "count_distinct", "collect_set"})


def engine_calls(ws, rel, schema, *, stream: bool) -> None:
    """MIN, MAX, COUNT(DISTINCT) of collated strings compare them by their collation, which the
    engine does not: on bounded data and replays the native path computes them (the call is
    marked so), on a stream they are refused with a located error."""
    types = {f.name: f.dataType for f in schema.fields}
    for call, arg in zip(ws.calls, rel.call_args):
        collation = collation_of(types[arg]) if arg is not None and call.kind in COMPARING else None
        if collation is None:
            continue
        why = f"the sqlflow engine compares strings by their bytes, not by collation {collation}"
        if stream:
            text = call.arg.sql(dialect="spark")
            raise ws.error(SqlflowUnsupportedError, f"{call.node.sql(dialect='spark')}: {why}", "SELECT",
                           node=call.node, hint=f"compare its bytes, CAST({text} AS STRING COLLATE UTF8_BINARY)")
        call.kind, call.why_not = None, why


def native_blocked(ws, rel, schema) -> str | None:
    """Why the native rewrite cannot take these keys (a collated string among them: the rule is
    the engine's, `sqlflow.engine.paths.why_not_native_keys`), or None."""
    from ..engine import why_not_native_keys

    types = {f.name: f.dataType for f in schema.fields}
    return why_not_native_keys([(node.sql(dialect="spark"), collation_of(types[key]))
                                for key, node in zip(rel.keys, ws.keys)])
