"""sqlflow's front end: Spark SQL plus WINDOW / TRIGGER / ALLOWED LATENESS / EMIT, to a sqlglot
tree with typed clauses (`sqlflow.ast`) attached.

The grammar of the clauses is `grammar/sqlflow.lark`; `grammar/README.md` is the language by example.
"""
from __future__ import annotations

from .api import parse, parse_script, to_sql
from .statement import Statement
from .validate import validate

__all__ = ["parse", "parse_script", "to_sql", "validate", "Statement"]
