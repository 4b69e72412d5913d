"""sqlflow's sqlglot dialect: Spark, plus what sqlflow needs to carry its clauses.

Our clauses are parsed by lark, not sqlglot. Before sqlglot sees a statement, each clause is
replaced by a *marker* identifier (`__sqlflow_windowing_0`, `__sqlflow_watermark_0`); the parser
below records where each marker was (on the SELECT, or on the relation's alias) so the frontend can
hang the clause's AST on that node's `meta`. The generator prints the clauses back from `meta`.

Other differences from sqlglot's Spark dialect:
- `GROUP BY window(ts, '5 minutes')` parses (sqlglot reads WINDOW there as the named-window clause);
- `FROM STREAM t` / `FROM STREAM(t)` are Spark 4's streaming relations: exp.Stream(exp.Table),
  printed `STREAM t`.

>>> import sqlglot
>>> sqlglot.parse_one("SELECT k FROM t GROUP BY window(ts, '5 minutes'), k", read=SqlflowSpark).sql(SqlflowSpark)
"SELECT k FROM t GROUP BY WINDOW(ts, '5 minutes'), k"
>>> sqlglot.parse_one("SELECT * FROM STREAM(t) AS a", read=SqlflowSpark).sql(SqlflowSpark)
'SELECT * FROM STREAM t AS a'
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError
from sqlglot.generators.spark import SparkGenerator
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

from .. import ast
from . import printer

WINDOWING_MARKER = "__sqlflow_windowing_"
WATERMARK_MARKER = "__sqlflow_watermark_"
#: meta key of a SELECT (windowing) or TableAlias (watermark) that held marker number N
MARKER_KEY = "sqlflow_marker"
#: meta keys of the clauses attached to sqlglot nodes
WINDOWING_KEY = "sqlflow"
WATERMARK_KEY = "sqlflow_watermark"

_ALIAS_PLACEHOLDER = "__sqlflow_alias__"


def _marker(token, prefix: str) -> int | None:
    if token is not None and token.token_type == TokenType.VAR and token.text.startswith(prefix):
        return int(token.text[len(prefix):])
    return None


class SqlflowSpark(Spark):
    """Spark SQL as sqlflow reads and prints it."""

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS = {**Spark.Tokenizer.KEYWORDS, "STREAM": TokenType.STREAM}

    class Parser(SparkParser):
        def parse(self, raw_tokens, sql=None):
            _window_calls_are_functions(raw_tokens)
            return super().parse(raw_tokens, sql)

        def parse_into(self, expression_types, raw_tokens, sql=None):
            _window_calls_are_functions(raw_tokens)
            return super().parse_into(expression_types, raw_tokens, sql)

        def _warn_unsupported(self) -> None:
            """sqlglot logs a warning quoting the statement, our markers included, when it falls
            back to an opaque Command: a statement of ours then fails with a located error (its
            clauses are in no SELECT), and a plain one goes to Spark, which judges it."""

        def raise_error(self, message, token=None):
            token = token or self._curr or self._prev
            try:
                super().raise_error(message, token)
            except ParseError as error:
                # sqlglot reports line and *end* column; keep the token for exact positions
                error.sqlflow_token = token  # type: ignore[attr-defined]
                raise

        def _parse_table_alias(self, alias_tokens=None):
            if _marker(self._curr, WINDOWING_MARKER) is not None:
                return None  # our clause tail right after FROM t: not an alias
            number = _marker(self._curr, WATERMARK_MARKER)
            if number is None:
                return super()._parse_table_alias(alias_tokens)
            self._advance()
            at_tail = _marker(self._curr, WINDOWING_MARKER) is not None  # FROM t WATERMARK ... WINDOW
            alias = (None if at_tail else super()._parse_table_alias(alias_tokens)) or exp.TableAlias()
            alias.meta[MARKER_KEY] = number
            return alias

        def _parse_stream(self):
            """`STREAM(t) [AS a]` is `STREAM t [AS a]`: one tree, Stream(Table), for both."""
            stream = super()._parse_stream()
            inner = stream.this if stream is not None else None
            if stream is not None and isinstance(inner, exp.Subquery) and isinstance(inner.this, exp.Table) \
                    and not inner.this.args.get("alias"):
                table = inner.this
                for key in ("alias", "sample", "pivots"):
                    if inner.args.get(key):
                        table.set(key, inner.args[key])
                stream.set("this", table)
            return stream

        def _parse_group(self, skip_group_by_token: bool = False):
            """`GROUP BY ALL` right before our clauses: sqlglot would read the clause marker as a
            grouping expression (nothing follows ALL to stop it)."""
            at = self._index + (0 if skip_group_by_token else 1)
            ahead = self._tokens[at:at + 2]
            if (len(ahead) == 2 and ahead[0].token_type == TokenType.ALL
                    and _marker(ahead[1], WINDOWING_MARKER) is not None
                    and (skip_group_by_token or self._curr.token_type == TokenType.GROUP_BY)):
                comments = self._curr.comments if not skip_group_by_token else None
                self._advance(at - self._index + 1)
                return self.expression(exp.Group(all=True), comments=comments)
            return super()._parse_group(skip_group_by_token)

        def _parse_query_modifiers(self, this):
            this = super()._parse_query_modifiers(this)
            number = _marker(self._curr, WINDOWING_MARKER)
            if number is not None and isinstance(this, exp.Select) and MARKER_KEY not in this.meta:
                self._advance()
                this.meta[MARKER_KEY] = number
                this = super()._parse_query_modifiers(this)
            return this

    class Generator(SparkGenerator):
        AFTER_HAVING_MODIFIER_TRANSFORMS = {
            "sqlflow": lambda self, e: self.sqlflow_windowing(e),
            **SparkGenerator.AFTER_HAVING_MODIFIER_TRANSFORMS,
        }

        def sqlflow_windowing(self, expression: exp.Expr) -> str:
            windowing = expression.meta.get(WINDOWING_KEY) if expression._meta else None
            if not isinstance(windowing, ast.Windowing):
                return ""
            return "".join(self.seg(clause) for clause in printer.windowing_clauses(windowing))

        def table_sql(self, expression: exp.Table, sep: str = " AS ") -> str:
            return self._with_watermark(expression, sep, super().table_sql)

        def subquery_sql(self, expression: exp.Subquery, sep: str = " AS ") -> str:
            return self._with_watermark(expression, sep, super().subquery_sql)

        def _with_watermark(self, expression, sep, generate) -> str:
            """Spark writes the WATERMARK clause between the relation and its alias."""
            watermark = expression.meta.get(WATERMARK_KEY) if expression._meta else None
            if not isinstance(watermark, ast.SourceWatermark):
                return generate(expression, sep)
            clause = " " + printer.source_watermark(watermark)
            if expression.args.get("alias"):
                return generate(expression, clause + sep)
            marked = expression.copy()
            marked.set("alias", exp.TableAlias(this=exp.to_identifier(_ALIAS_PLACEHOLDER)))
            return generate(marked, clause + sep).replace(clause + sep + _ALIAS_PLACEHOLDER, clause, 1)


def _window_calls_are_functions(tokens) -> None:
    """`window(` is Spark's window() function, never the named-window clause `WINDOW w AS (`."""
    for token, following in zip(tokens, tokens[1:]):
        if token.token_type == TokenType.WINDOW and following.token_type == TokenType.L_PAREN:
            token.token_type = TokenType.VAR
