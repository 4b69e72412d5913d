"""The PostgreSQL writer's statements against a real server (tests/postgres/conftest.py): after
every batch the table equals the changelog re-aggregated, a batch recorded once is never applied
again, a table of another shape is refused, and no message shows a password."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sqlflow.ast import AccumulationMode
from sqlflow.errors import SqlflowAnalysisError, SqlflowExecutionError
from sqlflow.spark.sinks.postgres import PostgresTable, connect, redact

from .changelogs import COLUMNS, current_result, normalised, shape, simulate
from tests.conftest import examples

MODES = list(AccumulationMode)
TYPES = {"user_id": "text", "window_start": "bigint", "window_end": "bigint", "clicks": "bigint", "total": "bigint",
         "pane_index": "bigint", "pane_timing": "text", "is_last": "boolean", "emit_time": "bigint",
         "output_time": "bigint"}
SCHEMA = pa.schema([("user_id", pa.string()), ("clicks", pa.int64()), ("total", pa.int64()),
                    ("window_start", pa.int64()), ("window_end", pa.int64()), ("pane_index", pa.int64()),
                    ("pane_timing", pa.string()), ("is_last", pa.bool_()), ("emit_time", pa.int64()),
                    ("output_time", pa.int64()), ("is_retraction", pa.bool_())])
_tables = iter(range(10**9))


def arrow(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame.astype(object).where(frame.notna(), None), schema=SCHEMA, preserve_index=False)


def table_of(mode: AccumulationMode, name: str) -> PostgresTable:
    s = shape(mode)
    return PostgresTable(name, s, {c: TYPES[c] for c in s.columns})


def read(pg, name: str) -> pd.DataFrame:
    cur = pg.execute(f'SELECT {", ".join(COLUMNS)} FROM "{name}"')
    return pd.DataFrame(cur.fetchall(), columns=list(COLUMNS))


@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
@settings(max_examples=examples(20), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2), st.integers(0, 8), st.integers(1, 9)),
                    min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 7), max_size=3), seed=st.integers(0, 2**32 - 1), global_windows=st.booleans())
# a session refined in place across two batches (its row updated), and one merged across them
@example(ops=[(0, 0, 1, 3), (1, 0, 1, 3)], cuts=[1], seed=0, global_windows=False)
@example(ops=[(0, 0, 0, 1), (0, 0, 0, 2), (1, 0, 2, 3), (2, 0, 1, 6)], cuts=[1, 2], seed=0, global_windows=False)
def test_table_after_each_batch_is_the_changelog_reaggregated(pg, pg_url, mode, ops, cuts, seed, global_windows):
    steps = simulate(ops, mode, global_windows=global_windows)
    bounds = sorted({c % (len(steps) + 1) for c in cuts} | {0, len(steps)})
    rng = np.random.default_rng(seed)
    name = f"prop_{next(_tables)}"
    table = table_of(mode, name)
    seen = []
    with connect(pg_url) as conn:
        for batch_id, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            batch = pd.concat(steps[lo:hi], ignore_index=True)
            seen.append(batch)
            assert table.apply(conn, arrow(batch.iloc[rng.permutation(len(batch))]), query_id="q", batch_id=batch_id)
            assert normalised(read(pg, name)) == normalised(current_result(pd.concat(seen, ignore_index=True), mode))


def test_a_new_session_on_the_bounds_of_one_grown_in_the_same_batch(pg, pg_url):
    """One batch in which b's session [400, 410) grows to [400, 411) (a retraction, a pane) and a
    new session of b then takes the bounds [400, 410) again, pane index 0: the table keeps both
    sessions of b, [400, 410) with the new session's pane (emit time 2000), not the first one's."""
    mode = AccumulationMode.ACCUMULATING_AND_RETRACTING
    ops = [(0, 0, 0, 1), (0, 0, 0, 1), (0, 0, 0, 1), (0, 1, 0, 1), (0, 0, 8, 1), (0, 0, 8, 1), (1, 1, 1, 1),
           (1, 1, 0, 1)]
    batch = pd.concat(simulate(ops, mode, global_windows=False), ignore_index=True)
    name = f"prop_{next(_tables)}"
    with connect(pg_url) as conn:
        assert table_of(mode, name).apply(conn, arrow(batch.iloc[np.random.default_rng(0).permutation(len(batch))]),
                                          query_id="q", batch_id=0)
    assert normalised(read(pg, name)) == normalised(current_result(batch, mode)) == [
        ("a", 5, 5, 100, 311, 0, "EARLY", False, 1000, 310), ("b", 1, 1, 400, 410, 0, "EARLY", False, 2000, 409),
        ("b", 2, 2, 400, 411, 0, "EARLY", False, 2000, 410)]


def test_a_batch_recorded_is_skipped(pg, pg_url, table_name):
    """DISCARDING adds panes, so a batch applied twice would double the row: the second apply of
    (query, batch) is skipped, another query's batch of the same id is not."""
    mode = AccumulationMode.DISCARDING
    steps = simulate([(0, 0, 0, 5), (0, 0, 1, 2)], mode)
    table = table_of(mode, table_name)
    conn = connect(pg_url)
    assert table.apply(conn, arrow(steps[0]), query_id="q1", batch_id=7) is True
    assert table.apply(conn, arrow(steps[0]), query_id="q1", batch_id=7) is False
    assert read(pg, table_name)[["user_id", "clicks", "total"]].values.tolist() == [["a", 2, 7]]
    assert table.apply(conn, arrow(steps[0]), query_id="q2", batch_id=7) is True
    assert read(pg, table_name)[["user_id", "clicks", "total"]].values.tolist() == [["a", 4, 14]]
    assert pg.execute("SELECT query_id, batch_id, table_name, rows_upserted, rows_deleted FROM sqlflow_batches "
                      "WHERE table_name = %s ORDER BY query_id", (table_name,)).fetchall() == [
        ("q1", 7, table_name, 1, 0), ("q2", 7, table_name, 1, 0)]
    conn.close()


def test_a_failed_batch_leaves_nothing(pg, pg_url, table_name):
    """A batch whose statements fail (here: a key column NULL where the table says NOT NULL)
    rolls back whole: no rows, and no record, so Spark's re-run applies it."""
    table = table_of(AccumulationMode.ACCUMULATING, table_name)
    conn = connect(pg_url)
    table.ensure(conn)
    pg.execute(f'ALTER TABLE "{table_name}" ALTER COLUMN user_id SET NOT NULL')
    steps = simulate([(0, 0, 0, 1), (0, 2, 0, 1)], AccumulationMode.ACCUMULATING)  # users a and NULL
    with pytest.raises(Exception, match="null value"):
        table.apply(conn, arrow(steps[0]), query_id="q", batch_id=0)
    conn.rollback()
    assert read(pg, table_name).empty
    assert pg.execute("SELECT count(*) FROM sqlflow_batches WHERE table_name = %s", (table_name,)).fetchone() == (0,)
    conn.close()


def test_a_table_of_another_shape_is_refused(pg, pg_url, table_name):
    pg.execute(f'CREATE TABLE "{table_name}" (user_id text, clicks bigint)')
    conn = connect(pg_url)
    with pytest.raises(SqlflowAnalysisError) as e:
        table_of(AccumulationMode.ACCUMULATING, table_name).ensure(conn)
    assert e.value.clause == "INSERT"
    assert str(e.value).startswith(f"sqlflow: INSERT: table {table_name} exists with another shape: it has "
                                   "(user_id text, clicks bigint); the query writes (user_id text, window_start "
                                   "bigint, window_end bigint, clicks bigint, total bigint, pane_index bigint, ")
    conn.close()


def test_an_existing_table_of_the_same_shape_is_reused(pg, pg_url, table_name):
    conn = connect(pg_url)
    table_of(AccumulationMode.ACCUMULATING, table_name).ensure(conn)
    steps = simulate([(0, 0, 0, 4)], AccumulationMode.ACCUMULATING)
    assert table_of(AccumulationMode.ACCUMULATING, table_name).apply(conn, arrow(steps[0]), query_id=None,
                                                                     batch_id=None)
    assert read(pg, table_name)[["user_id", "total"]].values.tolist() == [["a", 4]]
    conn.close()


def test_an_unreachable_server_error_has_no_password(postgres):
    url = f"postgresql://ann:s3cret-pw@127.0.0.1:{postgres.port + 1 if postgres.port < 65535 else 1}/shop"
    with pytest.raises(SqlflowExecutionError) as e:
        connect(url)
    message = str(e.value)
    assert "s3cret-pw" not in message and "s3cret-pw" not in repr(e.value.__cause__)
    assert message.startswith("sqlflow: INSERT: cannot connect to PostgreSQL at postgresql://ann:***@127.0.0.1:")
    assert e.value.__cause__ is None and e.value.__context__ is None  # psycopg's error, which holds the URL, is not chained


def test_a_wrong_password_error_has_no_password(pg, postgres):
    """A role that must give its password (scram-sha-256 for it alone in pg_hba.conf), given the
    wrong one: the error names the URL without the password, and carries none."""
    pg.execute("DROP ROLE IF EXISTS ann")
    pg.execute("CREATE ROLE ann LOGIN PASSWORD 'right-one'")
    hba = postgres.data / "pg_hba.conf"
    hba.write_text("host all ann 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    pg.execute("SELECT pg_reload_conf()")
    url = f"postgresql://ann:wrong-s3cret@127.0.0.1:{postgres.port}/postgres"
    with pytest.raises(SqlflowExecutionError) as e:
        connect(url)
    assert "wrong-s3cret" not in str(e.value) and e.value.__context__ is None
    assert str(e.value).startswith(f"sqlflow: INSERT: cannot connect to PostgreSQL at postgresql://ann:***@127.0.0.1:"
                                   f"{postgres.port}/postgres: connection failed:")
    assert 'password authentication failed for user "ann"' in str(e.value)
    connect(url.replace("wrong-s3cret", "right-one")).close()
    assert redact("password=wrong-s3cret host=x") == "password=*** host=x"
