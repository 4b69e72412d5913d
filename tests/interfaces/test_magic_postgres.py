"""docs/interfaces.md's %%sqlflow cell that keeps a current-results table in PostgreSQL."""
from __future__ import annotations

import re

import psycopg


def block_after(text: str, marker: str, lang: str) -> str:
    return re.findall(rf"```{lang}\n(.*?)```", text[text.index(marker):], re.DOTALL)[0]


def test_the_docs_magic_cell(ipython, spark, rocksdb, repo_root, pg_url, monkeypatch, tmp_path):
    text = (repo_root / "docs" / "interfaces.md").read_text(encoding="utf-8")
    setup = block_after(text, "**A current-results table in PostgreSQL**", "python")
    cell = block_after(text, "**A current-results table in PostgreSQL**", "sql")
    monkeypatch.chdir(repo_root)
    ipython.user_ns["url"] = pg_url
    setup = setup.replace("/tmp/sqlflow-demo/pg-checkpoints", str(tmp_path / "checkpoints"))
    try:
        assert ipython.run_cell(setup).success
        r = ipython.run_cell(cell)
        assert r.success, r.error_in_exec
    finally:
        for key in ("postgres.url", "checkpointLocation", "trigger", "finish"):
            spark.conf.unset(f"spark.sqlflow.{key}")
    shown = {(row.user_id, row.clicks) for row in ipython.user_ns["dashboard"].collect()}
    with psycopg.connect(pg_url) as db:
        per_user = dict((u, (n, c)) for u, n, c in db.execute(
            "SELECT user_id, count(*), sum(clicks) FROM dashboard_sessions GROUP BY user_id").fetchall())
        assert shown == set(db.execute("SELECT user_id, clicks FROM dashboard_sessions").fetchall())
    assert per_user["alice"] == (3, 14) and per_user["bob"] == (1, 19)
