"""The lark grammar of sqlflow's clauses (`sqlflow.lark`), the language's single source of truth.

Kept free of heavy imports: reading the grammar needs neither lark nor sqlglot.

>>> GRAMMAR_PATH.name
'sqlflow.lark'
>>> "windowing:" in grammar_text()
True
"""
from __future__ import annotations

from pathlib import Path

#: where the grammar file is (shipped as package data of sqlflow.grammar)
GRAMMAR_PATH = Path(__file__).with_name("sqlflow.lark")

#: lark start rules: the clause tail of a windowed SELECT, the source WATERMARK clause, a duration
START_RULES = ("windowing", "source_watermark", "duration")


def grammar_text() -> str:
    """The grammar's text."""
    return GRAMMAR_PATH.read_text(encoding="utf-8")
