"""A parsed statement: Spark SQL as a sqlglot tree, with sqlflow's clauses hung on its nodes.

Parsing goes: find our clauses on tokens (locate.py); if there are none, the statement is plain
Spark SQL and its text is kept as is. Otherwise parse each clause with lark (clauses.py), replace
it by a marker, parse the rest with sqlglot (dialect.py), and move each clause's AST to the node
where its marker landed: `select.meta["sqlflow"]` (ast.Windowing) and
`relation.meta["sqlflow_watermark"]` (ast.SourceWatermark).

>>> s = parse_statement("SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF INTERVAL 1 MINUTE "
...                     "GROUP BY k WINDOW FIXED(SIZE 5m) EMIT DISCARDING")
>>> s.is_plain, [type(w.window.fn).__name__ for _, w in s.windowed_selects()]
(False, ['Fixed'])
>>> [(node.name, w.event_time) for node, w in s.source_watermarks()]
[('t', 'ts')]
>>> parse_statement("SELECT * FROM t WATERMARK ts DELAY OF INTERVAL 1 MINUTE").is_plain
True
"""
from __future__ import annotations

import bisect
import re

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError

from .. import ast
from ..errors import SqlflowSyntaxError
from . import clauses
from .dialect import (MARKER_KEY, WATERMARK_KEY, WATERMARK_MARKER, WINDOWING_KEY,
                      WINDOWING_MARKER, SqlflowSpark)
from .keywords import CLAUSES, WINDOW_FNS
from .locate import SOURCE, TAIL, Span, locate, orders_by_watermark
from .scan import PUNCT, WORD, scan, unterminated
from .source import Source
from .sqlexpr import sqlglot_words

DIALECT = SqlflowSpark()


class Statement:
    """One SQL statement.

    - `sql`: its original text;
    - `tree`: its sqlglot tree (SqlflowSpark dialect) without our clauses, which hang on the
      tree's nodes' `meta`; for a plain statement it is built on first use, and is None when
      sqlglot cannot read the statement (Spark still can);
    - `is_plain`: no sqlflow clause at all (Spark's own `WATERMARK c DELAY OF INTERVAL ...` is
      Spark's, unless an ORDER BY starts with its column `c`: an ordering by event time,
      `locate.orders_by_watermark`): hand `sql` to Spark unchanged.

    Equality compares the trees and every clause's AST, not the text, positions or `is_plain`:
    `FROM t WATERMARK ts DELAY OF 1m` needs sqlflow (Spark cannot read `1m`), and prints as Spark's
    own `DELAY OF INTERVAL 1 MINUTE`, a plain statement that means the same.
    """

    __hash__ = None  # type: ignore[assignment]  # the tree is mutable

    def __init__(self, sql: str, *, source: Source, start: int, end: int,
                 tree: exp.Expr | None = None, plain: bool, offsets: "Offsets | None" = None) -> None:
        self.sql = sql
        self.is_plain = plain
        self.source = source
        self.start, self.end = start, end
        self._tree = tree
        self._tree_built = tree is not None
        self.offsets = offsets

    @property
    def tree(self) -> exp.Expr | None:
        if not self._tree_built:
            self._tree_built = True
            try:
                self._tree, self.offsets = _build_tree(self.source, self.start, self.end,
                                                       locate(scan(self.source.text, self.start, self.end)))
            except Exception:  # noqa: BLE001  (plain SQL: Spark, not sqlglot, is the judge)
                self._tree = None
        return self._tree

    def windowed_selects(self) -> list[tuple[exp.Select, ast.Windowing]]:
        """Each SELECT with our clause tail, in text order, with its clauses."""
        return _with_meta(self.tree, WINDOWING_KEY, ast.Windowing)

    def source_watermarks(self) -> list[tuple[exp.Expr, ast.SourceWatermark]]:
        """Each relation (table, subquery, stream) with a WATERMARK clause, in text order."""
        return _with_meta(self.tree, WATERMARK_KEY, ast.SourceWatermark)

    def position(self, node: exp.Expr) -> ast.Position | None:
        """Where a node of `tree` starts in the query text (from its identifiers), if known."""
        starts = [n.meta["start"] for n in node.walk() if n._meta and "start" in n.meta]
        if not starts or self.offsets is None:
            return None
        return self.source.position(self.offsets.original(min(starts)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Statement):
            return NotImplemented
        if self.tree is None or other.tree is None:
            return self.tree is None and other.tree is None and _norm(self.sql) == _norm(other.sql)
        return (self.tree == other.tree
                and [w for _, w in self.windowed_selects()] == [w for _, w in other.windowed_selects()]
                and [w for _, w in self.source_watermarks()] == [w for _, w in other.source_watermarks()])

    def __repr__(self) -> str:
        kind = "plain" if self.is_plain else "sqlflow"
        return f"Statement({kind}, {self.sql!r})"


def _norm(sql: str) -> str:
    return sql.strip().rstrip(";").strip()


def watermarks_feeding(select: exp.Select) -> list[tuple[exp.Expr, ast.SourceWatermark, bool]]:
    """(relation, its WATERMARK clause, whether it sits directly in this SELECT's FROM or JOINs)
    for every watermarked relation feeding `select`, through subqueries and CTEs."""
    return _feeding(select, WATERMARK_KEY, ast.SourceWatermark)


def windowed_feeding(select: exp.Select) -> list[tuple[exp.Select, ast.Windowing]]:
    """Every windowed SELECT whose panes feed `select` (its upstream stages), through subqueries
    and CTEs.

    >>> s = parse_statement("WITH a AS (SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m "
    ...                     "GROUP BY k WINDOW FIXED(SIZE 1m)) SELECT sum(n) FROM a WINDOW GLOBAL ON window_end")
    >>> [type(w.window.fn).__name__ for _, w in windowed_feeding(s.windowed_selects()[1][0])]
    ['Fixed']
    """
    return [(node, w) for node, w, _ in _feeding(select, WINDOWING_KEY, ast.Windowing) if node is not select]


def _feeding(select: exp.Select, key: str, kind) -> list:
    """(node, its clause of type `kind` under `key`, whether it sits directly in this SELECT's
    FROM or JOINs) for every such node in what `select` reads."""
    ctes: dict = {}
    for cte in select.root().find_all(exp.CTE):
        ctes.setdefault(cte.alias_or_name.lower(), cte)
    found: list = []
    seen: set[int] = set()

    def visit(node: exp.Expr, direct: bool) -> None:
        # depth first into each CTE where it is referenced, without recursion (CTEs may chain)
        walks = [(node.walk(), direct)]
        while walks:
            walk, direct = walks[-1]
            child = next(walk, None)
            if child is None:
                walks.pop()
                continue
            if id(child) in seen:
                continue
            seen.add(id(child))
            watermark = child.meta.get(key) if child._meta else None
            if isinstance(watermark, kind):
                parent = child.parent
                here = isinstance(parent, (exp.From, exp.Join)) and parent.parent is select
                found.append((child, watermark, direct and here))
            if isinstance(child, exp.Table) and not child.db and child.name.lower() in ctes:
                cte = ctes[child.name.lower()]
                if id(cte) not in seen:
                    seen.add(id(cte))
                    walks.append((cte.this.walk(), False))

    for arg in ("from_", "joins"):
        value = select.args.get(arg)
        for node in value if isinstance(value, list) else [value]:
            if node is not None:
                visit(node, True)
    return found


def _with_meta(tree, key, kind) -> list:
    """(node, clause) pairs in the order the clauses are written."""
    if tree is None:
        return []
    found = [(node, node.meta[key]) for node in tree.walk(bfs=False)
             if node._meta and isinstance(node.meta.get(key), kind)]
    return sorted(found, key=lambda pair: (pair[1].pos is None,
                                           (pair[1].pos.line, pair[1].pos.column) if pair[1].pos else 0))


# --------------------------------------------------------------------------- building


def parse_statement(text: str, source: Source | None = None, start: int = 0,
                    end: int | None = None) -> Statement:
    """The statement source.text[start:end] (the whole of `text` by default), not validated."""
    source = source or Source(text)
    end = len(source.text) if end is None else end
    tokens = scan(source.text, start, end)
    spans = locate(tokens)
    if all(span.kind == SOURCE and span.spark for span in spans) and not orders_by_watermark(tokens, spans):
        return Statement(text, source=source, start=start, end=end, plain=True)
    _check_terminated(source, start, end)
    for span in spans:
        if span.misplaced_after:
            name = _tail_name(source, span)
            raise source.error(SqlflowSyntaxError, f"{name} must come before {span.misplaced_after}",
                               span.start, clause=name, hint=CLAUSE_ORDER)
    tree, offsets = _build_tree(source, start, end, spans)
    return Statement(text, source=source, start=start, end=end, tree=tree, plain=False,
                     offsets=offsets)


UNTERMINATED_COMMENT_HINT = "close it with */ (comments nest, as in Spark: each /* needs its */)"


def _check_terminated(source: Source, start: int, end: int) -> None:
    """A string, quoted name or comment left open runs to the end of the text: say where it starts."""
    tok = unterminated(source.text, start, end)
    if tok is not None:
        what = {"string": "string", "quoted": "quoted name"}.get(tok.kind, "comment")
        hint = UNTERMINATED_COMMENT_HINT if what == "comment" else None
        raise source.error(SqlflowSyntaxError, f"unterminated {what}", tok.start, clause="SQL",
                           hint=hint)


def _build_tree(source: Source, start: int, end: int, spans: list[Span]):
    """Parse our clauses with lark, the rest with sqlglot, and hang the clauses on the tree."""
    windowings = [clauses.parse_windowing(source, s.start, s.end) for s in spans if s.kind == TAIL]
    watermarks = [clauses.parse_source_watermark(source, s.start, s.end)
                  for s in spans if s.kind == SOURCE]
    offsets = Offsets(source.text, start, end, spans)
    try:
        trees = [t for t in DIALECT.parse(offsets.text) if t is not None]
    except ParseError as error:
        raise _sql_error(source, offsets, spans, error) from None
    except RecursionError:
        raise source.error(SqlflowSyntaxError, "the SQL is nested too deeply to read",
                           _deepest_parenthesis(source, start, end), clause="SQL") from None
    except TokenError as error:
        raise source.error(SqlflowSyntaxError, "cannot read this token", _token_at(source, offsets, error),
                           clause="SQL") from None
    except SqlglotError as error:
        raise source.error(SqlflowSyntaxError, f"cannot read this SQL: {_unmarked(str(error).splitlines()[0])}",
                           start, clause="SQL") from None
    if len(trees) != 1:
        raise source.error(SqlflowSyntaxError, "expected one SQL statement", start, clause="SQL")
    tree = trees[0]
    _check_depth(source, offsets, tree)
    found: dict[str, set[int]] = {TAIL: set(), SOURCE: set()}
    for node in list(tree.walk()):
        number = node.meta.pop(MARKER_KEY, None) if node._meta else None
        if number is None:
            continue
        if isinstance(node, exp.Select):
            node.meta[WINDOWING_KEY] = windowings[number]
            found[TAIL].add(number)
            drop_empty_grouping_sets(node)
        elif isinstance(node, exp.TableAlias) and node.parent is not None:
            node.parent.meta[WATERMARK_KEY] = watermarks[number]
            found[SOURCE].add(number)
            if not node.this and not node.args.get("columns"):
                node.pop()
    for kind, count in ((TAIL, len(windowings)), (SOURCE, len(watermarks))):
        missing = set(range(count)) - found[kind]
        if missing:
            span = [s for s in spans if s.kind == kind][min(missing)]
            raise _misplaced(source, span)
    return tree, offsets


def drop_empty_grouping_sets(select: exp.Select) -> None:
    """`GROUP BY ()` is the empty grouping set, one group: a windowed SELECT without GROUP BY (its
    aggregates per window over all rows). Within a list (`GROUP BY (), k`) it adds nothing. Spark
    cannot read `()` in GROUP BY, so every path gets the SELECT without it.

    >>> s = parse_statement("SELECT count(*) AS n FROM t GROUP BY () WINDOW GLOBAL ON ts")
    >>> (select, _), = s.windowed_selects()
    >>> select.args.get("group") is None
    True
    >>> s = parse_statement("SELECT k, count(*) AS n FROM t GROUP BY (), k, (()) WINDOW GLOBAL ON ts")
    >>> s.windowed_selects()[0][0].args["group"].sql()
    'GROUP BY k'
    """
    group = select.args.get("group")
    if group is None or group.args.get("all"):
        return
    keys = [key for key in group.expressions if not _empty_set(key)]
    if len(keys) == len(group.expressions):
        return
    if keys or any(group.args.get(arg) for arg in ("grouping_sets", "cube", "rollup", "totals")):
        group.set("expressions", keys)
    else:
        select.set("group", None)


def _empty_set(node: exp.Expr) -> bool:
    """`()`, `(())`, ...: a tuple of nothing but empty tuples."""
    if isinstance(node, exp.Paren):
        return _empty_set(node.this)
    return isinstance(node, exp.Tuple) and all(_empty_set(e) for e in node.expressions)


#: where our clauses go in a SELECT (grammar/README.md, "Where the clauses go")
CLAUSE_ORDER = ("WINDOW, TRIGGER, ALLOWED LATENESS, EMIT and OUTPUT TIMESTAMP go, in this order, after "
                "GROUP BY and HAVING and before ORDER BY and LIMIT")


def _tail_name(source: Source, span: Span) -> str:
    word = source.text[span.start:span.end].split(None, 1)[0].upper()
    return CLAUSES.get(word, word)


def _token_at(source: Source, offsets: "Offsets", error: TokenError) -> int:
    """The start of the token sqlglot's tokenizer failed in: where a fresh tokenizer stops (a
    private attribute of the pinned sqlglot), else the middle of the 100 characters it quotes."""
    tokenizer = DIALECT.tokenizer_class()
    try:
        tokenizer.tokenize(offsets.text)
    except TokenError:
        pass
    current = getattr(getattr(tokenizer, "_core", None), "_current", None)
    if not isinstance(current, int):
        current = error.start + 50 if error.start else 0
    at = offsets.original(max(current - 1, 0))
    before = [t for t in scan(source.text, offsets.start, at + 1) if t.start <= at]
    if len(before) > 1 and before[-2].end == before[-1].start and before[-2].kind == WORD:
        return before[-2].start  # a prefixed literal: X'..', B'..'
    return before[-1].start if before else offsets.start


def _unmarked(text: str) -> str:
    """sqlglot's message without the markers standing for our clauses."""
    return re.sub(rf"\s*({WINDOWING_MARKER}|{WATERMARK_MARKER})\d+\s*", " ... ", text)


def _deepest_parenthesis(source: Source, start: int, end: int) -> int:
    """Where the nesting is deepest, if parentheses tell (else the statement's start)."""
    depth, deepest, at = 0, 0, start
    for tok in scan(source.text, start, end):
        if tok.kind == PUNCT and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
            if depth > deepest:
                deepest, at = depth, tok.start
    return at if deepest >= 8 else start


#: deepest nesting of the SQL around our clauses: sqlglot prints (and the Spark layer rewrites) a
#: tree recursively, a few frames per level, so deeper trees would exhaust Python's stack later
MAX_SQL_DEPTH = 128


def _check_depth(source: Source, offsets: "Offsets", tree: exp.Expr) -> None:
    """A located error for a tree too deep to print. Chains sqlglot prints without recursion
    (`a + b + ...`, `x AND y AND ...`, `q1 UNION q2 UNION ...`) count as one level."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SQL_DEPTH:
            starts = [n.meta["start"] for n in node.walk() if n._meta and "start" in n.meta]
            offset = offsets.original(min(starts)) if starts else offsets.start
            raise source.error(SqlflowSyntaxError, f"the SQL is nested more than {MAX_SQL_DEPTH} levels deep",
                               offset, clause="SQL")
        for child in reversed(list(node.iter_expressions())):  # the first too deep in text order
            flat = type(child) is type(node) and (
                isinstance(node, exp.Binary) and not isinstance(node, exp.Dot)
                or isinstance(node, exp.SetOperation) and child is node.this)
            stack.append((child, depth if flat else depth + 1))


def _misplaced(source: Source, span: Span) -> SqlflowSyntaxError:
    window = unquoted_window(source, 0, span.start) if span.kind == TAIL else None
    if window is not None:
        return _window_column(source, window)
    if span.kind == TAIL:
        name = _tail_name(source, span)
        return source.error(SqlflowSyntaxError,
                            f"{name} can only end a SELECT (after FROM, WHERE, GROUP BY and HAVING)",
                            span.start, clause=name)
    return source.error(SqlflowSyntaxError,
                        "a WATERMARK clause goes right after a table or subquery in FROM",
                        span.start, clause="WATERMARK",
                        hint="as in Spark, the alias comes after it: FROM t WATERMARK ... AS a")


def _sql_error(source: Source, offsets: "Offsets", spans: list[Span], error: ParseError):
    token = getattr(error, "sqlflow_token", None)
    window = unquoted_window(source, offsets.start, offsets.original(token.start) if token is not None else None)
    if window is not None:
        return _window_column(source, window)
    if token is not None and token.text.startswith((WINDOWING_MARKER, WATERMARK_MARKER)):
        number = int(token.text.rsplit("_", 1)[1])
        kind = TAIL if token.text.startswith(WINDOWING_MARKER) else SOURCE
        return _misplaced(source, [s for s in spans if s.kind == kind][number])
    offset = offsets.original(token.start) if token is not None else offsets.start
    arrival = _stray_arrival(source, offsets.start, offset)
    if arrival is not None:
        return source.error(SqlflowSyntaxError, "ARRIVAL needs a WATERMARK clause before it", arrival,
                            clause="WATERMARK", hint=ARRIVAL_HINT)
    detail = error.errors[0]["description"] if error.errors else str(error)
    return source.error(SqlflowSyntaxError, sqlglot_words(detail, token.text if token else ""),
                        offset, clause="SQL")


def _window_column(source: Source, offset: int) -> SqlflowSyntaxError:
    return source.error(SqlflowSyntaxError, "a column named window must be quoted here: an unquoted WINDOW "
                        "starts a WINDOW clause", offset, clause="SQL", hint="write `window` (in backquotes)")


def unquoted_window(source: Source, start: int, offset: int | None) -> int | None:
    """Where an unquoted column named window is, when sqlglot fails at it or just after it (it
    reads WINDOW as the start of a named window clause): the offset of that word, else None.

    >>> q = "SELECT k, COUNT(*) AS n FROM t GROUP BY window, k WINDOW GLOBAL ON ts"
    >>> unquoted_window(Source(q), 0, q.index(", k"))
    40
    """
    if offset is None:
        return None
    tokens = [t for t in scan(source.code, start, offset + 1) if t.start <= offset]
    for tok in tokens[-2:]:
        if tok.kind == WORD and tok.upper == "WINDOW" and not _is_tail_word(source, tok.end):
            return tok.start
    return None


#: where ARRIVAL goes (grammar/sqlflow.lark, source_watermark)
ARRIVAL_HINT = ("ARRIVAL ends a WATERMARK clause: FROM t WATERMARK <event time column> "
                "(DELAY OF <duration> | PERFECT | TIMELINE <table>) ARRIVAL <arrival time column>")


def _stray_arrival(source: Source, start: int, offset: int) -> int | None:
    """The offset of an ARRIVAL outside a WATERMARK clause that Spark's parser stumbled on (at it,
    or at the column after it, ARRIVAL then read as an alias), or None.

    >>> text = "SELECT * FROM t ARRIVAL at"
    >>> _stray_arrival(Source(text), 0, text.index("at", 20)), _stray_arrival(Source(text), 0, 7)
    (16, None)
    """
    near = [t for t in scan(source.text, start, min(len(source.text), offset + 64)) if t.start <= offset][-2:]
    for tok in reversed(near):
        if tok.kind == WORD and tok.upper == "ARRIVAL":
            return tok.start
    return None


def _is_tail_word(source: Source, end: int) -> bool:
    """Whether the WINDOW word ending at `end` starts a clause tail (a window function follows)."""
    following = scan(source.code, end, min(len(source.code), end + 40))
    return bool(following) and following[0].upper in WINDOW_FNS


class Offsets:
    """The statement text given to sqlglot (our clauses replaced by markers), and the way back
    from its offsets to offsets in the query text."""

    def __init__(self, text: str, start: int, end: int, spans: list[Span]) -> None:
        self.start = start
        parts: list[str] = []
        self._new: list[int] = []      # start of each piece in the new text
        self._old: list[int] = []      # its start in the original text
        self._kept: list[bool] = []    # copied (True) or a marker (False)
        pos, new, numbers = start, 0, {TAIL: 0, SOURCE: 0}
        for span in spans:
            self._piece(parts, text[pos:span.start], new, pos, True)
            new += span.start - pos
            prefix = WINDOWING_MARKER if span.kind == TAIL else WATERMARK_MARKER
            marker = f" {prefix}{numbers[span.kind]} "
            numbers[span.kind] += 1
            self._piece(parts, marker, new, span.start, False)
            new += len(marker)
            pos = span.end
        self._piece(parts, text[pos:end], new, pos, True)
        self.text = "".join(parts)

    def _piece(self, parts, piece, new, old, kept) -> None:
        parts.append(piece)
        self._new.append(new)
        self._old.append(old)
        self._kept.append(kept)

    def original(self, offset: int) -> int:
        """The original offset of an offset in `text`."""
        i = max(bisect.bisect_right(self._new, offset) - 1, 0)
        return self._old[i] + (offset - self._new[i] if self._kept[i] else 0)
