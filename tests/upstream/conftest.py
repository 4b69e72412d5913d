"""Fixtures of the upstream tests (tests/upstream): facts of PySpark that sqlflow relies on,
asserted so that an upgrade which changes one fails here, with the fact's name, rather than as a
wrong answer somewhere in sqlflow (docs/spark-internals.md cites each test).

- `frame(key_seconds)`: a pandas frame of rows (k, ts, v), ts = 2024-01-01 00:00:00 + seconds;
- `available_now(df)`: a streaming DataFrame's appended rows (tuples, sorted), trigger availableNow.

Every test here is slow (a Spark job or a streaming query each): CI runs them, `-m "not slow"`
skips them.
"""
from __future__ import annotations

import pandas as pd
import pytest

BASE = pd.Timestamp("2024-01-01")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "upstream" in item.path.parts:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def frame():
    def build(key_seconds) -> pd.DataFrame:
        return pd.DataFrame({"k": [k for k, _ in key_seconds],
                             "ts": [BASE + pd.Timedelta(seconds=s) for _, s in key_seconds],
                             "v": range(len(key_seconds))}).astype({"ts": "datetime64[us]"})
    return build


@pytest.fixture
def available_now():
    def run(df, timeout: float = 300) -> list[tuple]:
        rows: list[tuple] = []
        query = (df.writeStream.outputMode("append")
                 .foreachBatch(lambda batch, _: rows.extend(tuple(r) for r in batch.collect()))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(timeout), "the availableNow query did not terminate"
        return sorted(rows)
    return run
