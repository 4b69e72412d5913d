"""The lark grammar of sqlflow's clauses (`sqlflow.lark`), the language's single source of truth.

Kept free of heavy imports: reading the grammar needs neither lark nor sqlglot.

>>> GRAMMAR_PATH.name
'sqlflow.lark'
>>> "windowing:" in grammar_text()
True
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

#: where the grammar file is in a checkout or an installed wheel (package data of sqlflow.grammar);
#: read it with grammar_text(), which also works when sqlflow ships as a zip (spark-submit --py-files)
GRAMMAR_PATH = Path(__file__).with_name("sqlflow.lark")

#: lark start rules: the clause tail of a windowed SELECT, the source WATERMARK clause, a duration
START_RULES = ("windowing", "source_watermark", "duration")


def grammar_text() -> str:
    """The grammar's text, read as a package resource (a file, or an entry of a zip)."""
    try:
        return resources.files(__name__).joinpath("sqlflow.lark").read_text(encoding="utf-8")
    except (ModuleNotFoundError, TypeError):  # collected as a plain module (doctests in a checkout)
        return GRAMMAR_PATH.read_text(encoding="utf-8")
