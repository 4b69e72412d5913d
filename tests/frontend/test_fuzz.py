"""A bounded, deterministic fuzz of the front end: random mutations of every query in
tests/frontend/test_parse.py and grammar/README.md go through `sqlflow.parse` and
`sqlflow.transpile` (no Spark session needed).

Whatever the text, the answer is a Statement or a SqlflowError naming a line and column in it
(never a RecursionError, a sqlglot or lark exception, or an internal marker in the message); a
statement that parses prints back to itself. The gaps the fuzz found in transpile's Spark layer
are fixed, each kept as a test at the end of this file.
"""
from __future__ import annotations

import ast as python_ast
import random
import re

import pytest

import sqlflow
from sqlflow.errors import SqlflowError
from sqlflow.frontend import parse, to_sql
from sqlflow.frontend.scan import scan

SEED = 20240611
CASES = 2000           # parsed, about 4 s
TRANSPILED = 500       # of which also transpiled, about 2 s
TAIL_PREFIX = "SELECT k, count(*) AS n FROM t GROUP BY k "
SOURCE_SHAPE = "SELECT k, COUNT(*) AS n FROM {} GROUP BY k WINDOW FIXED(SIZE 5m)"



def _seeds(repo_root) -> list[str]:
    """Every SQL text of the parse tests (clause tails and relations completed into queries) and
    every example of the language reference."""
    tree = python_ast.parse((repo_root / "tests" / "frontend" / "test_parse.py").read_text())
    seeds = set()
    for node in python_ast.walk(tree):
        if isinstance(node, python_ast.Constant) and isinstance(node.value, str):
            text = node.value
            if re.match(r"(?i)\s*(SELECT|WITH|INSERT|CREATE)\b", text):
                seeds.add(text)
            elif re.match(r"(?i)(WINDOW|TRIGGER|EMIT|ALLOWED)\b", text):
                seeds.add(TAIL_PREFIX + text)
            elif " WATERMARK " in text:
                seeds.add(SOURCE_SHAPE.format(text))
    readme = (repo_root / "grammar" / "README.md").read_text()
    seeds.update(re.findall(r"```sql\n(.*?)```", readme, re.S))
    return sorted(seeds)


JUNK = ["(", ")", "'", ",", ";", '"', "`", "-", "*", "/", "\n", "@", "x", "9", "é", "--", "/*", "*/",
        "WINDOW", "EMIT", "TRIGGER", "LATE", "EARLY", "WATERMARK", "REPEAT(", "INTERVAL", "ON",
        "DELAY OF", "ARRIVAL", "PERFECT", "ORDER BY", "LIMIT 1", "UNION SELECT", "1e999",
        "99999999999999999999", "-1", "ALLOWED LATENESS", "SESSIONS(GAP", "CASE", "END", "BEGIN",
        "\\", "{", "}", "[", ":", "?", "\t", "\r", "\u2028", "STREAM", "TIMELINE", "AS", "GROUP BY"]


def mutate(rng: random.Random, sql: str) -> str:
    """One to three token edits: delete, duplicate, swap, insert junk, truncate, replace, repeat a
    token many times, replace a number by an extreme one, copy a run of tokens elsewhere."""
    for _ in range(rng.choice([1, 1, 2, 3])):
        tokens = scan(sql)
        if not tokens:
            return sql + rng.choice(JUNK)
        i = rng.randrange(len(tokens))
        tok = tokens[i]
        kind = rng.choice(["delete", "duplicate", "swap", "insert", "truncate", "replace", "repeat",
                           "number", "copy"])
        if kind == "delete":
            sql = sql[:tok.start] + sql[tok.end:]
        elif kind == "duplicate":
            sql = sql[:tok.end] + " " + tok.text + sql[tok.end:]
        elif kind == "swap" and i + 1 < len(tokens):
            nxt = tokens[i + 1]
            sql = sql[:tok.start] + nxt.text + sql[tok.end:nxt.start] + tok.text + sql[nxt.end:]
        elif kind == "insert":
            at = rng.randrange(len(sql) + 1)
            sql = sql[:at] + " " + rng.choice(JUNK) + " " + sql[at:]
        elif kind == "truncate":
            sql = sql[:rng.randrange(len(sql) + 1)]
        elif kind == "replace":
            sql = sql[:tok.start] + rng.choice(JUNK) + sql[tok.end:]
        elif kind == "repeat":
            sql = sql[:tok.start] + (tok.text + " ") * rng.choice([70, 300]) + sql[tok.end:]
        elif kind == "number":
            numbers = [t for t in tokens if t.kind == "number"] or [tok]
            num = rng.choice(numbers)
            sql = sql[:num.start] + rng.choice(["9" * 20, "9" * 400, "1e308", "1e-400", "00", ".5"]) + sql[num.end:]
        else:
            j = rng.randrange(len(tokens))
            a, b = sorted((i, j))
            at = rng.randrange(len(sql) + 1)
            sql = sql[:at] + " " + sql[tokens[a].start:tokens[b].end] + " " + sql[at:]
    return sql


def problem(sql: str, call) -> str | None:
    """What is wrong with how `call` answered `sql`, if anything."""
    try:
        result = call(sql)
    except SqlflowError as error:
        text = str(error)
        if "__sqlflow" in text:
            return f"an internal marker in the message: {text}"
        if error.line is None or error.column is None or error.sql is None:
            return f"no line and column: {text}"
        lines = error.sql.split("\n")
        if not (1 <= error.line <= len(lines) and 1 <= error.column <= len(lines[error.line - 1]) + 1):
            return f"line {error.line}, column {error.column} is not in the text: {text}"
        return None
    except Exception as error:  # noqa: BLE001  (what the test is looking for)
        return f"{type(error).__name__}: {str(error)[:300]}"
    if call is parse and not result.is_plain:
        # text, not trees: sqlglot's trees of `'a' 'b'` and of its print CONCAT('a', 'b') differ
        # in a flag (safe=True), though both print the same
        printed = to_sql(result)
        try:
            again = parse(printed)
        except SqlflowError as error:
            return f"its printed text does not parse: {error}"
        if to_sql(again) != printed:
            return f"does not print back to itself: {printed}"
        if again.tree is not None and clauses(again) != clauses(result):  # None: Spark judges it
            return f"its printed text has other clauses: {printed}"
    return None


def clauses(statement) -> list:
    return [w for _, w in statement.windowed_selects()] + [w for _, w in statement.source_watermarks()]


def test_mutated_queries_parse_or_raise_a_located_sqlflow_error(repo_root):
    seeds = _seeds(repo_root)
    assert len(seeds) > 100
    rng = random.Random(SEED)
    found = []
    for n in range(CASES):
        sql = mutate(rng, rng.choice(seeds))
        calls = (parse, sqlflow.transpile) if n < TRANSPILED else (parse,)
        for call in calls:
            what = problem(sql, call)
            if what is not None:
                found.append(f"{call.__name__}({sql!r}): {what}")
    assert found == []


G = TAIL_PREFIX
DEEP_AND_BIG = [
    G + "WINDOW FIXED(SIZE 1m) ON ts TRIGGER " + "WATERMARK LATE " * 300 + "WATERMARK",
    G + "WINDOW FIXED(SIZE 1m) ON ts TRIGGER " + "REPEAT(WATERMARK EARLY COUNT 1 LATE " * 40 + "COUNT 1" + ")" * 40,
    G + "WINDOW GLOBAL ON ts TRIGGER " + "REPEAT(" * 300 + "COUNT 1" + ")" * 300,
    G + "WINDOW GLOBAL ON ts TRIGGER WHEN(" + "NOT " * 2000 + "x)",
    G + "WINDOW GLOBAL ON ts TRIGGER WHEN(" + "CASE WHEN x THEN " * 300 + "TRUE" + " END" * 300 + ")",
    G + "WINDOW SESSIONS(GAP " + "-" * 2000 + "x) ON ts",
    G + "WINDOW GLOBAL ON " + ".".join(["a"] * 3000),
    "SELECT k, count(*) FROM t WHERE " + "(" * 500 + "x" + ")" * 500 + " GROUP BY k WINDOW GLOBAL ON ts",
    "SELECT k, count(*) FROM t WHERE " + "NOT " * 2000 + "x GROUP BY k WINDOW GLOBAL ON ts",
    "SELECT * FROM " + "(SELECT * FROM " * 100 + "(" + G + "WINDOW GLOBAL ON ts" + ")" * 101,
    "SELECT k, count(*), " + ".".join(["a"] * 3000) + " FROM t GROUP BY k WINDOW GLOBAL ON ts",
    "SELECT k, count(*), " + " + ".join(["x"] * 3000) + " FROM t GROUP BY k WINDOW GLOBAL ON ts",
    "SELECT k, count(*) FROM t WATERMARK " + ".".join(["a"] * 3000) + " DELAY OF 1m GROUP BY k WINDOW GLOBAL",
    G + "WINDOW FIXED(SIZE INTERVAL 1e999999999 DAYS) ON ts",
    G + "WINDOW FIXED(SIZE " + "9" * 5000 + "d) ON ts",
    G + "WINDOW GLOBAL ON ts TRIGGER COUNT " + "9" * 5000,
    G + "WINDOW my_fn(" + "9" * 5000 + ", 1e400) ON ts",
    G + "WINDOW FIXED(SIZE 1m) ON ts /* unterminated",
]


@pytest.mark.parametrize("sql", DEEP_AND_BIG, ids=range(len(DEEP_AND_BIG)))
def test_deep_or_big_queries_raise_a_located_sqlflow_error(sql):
    assert problem(sql, parse) is None
    assert problem(sql, sqlflow.transpile) is None
    with pytest.raises(SqlflowError):
        parse(sql)


@pytest.mark.parametrize("sql", [
    "SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts; SELECT 1",
    "SELECT k, pane_index pane_timing, is_retraction, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts",
])
def test_gaps_found_by_fuzzing_transpile_are_located_errors(sql):
    assert problem(sql, sqlflow.transpile) is None
    with pytest.raises(SqlflowError):
        sqlflow.transpile(sql)


def test_a_table_function_with_a_watermark_and_no_alias_transpiles():
    assert sqlflow.transpile(
        "SELECT k, COUNT(*) FROM range(10) WATERMARK id DELAY OF 1m GROUP BY k WINDOW FIXED(SIZE 5m)"
    ).startswith("SELECT k, COUNT(*), WINDOW(id, '5 minutes').start AS window_start")
