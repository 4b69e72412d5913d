"""Differential test: the engine path, the native rewrite and hand-written Spark SQL give one answer.

Random schemas over every Spark SQL type a GROUP BY key or an aggregate argument can have
(integers at their limits, FLOAT and DOUBLE with NaN, -0.0 and infinities, DECIMAL at edge
precisions, unicode STRING (also of collations UTF8_LCASE and UNICODE_CI), BINARY, BOOLEAN, DATE, TIMESTAMP, TIMESTAMP_NTZ, day-time INTERVAL,
ARRAY, STRUCT, MAP, NULLs everywhere), random aggregates sqlflow supports (and ones Spark refuses),
random windows (1 microsecond to 1 day, offsets, sliding, sessions, global), in the session time
zones UTC and America/Los_Angeles around both DST changes of 2024, ANSI mode on and off:
`sqlflow.sql(..., path="engine")`, `path="native"` and the same query written by hand with
`window()` / `session_window()` and GROUP BY must return the same rows and column types, or fail
with the same SQLSTATE (Spark's own error class, or sqlflow's located error wrapping it). Keys of
collated strings run on the engine alone, which shows each group's smallest member: the
hand-written query replaces them by it first, and the native path must refuse them.

What the harness does not draw, and why (docs/semantics.md, "Spark's types"):
FIRST/LAST and the order of collect_list (Spark's depend on the order rows reach it; sqlflow's
are by event time; the lists are compared sorted); SUM/AVG of a STRING (sqlflow refuses what
Spark would cast), nor SUM of a TIMESTAMP without ANSI mode (Spark casts it to DOUBLE; the
engine adds numbers: only the native path runs it, `test_a_timestamp_sum_without_ansi_runs_natively`);
sums whose overflow depends on the order of additions (Spark's own answer
changes with its partitioning); INTERVAL YEAR TO MONTH and calendar intervals (PySpark cannot
collect them). Floating-point results of AVG and the variance family are compared to 1e-9
relative: Spark's and the engine's additions run in different orders.

CI runs a dozen examples (the `ci` Hypothesis profile, tests/conftest.py; about two minutes in
all); release checks run ten times more (the `thorough` profile):

    SQLFLOW_HYPOTHESIS_PROFILE=thorough python -m pytest tests/spark/test_differential.py

Every failing example the harness found is kept in `REGRESSIONS` and runs on every CI run.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sqlflow
from tests.conftest import HYPOTHESIS_PROFILES, examples

WEIGHT = 12
EXAMPLES = examples(WEIGHT)
TIME_ZONES = ("UTC", "America/Los_Angeles")
#: around the two DST changes of 2024 in Los Angeles (UTC microseconds): 2024-03-10 10:00 UTC
#: (02:00 local becomes 03:00) and 2024-11-03 09:00 UTC (02:00 local becomes 01:00 again)
DST_CHANGES = (1_710_064_800_000_000, 1_730_624_400_000_000)
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
_COLLATE = re.compile(r"COLLATE (?!UTF8_BINARY\b)\w+")
_STRINGS = ["", "a", "A", "é", "e\u0301", "\U0001d11e", "it's", "a b", "\\"]


# ----------------------------------------------------------------------------- SQL literals


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _double(x: float, t: str = "DOUBLE") -> str:
    if math.isnan(x):
        return f"CAST('NaN' AS {t})"
    if math.isinf(x):
        return f"CAST('{'-' if x < 0 else ''}Infinity' AS {t})"
    return f"CAST('{x!r}' AS {t})"


@dataclass(frozen=True)
class SqlType:
    """A Spark type, how to write its values, and what Spark lets it do."""

    name: str                       # the SQL type
    values: st.SearchStrategy       # SQL literals of non-NULL values
    orderable: bool = True          # MIN/MAX, sort_array, collect_set
    numeric: bool = False           # SUM/AVG (and the variance family unless an interval)
    interval: bool = False
    sums: st.SearchStrategy | None = None  # values whose sums are the same in any order

    @property
    def collated(self) -> bool:
        """Strings of a collation other than UTF8_BINARY in it (docs/semantics.md, 7.1)."""
        return bool(_COLLATE.search(self.name))

    @property
    def binary_name(self) -> str:
        """The same type with every string UTF8_BINARY."""
        return _COLLATE.sub("COLLATE UTF8_BINARY", self.name)

    def literal(self):
        """SQL literals of this type, NULL included."""
        return st.one_of(st.just(f"CAST(NULL AS {self.name})"), self.values.map(lambda v: f"CAST({v} AS {self.name})"))


def _ints(bits: int) -> SqlType:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    name = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}[bits]
    small = st.integers(-3, 3).map(str)
    edges = st.sampled_from([lo, hi, lo + 1, hi - 1, 0]).map(str)
    if bits < 64:
        return SqlType(name, st.one_of(small, edges), numeric=True, sums=st.one_of(small, edges))
    # BIGINT sums past the limit: non-negative (or non-positive) values overflow in any order
    sums = st.one_of(small, st.sampled_from([str(I64_MAX), str(I64_MAX - 1), "0", "1"]))
    return SqlType(name, st.one_of(small, edges), numeric=True, sums=sums)


_DOUBLES = [0.0, -0.0, 1.5, -2.25, 3.0, math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 2.0**53 + 1]
_SAFE_DOUBLES = [0.0, -0.0, 1.5, -2.25, 3.0, 0.5, math.nan, math.inf, -math.inf]
_FLOATS = [0.0, -0.0, 1.5, -2.25, math.nan, math.inf, -math.inf, 3.4028234663852886e38, 1.401298464324817e-45]


def _decimal(p: int, s: int) -> SqlType:
    def text(units: int) -> str:
        sign = "-" if units < 0 else ""
        digits = str(abs(units)).rjust(s + 1, "0")
        return f"'{sign}{digits[:-s]}.{digits[-s:]}'" if s else f"'{sign}{digits}'"

    top = 10**p - 1  # the largest unscaled value of the type: the generated values fit it
    small = min(400, top)
    values = st.one_of(st.integers(-small, small), st.sampled_from([top, -top, 1, -1, 0, top // 2])).map(text)
    sums = st.one_of(st.integers(0, small), st.sampled_from([top, top - 1, 0, 1])).map(text)  # never negative
    return SqlType(f"DECIMAL({p},{s})", values, numeric=True, sums=sums)


def _micros():
    return st.tuples(st.sampled_from(DST_CHANGES), st.integers(-3_600_000_000, 3_600_000_000)).map(sum)


SCALARS = [
    _ints(8), _ints(16), _ints(32), _ints(64),
    SqlType("FLOAT", st.sampled_from(_FLOATS).map(lambda x: _double(x, "FLOAT")), numeric=True,
            sums=st.sampled_from(_SAFE_DOUBLES).map(lambda x: _double(x, "FLOAT"))),
    SqlType("DOUBLE", st.sampled_from(_DOUBLES).map(_double), numeric=True,
            sums=st.sampled_from(_SAFE_DOUBLES).map(_double)),
    _decimal(1, 0), _decimal(5, 2), _decimal(18, 0), _decimal(18, 9), _decimal(38, 0), _decimal(38, 18),
    _decimal(38, 38),
    SqlType("STRING", st.sampled_from(_STRINGS).map(_string)),
    # collated keys group by the collation ('a' = 'A'; 'é' = 'e\u0301' in UNICODE_CI)
    SqlType("STRING COLLATE UTF8_LCASE", st.sampled_from(_STRINGS + ["IT'S"]).map(_string)),
    SqlType("STRING COLLATE UNICODE_CI", st.sampled_from(_STRINGS + ["É"]).map(_string)),
    SqlType("BINARY", st.sampled_from(["X''", "X'00'", "X'FF'", "X'00FF'", "X'61'"])),
    SqlType("BOOLEAN", st.sampled_from(["true", "false"])),
    SqlType("DATE", st.sampled_from(["DATE'1970-01-01'", "DATE'2024-03-10'", "DATE'1969-12-31'", "DATE'9999-12-31'",
                                     "DATE'0001-01-01'"])),
    SqlType("TIMESTAMP", _micros().map(lambda m: f"timestamp_micros({m})")),
    SqlType("TIMESTAMP_NTZ", st.sampled_from(["TIMESTAMP_NTZ'2024-03-10 02:30:00'", "TIMESTAMP_NTZ'2024-11-03 01:30:00'",
                                              "TIMESTAMP_NTZ'1970-01-01 00:00:00.000001'"])),
    SqlType("INTERVAL DAY TO SECOND", st.sampled_from(["INTERVAL '1 02:03:04.000005' DAY TO SECOND",
                                                       "INTERVAL '-0 00:00:00.000001' DAY TO SECOND",
                                                       "INTERVAL '0' SECOND", "INTERVAL '106751990' DAY"]),
            numeric=True, interval=True,
            sums=st.sampled_from(["INTERVAL '1' SECOND", "INTERVAL '0.000001' SECOND", "INTERVAL '106751990' DAY"])),
]


def _array(element: SqlType) -> SqlType:
    values = st.lists(element.literal(), max_size=3).map(lambda xs: f"array({', '.join(xs)})" if xs
                                                         else f"CAST(array() AS ARRAY<{element.name}>)")
    return SqlType(f"ARRAY<{element.name}>", values, orderable=element.orderable)


def _struct(a: SqlType, b: SqlType) -> SqlType:
    values = st.tuples(a.literal(), b.literal()).map(lambda ab: f"named_struct('a', {ab[0]}, 'b', {ab[1]})")
    return SqlType(f"STRUCT<a: {a.name}, b: {b.name}>", values, orderable=a.orderable and b.orderable)


def _map(key: SqlType, value: SqlType) -> SqlType:
    entries = st.lists(st.tuples(key.values.map(lambda v: f"CAST({v} AS {key.name})"), value.literal()),
                       max_size=3, unique_by=lambda kv: kv[0])
    values = entries.map(lambda kvs: f"map({', '.join(f'{k}, {v}' for k, v in kvs)})" if kvs
                         else f"CAST(map() AS MAP<{key.name}, {value.name}>)")
    return SqlType(f"MAP<{key.name}, {value.name}>", values, orderable=False)


_BY_NAME = {t.name: t for t in SCALARS}
NESTED = [
    _array(_BY_NAME["INT"]), _array(_BY_NAME["DOUBLE"]), _array(_BY_NAME["STRING"]),
    _struct(_BY_NAME["INT"], _BY_NAME["STRING"]), _struct(_BY_NAME["DOUBLE"], _array(_BY_NAME["INT"])),
    _array(_struct(_BY_NAME["BIGINT"], _BY_NAME["DOUBLE"])), _struct(_BY_NAME["TIMESTAMP"], _BY_NAME["DECIMAL(38,18)"]),
    _map(_BY_NAME["STRING"], _BY_NAME["INT"]), _map(_BY_NAME["INT"], _BY_NAME["DOUBLE"]),
    _array(_BY_NAME["STRING COLLATE UTF8_LCASE"]), _struct(_BY_NAME["INT"], _BY_NAME["STRING COLLATE UNICODE_CI"]),
]
TYPES = SCALARS + NESTED


# ----------------------------------------------------------------------------- queries


@dataclass
class Case:
    """One example: a table, a windowed query over it, and the session it runs in."""

    key: SqlType
    value: SqlType
    rows: list                 # (k, v, event time micros or None) as SQL literals
    aggregates: list           # SQL of the aggregate items, over `v`
    window: tuple              # (kind, *microseconds)
    time_zone: str = "UTC"
    ansi: bool = True
    refused: bool = False      # an aggregate Spark refuses: every path must fail alike
    notes: list = field(default_factory=list)


def _aggregates(value: SqlType, draw) -> tuple[list, bool]:
    """Aggregates over `v` that Spark accepts for its type, or (sometimes) one it refuses."""
    refusals = []
    if not value.numeric and not value.name.startswith("STRING"):  # Spark would cast a STRING (sqlflow refuses)
        refusals.append("SUM(v)")
    if not value.orderable:
        refusals += ["MIN(v)", "sort_array(collect_set(v))"]
    if refusals and draw(st.integers(0, 9)) == 0:
        return [draw(st.sampled_from(refusals))], True
    if value.collated:  # the engine refuses to compare them (MIN, MAX, DISTINCT); ties sort in any order
        return draw(st.lists(st.sampled_from(["COUNT(*)", "COUNT(v)", "size(collect_list(v))"]), min_size=1,
                             max_size=3, unique=True)), False
    pool = ["COUNT(*)", "COUNT(v)", "COUNT(DISTINCT v)", "size(collect_list(v))"]
    if value.orderable:
        pool += ["MIN(v)", "MAX(v)", "sort_array(collect_set(v))", "sort_array(collect_list(v))"]
    if value.numeric:
        pool += ["SUM(v)", "AVG(v)"]
        if not value.interval:
            pool += ["STDDEV(v)", "VAR_POP(v)", "STDDEV_POP(v)", "VARIANCE(v)"]
    return draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5, unique=True)), False


SIZES = [1, 1_000, 1_000_000, 90_000_000, 3_600_000_000, 86_400_000_000]


@st.composite
def windows(draw):
    kind = draw(st.sampled_from(["GLOBAL", "FIXED", "SLIDING", "SESSIONS"]))
    if kind == "GLOBAL":
        return ("GLOBAL",)
    size = draw(st.sampled_from(SIZES))
    if kind == "FIXED":
        return ("FIXED", size, draw(st.integers(0, size - 1)) if draw(st.booleans()) else 0)
    if kind == "SLIDING":
        # at most 100 windows per element (Spark's window() expands each row into all of them)
        period = draw(st.sampled_from([p for p in SIZES if p <= size and size % p == 0 and size // p <= 100]))
        return ("SLIDING", size, period, draw(st.integers(0, period - 1)) if draw(st.booleans()) else 0)
    return ("SESSIONS", max(size, 1_000))


@st.composite
def cases(draw):
    key = draw(st.sampled_from(TYPES))
    value = draw(st.sampled_from(TYPES))
    aggregates, refused = _aggregates(value, draw)
    summing = any(a.split("(")[0] in ("SUM", "AVG", "STDDEV", "VAR_POP", "STDDEV_POP", "VARIANCE") for a in aggregates)
    values = value.literal() if not (summing and value.sums is not None) else st.one_of(
        st.just(f"CAST(NULL AS {value.name})"), value.sums.map(lambda v: f"CAST({v} AS {value.name})"))
    keys = draw(st.lists(key.literal(), min_size=1, max_size=3, unique=True))
    times = st.one_of(st.none(), _micros(), st.sampled_from(DST_CHANGES))
    rows = draw(st.lists(st.tuples(st.sampled_from(keys), values, times), max_size=10))
    window, time_zone, ansi = draw(windows()), draw(st.sampled_from(TIME_ZONES)), draw(st.booleans())
    assume(not (refused and value.name == "TIMESTAMP" and not ansi))  # Spark casts it (module doc)
    return Case(key, value, rows, aggregates, window, time_zone, ansi, refused)


def _duration(micros: int) -> str:
    return f"INTERVAL {micros} MICROSECONDS"


def sqlflow_query(case: Case) -> str:
    items = ", ".join(f"{a} AS a{i}" for i, a in enumerate(case.aggregates))
    kind, *args = case.window
    if kind == "GLOBAL":
        window = "GLOBAL"
    elif kind == "FIXED":
        window = f"FIXED(SIZE {_duration(args[0])}, OFFSET {_duration(args[1])})"
    elif kind == "SLIDING":
        window = f"SLIDING(SIZE {_duration(args[0])}, PERIOD {_duration(args[1])}, OFFSET {_duration(args[2])})"
    else:
        window = f"SESSIONS(GAP {_duration(args[0])})"
    return f"SELECT k, {items} FROM data GROUP BY k WINDOW {window} ON ts"


def spark_query(case: Case) -> str:
    """The same query by hand: Spark's own window functions and GROUP BY. sqlflow's sessions do
    not merge rows exactly a gap apart, Spark's do: the gap is 1 microsecond shorter and the
    session end 1 microsecond later (docs/semantics.md, 2). Collated keys are replaced by their
    group's smallest member first, as sqlflow shows them (docs/semantics.md, 7.1)."""
    text = _spark_query(case)
    if not case.key.collated:
        return text
    smallest = f"CAST(min(CAST(k AS {case.key.binary_name})) OVER (PARTITION BY k) AS {case.key.name})"
    return f"WITH data AS (SELECT {smallest} AS k, v, ts FROM data) {text}"


def _spark_query(case: Case) -> str:
    items = ", ".join(f"{a} AS a{i}" for i, a in enumerate(case.aggregates))
    kind, *args = case.window
    if kind == "GLOBAL":
        return (f"SELECT k, {items}, CAST(NULL AS TIMESTAMP) AS window_start, CAST(NULL AS TIMESTAMP) AS window_end "
                "FROM data WHERE ts IS NOT NULL GROUP BY k")
    if kind == "SESSIONS":
        w = f"session_window(ts, '{args[0] - 1} microseconds')"
        return (f"SELECT k, {items}, session_window.start AS window_start, "
                f"session_window.end + INTERVAL 1 MICROSECOND AS window_end FROM data GROUP BY k, {w}")
    size, period, offset = (args[0], args[0], args[1]) if kind == "FIXED" else args
    w = f"window(ts, '{size} microseconds', '{period} microseconds', '{offset} microseconds')"
    return (f"SELECT k, {items}, window.start AS window_start, window.end AS window_end "
            f"FROM data GROUP BY k, {w}")


def create_table(spark, case: Case) -> None:
    rows = [f"({k}, {v}, {'NULL' if t is None else f'timestamp_micros({t})'})" for k, v, t in case.rows]
    if not rows:  # no rows, still typed
        rows = [f"(CAST(NULL AS {case.key.name}), CAST(NULL AS {case.value.name}), CAST(NULL AS TIMESTAMP))"]
        where = "WHERE false"
    else:
        where = ""
    spark.sql(f"CREATE OR REPLACE TEMP VIEW data AS SELECT CAST(k AS {case.key.name}) AS k, "
              f"CAST(v AS {case.value.name}) AS v, CAST(ts AS TIMESTAMP) AS ts "
              f"FROM VALUES {', '.join(rows)} AS t(k, v, ts) {where}")


# ----------------------------------------------------------------------------- comparing


def _canonical(x):
    """A value as compared: NaN equal to NaN, -0.0 to 0.0, maps whatever their entries' order,
    floats to 1e-9 relative (rounded), timestamps as instants."""
    if isinstance(x, float):
        if math.isnan(x):
            return ("NaN",)
        if math.isinf(x) or x == 0:
            return x + 0.0
        return float(f"{x:.9e}")
    if isinstance(x, dict):
        return ("map", tuple(sorted((repr(_canonical(k)), repr(_canonical(v))) for k, v in x.items())))
    if isinstance(x, (list, tuple)):
        if x and all(isinstance(e, tuple) and len(e) == 2 for e in x) and isinstance(x, list):
            return ("map", tuple(sorted((repr(_canonical(k)), repr(_canonical(v))) for k, v in x)))
        return tuple(_canonical(e) for e in x)
    if isinstance(x, dt.datetime) and x.tzinfo is not None:
        return x.astimezone(dt.timezone.utc)
    return x


@dataclass
class Outcome:
    error: str | None = None    # the SQLSTATE (or error class) of a failure
    types: list | None = None
    rows: list | None = None

    def __eq__(self, other):
        return (self.error, self.types, self.rows) == (other.error, other.types, other.rows)


def outcome(run) -> Outcome:
    from pyspark.errors import PySparkException

    try:
        df = run()
        columns = [c for c in df.columns if c == "k" or c.startswith("a") or c in ("window_start", "window_end")]
        df = df.select(*columns)
        rows = [tuple(_canonical(v) for v in r.values()) for r in df.toArrow().to_pylist()]
        return Outcome(types=[t for _, t in df.dtypes], rows=sorted(rows, key=repr))
    except sqlflow.SqlflowError as e:
        cause = e.__cause__
        state = cause.getSqlState() if isinstance(cause, PySparkException) else None
        return Outcome(error=state or e.spark_sql_state or e.spark_error_class or f"sqlflow {type(e).__name__}: {e}")
    except PySparkException as e:
        return Outcome(error=e.getSqlState() or e.getCondition() or str(e))


def check(spark, case: Case) -> None:
    spark.conf.set("spark.sql.session.timeZone", case.time_zone)
    spark.conf.set("spark.sql.ansi.enabled", str(case.ansi).lower())
    try:
        create_table(spark, case)
        query = sqlflow_query(case)
        expected = outcome(lambda: spark.sql(spark_query(case)))
        native = outcome(lambda: sqlflow.sql(spark, query, path="native"))
        engine = outcome(lambda: sqlflow.sql(spark, query, path="engine"))
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        spark.conf.set("spark.sql.ansi.enabled", "true")
    context = f"{query}\n  time zone {case.time_zone}, ANSI {case.ansi}, rows {case.rows}"
    if case.key.collated and not case.refused:
        # the engine's alone (docs/semantics.md, 7.1): the native path refuses the query before it
        # runs, also where Spark's own fails at run time (an overflow); an aggregate Spark refuses
        # fails first, on every path (below)
        assert native.error is not None and "keys of collation" in native.error, f"{native}\n  {context}"
    else:
        assert native == expected, f"native path differs from Spark:\n  {native}\n  {expected}\n  {context}"
    assert engine == expected, f"engine path differs from Spark:\n  {engine}\n  {expected}\n  {context}"
    if case.refused:
        assert expected.error is not None, f"Spark accepted {case.aggregates}: {context}"


@settings(max_examples=EXAMPLES,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(case=cases())
def test_engine_native_and_spark_agree(spark, case):
    check(spark, case)


# ----------------------------------------------------------------------------- regressions


def regression(key: str, value: str, rows: list, aggregates: list, window: tuple, time_zone: str = "UTC",
               ansi: bool = True, refused: bool = False) -> Case:
    """A failing example the harness found, kept (types by name; rows as SQL literals)."""
    return Case(_TYPES_BY_NAME[key], _TYPES_BY_NAME[value], rows, aggregates, window, time_zone, ansi, refused)


_TYPES_BY_NAME = {t.name: t for t in TYPES}
_T0 = DST_CHANGES[0]

#: every example the harness found failing, as it was found (with the fault it exposed)
REGRESSIONS = {
    # a bucket holding only NaN keys handed them to pandas as NaN, which pandas takes for NULL
    # (and the NULL key came back as NaN): the NaN and NULL keys of two buckets swapped
    "double NaN and NULL keys in different buckets": regression(
        "DOUBLE", "INT",
        [("CAST(CAST('NaN' AS DOUBLE) AS DOUBLE)", "CAST(1 AS INT)", _T0),
         ("CAST(CAST('-NaN' AS DOUBLE) AS DOUBLE)", "CAST(2 AS INT)", _T0),
         ("CAST(NULL AS DOUBLE)", "CAST(5 AS INT)", _T0), ("CAST(0.0 AS DOUBLE)", "CAST(3 AS INT)", _T0)],
        ["SUM(v)", "COUNT(*)"], ("FIXED", 60_000_000, 0)),
    # pandas converted a struct's BIGINT field beside a NULL to a float: collect_list lost its
    # digits (a float past the largest BIGINT failed the Python worker)
    "a BIGINT in a struct beside a NULL, collected": regression(
        "TINYINT", "ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>",
        [("CAST(NULL AS TINYINT)", "CAST(NULL AS ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>)", None),
         ("CAST(NULL AS TINYINT)", "CAST(array(CAST(NULL AS STRUCT<a: BIGINT, b: DOUBLE>), named_struct('a', "
          "CAST(9223372036854775806 AS BIGINT), 'b', CAST(NULL AS DOUBLE))) AS ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>)",
          _T0)],
        ["COUNT(*)", "size(collect_list(v))", "sort_array(collect_list(v))"], ("GLOBAL",), ansi=False),
    # combining rows before the shuffle grouped by the MAP key and the slice: Spark 4.3's aggregate
    # turned the map's NULL value into 0 (bounded sessions no longer combine over MAP keys)
    "a MAP key with a NULL value, combined": regression(
        "MAP<STRING, INT>", "TINYINT",
        [("CAST(map(CAST('' AS STRING), CAST(NULL AS INT)) AS MAP<STRING, INT>)", "CAST(NULL AS TINYINT)",
          1_710_064_800_000_000)],
        ["COUNT(*)"], ("SESSIONS", 1000), ansi=False),
    # MIN of nested values in a window without any: pandas's mask of the Arrow array failed the worker
    "MIN of a struct array in a window of NULLs": regression(
        "TINYINT", "ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>",
        [("CAST(NULL AS TINYINT)", "CAST(NULL AS ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>)", _T0),
         ("CAST(NULL AS TINYINT)", "CAST(array(CAST(NULL AS STRUCT<a: BIGINT, b: DOUBLE>), named_struct('a', "
          "CAST(9223372036854775807 AS BIGINT), 'b', CAST(NULL AS DOUBLE))) AS ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>)",
          _T0 + 1)],
        ["MIN(v)"], ("FIXED", 1, 0), ansi=False),
    # the native path's refusal of SUM(array) over an empty table named the error class, Spark the SQLSTATE
    "SUM of an array over no rows": regression(
        "TINYINT", "ARRAY<STRUCT<a: BIGINT, b: DOUBLE>>", [], ["SUM(v)"], ("GLOBAL",), refused=True),
    # the engine grouped collated keys by their bytes ('a' and 'A' apart); Spark's session_window
    # does too, its GROUP BY does not: sqlflow follows the GROUP BY (the hand-written query here
    # groups the smallest members)
    "UTF8_LCASE keys in one session": regression(
        "STRING COLLATE UTF8_LCASE", "INT",
        [(f"CAST({k} AS STRING COLLATE UTF8_LCASE)", f"CAST({v} AS INT)", t) for k, v, t in
         [("'a'", 1, _T0), ("'A'", 2, _T0 + 10), ("'B'", 4, _T0 + 20), ("'b'", 8, _T0 + 5_000_000), ("NULL", 16, _T0)]],
        ["SUM(v)", "COUNT(*)"], ("SESSIONS", 1_000)),
    # AVG of a DECIMAL divided by Spark's try_divide in Spark SQL: past the division's own type
    # (DECIMAL(38,6) here) it was NULL where Spark's AVG fails in ANSI mode
    "AVG of the largest DECIMAL(38,0), ANSI": regression(
        "TINYINT", "DECIMAL(38,0)",
        [("CAST(NULL AS TINYINT)", "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))", _T0)],
        ["COUNT(*)", "COUNT(v)", "AVG(v)"], ("GLOBAL",)),
    "AVG of the largest DECIMAL(38,0), not ANSI": regression(
        "TINYINT", "DECIMAL(38,0)",
        [("CAST(NULL AS TINYINT)", "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))", _T0)],
        ["COUNT(*)", "COUNT(v)", "AVG(v)"], ("GLOBAL",), ansi=False),
    # ... and where the division's type has fewer decimals than AVG's (DECIMAL(38,18) / count:
    # 18, AVG's 22), it rounded them away: 2.0000E-18 where Spark's AVG is 1.5000E-18
    "AVG of DECIMAL(38,18) to 22 decimals": regression(
        "INT", "DECIMAL(38,18)",
        [("CAST(1 AS INT)", f"CAST('{v}' AS DECIMAL(38,18))", _T0) for v in ("0.000000000000000001", "0.000000000000000002")]
        + [("CAST(2 AS INT)", f"CAST('{v}' AS DECIMAL(38,18))", _T0) for v in ("0.000000000000000001", "0", "0")],
        ["AVG(v)", "SUM(v)"], ("FIXED", 60_000_000, 0)),
    # a collated key's query fails in Spark (AVG overflows): the native path refuses the key
    # before it runs (the harness asked it to fail as Spark does)
    "UTF8_LCASE key, AVG overflowing": regression(
        "STRING COLLATE UTF8_LCASE", "DECIMAL(38,0)",
        [("CAST(NULL AS STRING COLLATE UTF8_LCASE)", "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))",
          _T0)],
        ["COUNT(*)", "COUNT(v)", "AVG(v)"], ("GLOBAL",)),
}


def test_a_timestamp_sum_without_ansi_runs_natively(spark):
    """Found by the harness (a SUM(v) it took for refused): without ANSI mode Spark casts a
    TIMESTAMP to DOUBLE for SUM; the engine adds numbers, so `path='engine'` refuses the call with
    a located error and the default path runs it natively, as Spark does (docs/semantics.md, 7.1,
    exception 2)."""
    case = regression("TINYINT", "TIMESTAMP", [("CAST(1 AS TINYINT)", "timestamp_micros(1500000)", _T0)],
                      ["SUM(v)"], ("GLOBAL",), ansi=False)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        create_table(spark, case)
        query = sqlflow_query(case)
        expected = outcome(lambda: spark.sql(spark_query(case)))
        assert expected == Outcome(types=["tinyint", "double", "timestamp", "timestamp"], rows=[(1, 1.5, None, None)])
        assert outcome(lambda: sqlflow.sql(spark, query)) == expected
        assert outcome(lambda: sqlflow.sql(spark, query, path="native")) == expected
        with pytest.raises(sqlflow.SqlflowError, match="SUM of numbers, not TIMESTAMP") as refused:
            sqlflow.sql(spark, query, path="engine")
        assert refused.value.line == 1 and refused.value.column is not None
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "true")


@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_regressions(spark, name):
    check(spark, REGRESSIONS[name])


def test_the_release_run_is_documented(repo_root):
    """docs/bounded-execution.md's command for the long run loads a profile with more examples
    than CI's."""
    text = (repo_root / "docs" / "bounded-execution.md").read_text(encoding="utf-8")
    command = re.search(r"^SQLFLOW_HYPOTHESIS_PROFILE=(\w+) python -m pytest (\S+)$", text, re.M)
    assert command is not None
    assert HYPOTHESIS_PROFILES[command.group(1)] > HYPOTHESIS_PROFILES["ci"]
    assert (repo_root / command.group(2)).resolve() == Path(__file__).resolve()
