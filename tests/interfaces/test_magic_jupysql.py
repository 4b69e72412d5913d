"""The magic's options as a jupysql user expects them: unknown options are
errors that list the valid ones, `%sqlflow --help`, `NAME <<` next to `-o`, and `--save` /
`--with` composing saved queries; driven through a real IPython shell."""
from __future__ import annotations

import re

from sqlflow.interfaces.magic import ResultTable, Text


def run(ipython, cell):
    return ipython.run_cell(cell)


def test_an_unknown_option_is_an_error_listing_the_valid_ones(ipython):
    for cell in ("%%sqlflow --limt 2\nSELECT id FROM range(5)", "%sqlflow --safe SELECT 1",
                 "%sqlflow -x SELECT 1"):
        r = run(ipython, cell)
        assert not r.success, cell
        message = str(r.error_in_exec)
        assert message.startswith("%sqlflow: unknown option"), message
    message = str(run(ipython, "%%sqlflow --limt 2\nSELECT 1").error_in_exec)
    assert message.startswith("%sqlflow: unknown option --limt; the options are: ")
    listed = message.split("the options are: ")[1].split(", ")
    assert {"--limit", "-l", "-o", "--out", "--save", "--with", "--plot", "--explain"} <= set(listed)
    r = run(ipython, "%%sqlflow -- a SQL comment, not an option\nSELECT 7 AS x")
    assert r.success and r.result.dataframe.first().x == 7


def test_help_shows_the_options(ipython, capsys):
    for cell in ("%sqlflow --help", "%sqlflow -h", "%%sqlflow --help\nSELECT 1"):
        r = run(ipython, cell)
        assert r.success and r.result is None, cell
        shown = capsys.readouterr().out
        assert "%sqlflow" in shown and "--limit N" in shown and "--save NAME" in shown and "NAME <<" in shown


def test_name_assignment_stores_the_result(ipython):
    r = run(ipython, "%%sqlflow counted <<\nSELECT id FROM range(3)")
    assert r.success and isinstance(r.result, ResultTable)
    assert [row.id for row in ipython.user_ns["counted"].collect()] == [0, 1, 2]
    r = run(ipython, "%sqlflow -l 1 -o also other << SELECT 5 AS five")
    assert r.success
    assert ipython.user_ns["other"].first().five == 5 and ipython.user_ns["also"].first().five == 5


def test_save_and_compose_snippets(ipython, spark):
    spark.range(10).selectExpr("id", "id % 3 AS k").createOrReplaceTempView("jupysql_nums")
    r = run(ipython, "%%sqlflow --save jupysql_small\nSELECT * FROM jupysql_nums -- the small ones\nWHERE id < 6")
    assert r.success and r.result.dataframe.count() == 6
    r = run(ipython, "%%sqlflow --save jupysql_keys --no-execute\nSELECT k, COUNT(*) AS n FROM jupysql_small GROUP BY k")
    assert r.success and isinstance(r.result, Text) and "not run" in repr(r.result)
    # a query reading a saved name gets it (and what it reads) as CTEs
    r = run(ipython, "%%sqlflow\nSELECT k, n FROM jupysql_keys ORDER BY k")
    assert r.success
    assert [tuple(row) for row in r.result.dataframe.collect()] == [(0, 2), (1, 2), (2, 2)]
    r = run(ipython, "%%sqlflow --transpile\nWITH x AS (SELECT 1) SELECT * FROM jupysql_keys")
    assert repr(r.result) == ("WITH jupysql_small AS (SELECT * FROM jupysql_nums WHERE id < 6), "
                              "jupysql_keys AS (SELECT k, COUNT(*) AS n FROM jupysql_small GROUP BY k), "
                              "x AS (SELECT 1) SELECT * FROM jupysql_keys")
    # --with composes one explicitly; an unknown one is an error naming the saved ones
    r = run(ipython, "%%sqlflow --with jupysql_small --transpile\nSELECT 1")
    assert repr(r.result) == "WITH jupysql_small AS (SELECT * FROM jupysql_nums WHERE id < 6) SELECT 1"
    r = run(ipython, "%%sqlflow --with nothing_saved\nSELECT 1")
    assert not r.success and "no query saved as 'nothing_saved'" in str(r.error_in_exec)
    assert "jupysql_small" in str(r.error_in_exec)
    r = run(ipython, "%sqlflow --snippets")
    assert "jupysql_keys:\n  SELECT k, COUNT(*) AS n FROM jupysql_small GROUP BY k" in repr(r.result)


def test_errors_in_a_composed_query_keep_the_cells_line_numbers(ipython, capsys):
    run(ipython, "%%sqlflow --save jupysql_base --no-execute\nSELECT id FROM range(3)")
    r = run(ipython, "%%sqlflow\nSELECT id\nFROM jupysql_base\nWHERE nope > 1")
    assert not r.success
    shown = capsys.readouterr().out
    assert "(line 4, column 7)" in shown and "  WHERE nope > 1\n        ^" in shown


def test_save_needs_a_query(ipython):
    r = run(ipython, "%%sqlflow --save jupysql_ddl\nCREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1")
    assert not r.success and "--save jupysql_ddl needs the cell to end with a query" in str(r.error_in_exec)
    r = run(ipython, "%%sqlflow --no-execute\nSELECT 1")
    assert not r.success and "--no-execute only goes with --save" in str(r.error_in_exec)


def test_the_docs_snippet_example_runs(ipython, repo_root, spark, paper):
    """docs/interfaces.md's --save / --with cells, run in order."""
    spark.createDataFrame(paper.inputs).createOrReplaceTempView("paper")
    text = (repo_root / "docs" / "interfaces.md").read_text(encoding="utf-8")
    section = text[text.index("**Saved queries**"):]
    cells = re.findall(r"```sql\n(%%sqlflow.*?)```", section, re.DOTALL)[:3]
    assert len(cells) == 3
    for cell in cells:
        r = run(ipython, cell)
        assert r.success, (cell, r.error_in_exec)
    assert [tuple(row) for row in ipython.user_ns["per_key"].collect()] == [("k", 3)]   # 14, 22 and 12


def test_jupysql_templates_are_refused_naming_sqlflows_parameters(ipython, capsys):
    """`{{x}}` is jupysql's template syntax; in sqlflow it would become `{:x}` (SQL the user
    never wrote): refused where it is written, naming sqlflow's `{x}` and `:x`."""
    from sqlflow.errors import SqlflowSyntaxError

    ipython.user_ns["jupysql_n"] = 2
    r = run(ipython, "%%sqlflow\nSELECT id FROM range(5)\nWHERE id < {{jupysql_n}} AND '{{in a string}}' <> ''")
    assert not r.success and isinstance(r.error_in_exec, SqlflowSyntaxError)
    e = r.error_in_exec
    assert (e.clause, e.line, e.column) == ("SQL", 3, 12)
    assert e.message == "{{jupysql_n}} is jupysql's template syntax"
    assert e.hint == "sqlflow's parameters are {jupysql_n} and :jupysql_n (a Python variable, passed to Spark as a value)"
    shown = capsys.readouterr().out
    assert "{:jupysql_n}" not in shown and "  WHERE id < {{jupysql_n}}" in shown
    r = run(ipython, "%%sqlflow\nSELECT id FROM range(5) WHERE id < {jupysql_n} AND '{{x}}' <> ''")
    assert r.success and [row.id for row in r.result.dataframe.collect()] == [0, 1]


def test_file_runs_the_statements_of_a_sql_file(ipython, tmp_path, capsys, monkeypatch):
    """`-f/--file FILE` (jupysql's --file): the statements of a .sql file, parameters and all;
    errors are located in the file; SQL next to it is refused."""
    script = tmp_path / "report.sql"
    script.write_text("-- a report\nCREATE OR REPLACE TEMPORARY VIEW jupysql_file AS SELECT id FROM range(6);\n"
                      "SELECT id FROM jupysql_file\nWHERE id < :jupysql_top;\n")
    ipython.user_ns["jupysql_top"] = 3
    r = run(ipython, f"%sqlflow -f {script}")
    assert r.success and [row.id for row in r.result.dataframe.collect()] == [0, 1, 2]
    r = run(ipython, f"%sqlflow --file {script} -o from_file")
    assert r.success and ipython.user_ns["from_file"].count() == 3
    monkeypatch.setenv("HOME", str(tmp_path))
    r = run(ipython, "%sqlflow -f ~/report.sql")   # as a shell would read it
    assert r.success and r.result.dataframe.count() == 3
    script.write_text("SELECT 1;\nSELECT k FROM t GROUP BY k\nWINDOW SESION(GAP 1m) ON ts;\n")
    r = run(ipython, f"%sqlflow --file {script}")
    assert not r.success and (r.error_in_exec.line, r.error_in_exec.column) == (3, 8)
    assert "  WINDOW SESION(GAP 1m) ON ts;\n         ^" in capsys.readouterr().out
    r = run(ipython, f"%%sqlflow -f {script}\nSELECT 2")
    assert not r.success and str(r.error_in_exec) == "%sqlflow: -f/--file runs the SQL of a file: give no SQL next to it"
    r = run(ipython, f"%sqlflow -f {tmp_path / 'nope.sql'}")
    assert not r.success and str(r.error_in_exec).startswith("%sqlflow: -f/--file: cannot read ")


def test_autoplot_draws_pane_results_and_leaves_the_rest_alone(ipython, repo_root, spark, paper, magic_config,
                                                                capsys):
    """docs/interfaces.md sets `SqlflowMagic.autoplot = True`; its saved-query cells then still
    run: the windowed query draws its panes, the plain aggregates over it (a saved query, a CTE,
    a subquery) show their rows and no diagram."""
    spark.createDataFrame(paper.inputs).createOrReplaceTempView("paper")
    run(ipython, "%config SqlflowMagic.autoplot = True")
    text = (repo_root / "docs" / "interfaces.md").read_text(encoding="utf-8")
    cells = re.findall(r"```sql\n(%%sqlflow.*?)```", text[text.index("**Saved queries**"):], re.DOTALL)[:3]
    windowed = "SELECT k, SUM(v) AS total FROM paper GROUP BY k WINDOW FIXED(SIZE 2m) ON ts"
    drawn = []
    for cell in cells + [
            f"%%sqlflow\nWITH w AS ({windowed}) SELECT k, COUNT(*) AS n FROM w GROUP BY k",
            f"%%sqlflow\nSELECT MAX(total) AS top FROM ({windowed})",
            f"%%sqlflow\nSELECT * FROM ({windowed}) WHERE total > 10"]:
        r = run(ipython, cell)
        assert r.success, (cell, r.error_in_exec)
        drawn.append("<Figure size" in capsys.readouterr().out)
    assert drawn == [True, False, False, False, False, True]
    assert [tuple(row) for row in ipython.user_ns["per_key"].collect()] == [("k", 3)]
