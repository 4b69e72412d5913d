"""Fixtures of the PostgreSQL sink's tests; the server itself (`postgres`, `pg_url`) is in
tests/conftest.py, shared with the magic's test."""
from __future__ import annotations

import itertools

import pytest

_names = itertools.count()


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
