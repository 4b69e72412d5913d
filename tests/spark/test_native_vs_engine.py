"""Property: on random data and random queries, the native rewrite and the engine path agree.

Wherever a native rewrite exists (bounded data, panes collapsing to one per window, GLOBAL /
FIXED / SLIDING / SESSIONS), `path="native"` and `path="engine"` must return the same rows,
types and columns. The data has few keys, event times on both sides of 1970 with many ties and
rows exactly a session gap apart, NULL values and NULL event times.

More examples: SQLFLOW_HYPOTHESIS_PROFILE=thorough python -m pytest tests/spark/test_native_vs_engine.py
"""
import datetime as dt

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlflow
from tests.conftest import examples

EPOCH = dt.datetime(1970, 1, 1)

WINDOWS = st.one_of(
    st.just("GLOBAL"),
    st.builds(lambda size, off: f"FIXED(SIZE {size}s, OFFSET {off % size}s)",
              st.sampled_from([20, 30, 60, 90]), st.integers(0, 89)),
    st.builds(lambda size, period, off: f"SLIDING(SIZE {size}s, PERIOD {min(period, size)}s, "
                                        f"OFFSET {off % min(period, size)}s)",
              st.sampled_from([30, 60, 90, 120]), st.sampled_from([20, 30, 45, 60]), st.integers(0, 59)),
    st.builds(lambda gap: f"SESSIONS(GAP {gap}s)", st.sampled_from([10, 20, 30, 60])),
    st.just("SESSIONS(GAP CASE WHEN v IS NULL THEN NULL WHEN v % 2 = 0 THEN INTERVAL 30 SECONDS "
            "ELSE INTERVAL 10 SECONDS END)"),
)
AGGREGATES = st.lists(st.sampled_from(["COUNT(*)", "COUNT(v)", "SUM(v)", "MIN(v)", "MAX(v)", "AVG(v)",
                                       "COUNT(DISTINCT v)", "MAX(k)", "SUM(v) * 2 + COUNT(*)"]),
                      min_size=1, max_size=4, unique=True)
ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]),
                          st.one_of(st.none(), st.integers(-3, 9)),
                          st.one_of(st.none(), st.integers(-120, 240).map(lambda s: s * 1_000_000),
                                    st.integers(-120_000_000, 240_000_000))),
                min_size=0, max_size=30)


@st.composite
def queries(draw):
    window = draw(WINDOWS)
    aggs = draw(AGGREGATES)
    keyed = draw(st.booleans())
    where = draw(st.sampled_from(["", "WHERE v IS NULL OR v > 0"]))
    having = draw(st.sampled_from(["", "HAVING COUNT(*) > 1"]))
    trigger = draw(st.sampled_from(["", "TRIGGER WATERMARK EARLY PERIOD 1m", "TRIGGER REPEAT(PERIOD 10s)"]))
    mode = draw(st.sampled_from(["", "EMIT DISCARDING", "EMIT ACCUMULATING AND RETRACTING"]))
    output = draw(st.sampled_from(["", "OUTPUT TIMESTAMP EARLIEST", "OUTPUT TIMESTAMP LATEST"]
                                  + ([] if window == "GLOBAL" else ["OUTPUT TIMESTAMP START OF WINDOW",
                                                                    "OUTPUT TIMESTAMP END OF WINDOW"])))
    items = ", ".join((["k"] if keyed else []) + [f"{a} AS a{i}" for i, a in enumerate(aggs)])
    group = "GROUP BY k" if keyed else ""
    return f"SELECT {items} FROM data {where} {group} {having} WINDOW {window} ON ts {trigger} {mode} {output}"


@settings(max_examples=examples(15), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=ROWS, query=queries())
def test_native_and_engine_paths_agree(spark, rows, query):
    frame = spark.createDataFrame(
        [(k, v, None if t is None else EPOCH + dt.timedelta(microseconds=t)) for k, v, t in rows],
        "k string, v int, ts timestamp")
    frame.createOrReplaceTempView("data")
    native = sqlflow.sql(spark, query, path="native")
    engine = sqlflow.sql(spark, query, path="engine")
    assert native.dtypes == engine.dtypes, query
    key = lambda r: tuple((v is None, str(v)) for v in r)  # noqa: E731
    assert sorted(map(tuple, native.collect()), key=key) == sorted(map(tuple, engine.collect()), key=key), query
    m_native, m_engine = sqlflow.metrics(native), sqlflow.metrics(engine)
    for name in ("input_rows", "panes", "dropped_null_event_time", "dropped_bad_gap"):
        assert m_native[name] == m_engine[name], (name, query)
