"""Where sqlflow's clauses are in a statement, found on tokens before any parsing.

Two kinds of spans:

- a *clause tail* (WINDOW / TRIGGER / ALLOWED LATENESS / EMIT), written where SQL's named WINDOW
  clause goes: after a SELECT's FROM ... GROUP BY ... HAVING, up to ORDER BY, SORT BY, CLUSTER BY,
  DISTRIBUTE BY, LIMIT, OFFSET, a set operator, Spark's own `WINDOW w AS (...)`, or the `)`
  that closes the query;
- a *source watermark* (`WATERMARK col DELAY OF ... | PERFECT | TIMELINE t [ARRIVAL col]`) after
  a relation in FROM, before its alias. Spark's own form (`DELAY OF INTERVAL ...`, no ARRIVAL)
  is marked `spark=True`: on its own it leaves a statement plain Spark SQL.

Finding them here, not in a parser, is what lets any statement without them pass to Spark
untouched, even one sqlglot cannot parse. The language's own words come from the grammar
(`keywords.py`); the Spark SQL words below are Spark's.

>>> from sqlflow.frontend.scan import scan
>>> q = "SELECT k, count(*) FROM t WATERMARK ts PERFECT ARRIVAL a GROUP BY k WINDOW GLOBAL LIMIT 5"
>>> [q[s.start:s.end] for s in locate(scan(q))]
['WATERMARK ts PERFECT ARRIVAL a', 'WINDOW GLOBAL']
"""
from __future__ import annotations

from dataclasses import dataclass

from .keywords import EMIT_MODES, INTERVAL_UNITS, TRIGGER_STARTS, WATERMARK_MODELS, WINDOW_FNS
from .scan import NUMBER, PUNCT, QUOTED, STRING, WORD, Token

TAIL, SOURCE = "tail", "source"

#: SQL words that can follow an identifier in Spark SQL, so `window <word> (` with one of them is
#: Spark (a table or column named window), never our WINDOW clause.
SQL_WORDS = frozenset("""
    FROM WHERE GROUP HAVING ORDER LIMIT OFFSET UNION EXCEPT INTERSECT MINUS JOIN ON USING AND OR
    NOT IN IS LIKE ILIKE RLIKE REGEXP BETWEEN THEN ELSE WHEN END AS OVER FILTER WITHIN PIVOT
    UNPIVOT TABLESAMPLE VALUES LATERAL CROSS INNER LEFT RIGHT FULL OUTER NATURAL SEMI ANTI DIV
    SELECT EXISTS CASE WINDOW QUALIFY CLUSTER DISTRIBUTE SORT TO SET INTO TABLE PARTITION BY
    ESCAPE COLLATE WITH ASC DESC NULLS OPTIONS
""".split())

#: words that end a clause tail (at its own parenthesis depth)
TAIL_END = frozenset({"ORDER", "SORT", "CLUSTER", "DISTRIBUTE", "LIMIT", "OFFSET", "UNION",
                      "INTERSECT", "EXCEPT", "MINUS"})
#: words after which the FROM clause of the current query is over
FROM_END = frozenset({"WHERE", "GROUP", "HAVING", "ORDER", "SORT", "CLUSTER", "DISTRIBUTE",
                      "LIMIT", "OFFSET", "UNION", "INTERSECT", "EXCEPT", "MINUS", "WINDOW",
                      "SELECT", "QUALIFY"})
#: words of a Spark INTERVAL literal after its numbers (`INTERVAL '1:30' HOUR TO MINUTE`)
INTERVAL_WORDS = INTERVAL_UNITS | {"TO"}


#: words that end a SELECT's clauses before ours could come: a clause tail after them is misplaced
_AFTER_OURS = {"ORDER": "ORDER BY", "SORT": "SORT BY", "CLUSTER": "CLUSTER BY",
               "DISTRIBUTE": "DISTRIBUTE BY", "LIMIT": "LIMIT", "OFFSET": "OFFSET"}


@dataclass(frozen=True)
class Span:
    """One clause of ours: `kind` is TAIL or SOURCE; `spark` marks Spark's own WATERMARK form;
    `misplaced_after` names the clause (ORDER BY, LIMIT ...) a clause tail wrongly follows."""

    kind: str
    start: int
    end: int
    spark: bool = False
    misplaced_after: str | None = None


def locate(tokens: list[Token]) -> list[Span]:
    """The spans of our clauses among a statement's tokens, in text order."""
    spans: list[Span] = []
    # one frame per parenthesis depth: [FROM seen in this query, still inside its FROM clause,
    # the ORDER BY / LIMIT ... clause that ended the query's own clauses, if any]
    frames: list[list] = [[False, False, None]]
    i, n = 0, len(tokens)
    while i < n:
        tok, frame = tokens[i], frames[-1]
        word = tok.upper if not _after_dot(tokens, i) else ""
        if tok.kind == PUNCT and tok.text == "(":
            frames.append([False, False, None])
        elif tok.kind == PUNCT and tok.text == ")":
            if len(frames) > 1:
                frames.pop()
            else:  # unbalanced: sqlglot will say so
                frame[2] = None
        elif word == "FROM":
            frame[:2] = [True, True]
        elif word in FROM_END:
            frame[1] = False
            if word == "SELECT":
                frame[0] = False
            if word in ("SELECT", "UNION", "INTERSECT", "EXCEPT", "MINUS"):
                frame[2] = None
            elif word in _AFTER_OURS and frame[2] is None and not _is(tokens, i + 1, "(") \
                    and (word in ("LIMIT", "OFFSET") or _word(tokens, i + 1) == "BY"):
                frame[2] = _AFTER_OURS[word]
        if frame[0] and word and _starts_tail(tokens, i):
            end = _tail_end(tokens, i)
            spans.append(Span(TAIL, tok.start, tokens[end - 1].end, misplaced_after=frame[2]))
            frame[1] = False
            i = end
            continue
        if frame[1] and word == "WATERMARK" and _starts_source(tokens, i):
            end, spark = _source_end(tokens, i)
            spans.append(Span(SOURCE, tok.start, tokens[end - 1].end, spark))
            i = end
            continue
        i += 1
    return spans


def orders_by_watermark(tokens: list[Token], spans: list[Span]) -> bool:
    """Whether an `ORDER BY` after one of Spark's own WATERMARK clauses starts with its column:
    an ordering by event time (docs/semantics.md, 11), which sqlflow runs on a stream, where
    Spark would refuse to sort one; the statement is then not plain Spark SQL.

    >>> from sqlflow.frontend.scan import scan
    >>> def orders(q):
    ...     tokens = scan(q)
    ...     return orders_by_watermark(tokens, locate(tokens))
    >>> orders("SELECT * FROM t WATERMARK ts DELAY OF INTERVAL 1 MINUTE ORDER BY t.ts, id")
    True
    >>> orders("SELECT * FROM t WATERMARK ts DELAY OF INTERVAL 1 MINUTE ORDER BY id, ts")
    False
    """
    starts = {tok.start: k for k, tok in enumerate(tokens)}
    for span in spans:
        if span.kind != SOURCE or not span.spark or span.start not in starts:
            continue
        k = starts[span.start] + 1  # the event-time column: its last name before DELAY
        name = ""
        while k < len(tokens) and _word(tokens, k) != "DELAY":
            if tokens[k].kind in (WORD, QUOTED):
                name = tokens[k].text.strip("`").lower()
            k += 1
        for j in range(k, len(tokens) - 2):
            if _word(tokens, j) == "ORDER" and _word(tokens, j + 1) == "BY":
                key = j + 2
                while _is(tokens, key + 1, "."):  # a qualified column: its last part
                    key += 2
                if key < len(tokens) and tokens[key].kind in (WORD, QUOTED) \
                        and tokens[key].text.strip("`").lower() == name:
                    return True
    return False


def _after_dot(tokens: list[Token], i: int) -> bool:
    return i > 0 and tokens[i - 1].kind == PUNCT and tokens[i - 1].text == "."


def _word(tokens: list[Token], i: int) -> str:
    return tokens[i].upper if 0 <= i < len(tokens) else ""


def _is(tokens: list[Token], i: int, punct: str) -> bool:
    return 0 <= i < len(tokens) and tokens[i].kind == PUNCT and tokens[i].text == punct


def _ends_operand(tokens: list[Token], i: int) -> bool:
    """Whether token i can end a relation or an expression (what our clauses follow)."""
    if i < 0:
        return False
    tok = tokens[i]
    if tok.kind in (QUOTED, STRING, NUMBER):
        return True
    if tok.kind == PUNCT:  # `}` closes a `${var}` substitution, which sqlglot prints for `@var`
        return tok.text in (")", "*", "}")
    return tok.upper not in SQL_WORDS or tok.upper in ("END", "ASC", "DESC")


def _starts_tail(tokens: list[Token], i: int) -> bool:
    word = tokens[i].upper
    nxt = _word(tokens, i + 1)
    if word == "WINDOW" and _word(tokens, i - 1) == "WINDOW" and tokens[i - 1].kind == WORD and nxt in WINDOW_FNS:
        return True  # after a column named window (unquoted: the parse says so, `unquoted_window`)
    if not _ends_operand(tokens, i - 1):
        return False
    if word == "WINDOW":
        if not nxt or _word(tokens, i + 2) == "AS":
            return False
        return nxt in WINDOW_FNS or (_is(tokens, i + 2, "(") and nxt not in SQL_WORDS)
    if word == "TRIGGER":
        return nxt in TRIGGER_STARTS
    if word == "EMIT":
        return nxt in EMIT_MODES
    if word == "ALLOWED":
        return nxt == "LATENESS"
    if word == "OUTPUT":
        return nxt == "TIMESTAMP"
    return False


def _tail_end(tokens: list[Token], i: int) -> int:
    """Index just past the clause tail starting at token i."""
    depth, j, n = 0, i + 1, len(tokens)
    while j < n:
        tok = tokens[j]
        if tok.kind == PUNCT and tok.text == "(":
            depth += 1
        elif tok.kind == PUNCT and tok.text == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and tok.kind == WORD and not _after_dot(tokens, j):
            if tok.upper in TAIL_END and not _is(tokens, j + 1, "(") \
                    and not (tok.upper == "OFFSET" and _period_offset(tokens, j)):
                break
            if tok.upper == "WINDOW" and _word(tokens, j - 1) != "OF" \
                    and _word(tokens, j + 2) == "AS":  # Spark's named window, not END OF WINDOW
                break
        j += 1
    return j


def _period_offset(tokens: list[Token], j: int) -> bool:
    """OFFSET at token j is our `PERIOD d OFFSET o`: it follows a PERIOD's duration (so `OFFSET 10`
    there is a duration without its unit, reported as such, never Spark's row offset silently), or
    a duration follows (`30s`, `INTERVAL ...`), where Spark's OFFSET takes a row count.

    >>> from sqlflow.frontend.scan import scan
    >>> [_period_offset(scan(q), 2) for q in ("PERIOD 1m OFFSET 30s", "LIMIT 5 OFFSET 10", "PERIOD 1m OFFSET -5s")]
    [True, False, True]
    >>> _period_offset(scan("PERIOD 1m OFFSET 10"), 2), _period_offset(scan("PERIOD INTERVAL 1 MINUTE OFFSET 10"), 4)
    (True, True)
    """
    k = j - 1
    while k >= 0 and (tokens[k].kind in (NUMBER, STRING) or _word(tokens, k) in INTERVAL_UNITS | {"INTERVAL", "TO"}):
        k -= 1
    if k < j - 1 and _word(tokens, k) == "PERIOD":
        return True
    if _is(tokens, j + 1, "-"):  # a negative duration: ours, so validation reports it
        j += 1
    nxt = tokens[j + 1] if j + 1 < len(tokens) else None
    if nxt is None:
        return False
    if nxt.kind == WORD:
        return nxt.upper == "INTERVAL"
    return nxt.kind == NUMBER and not nxt.text.replace(".", "").isdigit()


def _starts_source(tokens: list[Token], i: int) -> bool:
    """`WATERMARK <column>` right after a relation (not a table alias named watermark)."""
    if not _ends_operand(tokens, i - 1) or _word(tokens, i - 1) == "AS":
        return False
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is None or nxt.kind not in (WORD, QUOTED):
        return False
    return nxt.kind == QUOTED or nxt.upper not in SQL_WORDS


def _source_end(tokens: list[Token], i: int) -> tuple[int, bool]:
    """Index just past the WATERMARK clause starting at token i, and whether it is Spark's own."""
    n, j = len(tokens), i + 1
    depth = 0
    while j < n:  # the event-time column (Spark allows an expression here)
        tok = tokens[j]
        if tok.kind == PUNCT and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
            if depth < 0:
                return j, False
        elif depth == 0 and (tok.upper in WATERMARK_MODELS or tok.upper in FROM_END
                             or tok.upper in SQL_WORDS - {"AS"} or _is(tokens, j, ",")):
            break
        j += 1
    model = _word(tokens, j)
    spark = False
    if model == "DELAY":
        j += 1
        if _word(tokens, j) == "OF":
            j += 1
        j, spark = _duration_end(tokens, j)
    elif model == "PERFECT":
        j += 1
    elif model == "TIMELINE":
        j = _dotted_name_end(tokens, j + 1)
    elif model == "ASCENDING":  # ASCENDING PER <column> [IDLE TIMEOUT <duration>]
        j += 1
        if _word(tokens, j) == "PER":
            j = _dotted_name_end(tokens, j + 1)
        if _word(tokens, j) == "IDLE":
            j += 1
            if _word(tokens, j) == "TIMEOUT":
                j += 1
            j, _ = _duration_end(tokens, j)
    if _word(tokens, j) == "ARRIVAL":
        spark = False
        j = _dotted_name_end(tokens, j + 1)
    return max(j, i + 1), spark


def _duration_end(tokens: list[Token], j: int) -> tuple[int, bool]:
    """Index just past a duration starting at token j, and whether it is a Spark INTERVAL."""
    n = len(tokens)
    if _word(tokens, j) == "INTERVAL":
        j += 1
        while j < n and (tokens[j].kind in (NUMBER, STRING) or _word(tokens, j) in INTERVAL_WORDS
                         or _is(tokens, j, "-") or _is(tokens, j, "+")):
            j += 1
        return j, True
    if _is(tokens, j, "-") or _is(tokens, j, "+"):
        j += 1
    if j < n and tokens[j].kind in (NUMBER, STRING):
        j += 1
    return j, False


def _dotted_name_end(tokens: list[Token], j: int) -> int:
    n = len(tokens)
    if j < n and tokens[j].kind in (WORD, QUOTED):
        j += 1
        while _is(tokens, j, ".") and j + 1 < n and tokens[j + 1].kind in (WORD, QUOTED):
            j += 2
    return j
