"""The PostgreSQL sink's documented examples, run as written: the README's dashboard (a live
stream whose late click merges two sessions) and docs/postgres.md's bounded write
(docs/interfaces.md's %%sqlflow cell: tests/interfaces/test_magic_postgres.py)."""
from __future__ import annotations

import contextlib
import io
import re

import pytest


def block_after(text: str, marker: str, lang: str, n: int = 1) -> list[str]:
    section = text[text.index(marker):]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.DOTALL)[:n]


def run_printing(code: str, namespace: dict | None = None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<docs>", "exec"), namespace if namespace is not None else {})
    return out.getvalue()


@pytest.mark.slow
def test_the_readme_dashboard(spark, rocksdb, repo_root):
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    code, = block_after(text, "### A current-results table in PostgreSQL", "python")
    shown, = block_after(text, "### A current-results table in PostgreSQL", "text")
    assert run_printing(code) == shown


def test_the_docs_bounded_write(spark, repo_root):
    text = (repo_root / "docs" / "postgres.md").read_text(encoding="utf-8")
    code, = block_after(text, "## 1. Where to write it", "python")
    assert run_printing(code) == "True False\n"
