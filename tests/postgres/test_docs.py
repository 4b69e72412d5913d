"""The PostgreSQL sink's documented examples, run as written: the README's dashboard (a live
stream whose late click merges two sessions), docs/postgres.md's bounded write, and
docs/interfaces.md's %%sqlflow cell."""
from __future__ import annotations

import contextlib
import io
import re

import psycopg


def block_after(text: str, marker: str, lang: str, n: int = 1) -> list[str]:
    section = text[text.index(marker):]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.DOTALL)[:n]


def run_printing(code: str, namespace: dict | None = None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<docs>", "exec"), namespace if namespace is not None else {})
    return out.getvalue()


def test_the_readme_dashboard(spark, rocksdb, repo_root):
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    code, = block_after(text, "### A current-results table in PostgreSQL", "python")
    shown, = block_after(text, "### A current-results table in PostgreSQL", "text")
    assert run_printing(code) == shown


def test_the_docs_bounded_write(spark, repo_root):
    text = (repo_root / "docs" / "postgres.md").read_text(encoding="utf-8")
    code, = block_after(text, "## 1. Where to write it", "python")
    assert run_printing(code) == "True False\n"


def test_the_docs_magic_cell(ipython, spark, rocksdb, repo_root, pg_url, monkeypatch, tmp_path):
    text = (repo_root / "docs" / "interfaces.md").read_text(encoding="utf-8")
    setup, = block_after(text, "**A current-results table in PostgreSQL**", "python")
    cell, = block_after(text, "**A current-results table in PostgreSQL**", "sql")
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
