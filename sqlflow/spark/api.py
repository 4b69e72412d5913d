"""sqlflow on Spark, bounded and recorded data: `sql`, `transpile`, `explain`, `register`,
`dropped`, `metrics` (docs/bounded-execution.md).

`sql(spark, query)` behaves like `spark.sql(query)`: same arguments, a DataFrame back. A statement
without sqlflow clauses goes to `spark.sql` unchanged. Otherwise every windowed SELECT in it runs
either as plain Spark SQL (the native rewrite, `transpile` prints it) or on sqlflow's engine over
hash buckets of keys, whichever `explain` says and why.
"""
from __future__ import annotations

from ..errors import SqlflowError
from .report import ATTRIBUTE, dropped, late_by_source, metrics

__all__ = ["sql", "transpile", "explain", "register", "dropped", "metrics", "late_by_source"]


def _first_non_blank(text: str, at: int) -> int:
    while at < len(text) - 1 and text[at].isspace():
        at += 1
    return at


def _statement(text: str, *, spark=None):
    """The one statement of `text`. With a session, the check that every item is grouped or
    aggregated waits for Spark's analysis (`Runner.stage`): a misspelt column gets Spark's message.

    >>> _statement(42)
    Traceback (most recent call last):
    ...
    TypeError: sqlflow takes a query as SQL text (a str), not int
    """
    from ..frontend import parse_script

    if not isinstance(text, str):
        hint = (": sqlflow.metrics(df) and sqlflow.dropped(df) describe a result, df.explain() its Spark plan"
                if hasattr(text, "sparkSession") else "")
        raise TypeError(f"sqlflow takes a query as SQL text (a str), not {type(text).__name__}{hint}")
    statements = parse_script(text, grouping=spark is None)
    if len(statements) > 1 and not all(s.is_plain for s in statements):
        second = statements[1]
        raise second.source.error(SqlflowError, f"expected one statement, found {len(statements)}",
                                  _first_non_blank(second.source.text, second.start), clause="SQL",
                                  hint="run the statements one by one (sqlflow.parse_script splits a script)")
    return statements[0] if len(statements) == 1 else None


def _check_args(args) -> None:
    """String parameters Spark can read (no lone surrogate: see frontend.api.check_encodable)."""
    from ..frontend.api import LONE_SURROGATE

    items = args.items() if isinstance(args, dict) else enumerate(args or ())
    for name, value in items:
        if isinstance(value, str) and LONE_SURROGATE.search(value):
            what = f":{name}" if isinstance(name, str) else f"parameter {name + 1} (?)"
            raise SqlflowError(f"the value of {what} holds a lone surrogate, which is not Unicode text",
                               clause="SQL", hint="remove it, or decode the text it came from with errors='replace'")


def _path(spark, path: str | None) -> str | None:
    from . import conf

    chosen = path or conf.get(spark, conf.PATH, "auto")
    chosen = chosen.lower()
    if chosen not in conf.PATHS:
        raise SqlflowError(f"path must be one of {', '.join(conf.PATHS)}, got {chosen!r}", clause="SQL")
    return chosen


def sql(spark, query: str, args=None, path: str | None = None, **kwargs):
    """Run `query` like `spark.sql(query, args, **kwargs)`, windowed SELECTs included.

    - `args`: a dict for named parameters (`:x`) or a list for positional ones (`?`), as in
      spark.sql; `kwargs`: values and DataFrames for `{name}` placeholders, as in spark.sql.
    - `path`: "native" or "engine" forces the execution path of every windowed SELECT
      (SqlflowUnsupportedError if impossible); default "auto" (or conf `spark.sqlflow.path`).
      A `{path}` placeholder therefore cannot be passed as a keyword.

    A statement without sqlflow clauses is passed to spark.sql as is. The result also carries the
    dropped rows and counts of its windowed SELECTs: `sqlflow.dropped(df)`, `sqlflow.metrics(df)`.
    """
    return run_sql(spark, query, args, path=path, placeholders=kwargs)


def run_sql(spark, query: str, args=None, *, path: str | None = None, placeholders: dict | None = None,
            finish_dir: str | None = None, starts_query: bool = False):
    """`sql` with sqlflow's own settings as arguments (`sql` keeps spark.sql's signature):
    `placeholders` are sql's keyword arguments; `finish_dir` is where the streams of the result
    write their end-of-input marker (default: conf `spark.sqlflow.streaming.finishDir`);
    `starts_query`: the caller starts a streaming result with `streaming.start`, which sets the
    state store it needs for that query (else a session without it is refused here)."""
    from .lifetimes import is_connect, keep_until_unused

    text, formatter = query, None
    if placeholders:
        from pyspark.sql.sql_formatter import SQLStringFormatter

        formatter = SQLStringFormatter(spark)
        text = formatter.format(query, **placeholders)
    try:
        statement = _statement(text, spark=spark)
        _check_args(args)
        if statement is None or statement.is_plain:
            if formatter is not None:
                formatter.clear()
                formatter = None
            return spark.sql(query, args, **(placeholders or {}))
        df = _run(spark, statement, args, _path(spark, path), finish_dir, starts_query)
        if formatter is not None and is_connect(spark):  # the placeholders' views, as sqlflow's own
            keep_until_unused(spark, df, [name for _, name in formatter._temp_views])
            formatter = None
        return df
    finally:
        if formatter is not None:
            formatter.clear()


def _run(spark, statement, args, path, finish_dir, starts_query=False):
    from . import trigger_checks
    from .analysis import spark_sql
    from .execute import Runner
    from .lifetimes import drop_unused, is_connect, keep_until_unused
    from ..plan.params import named_parameters

    args = named_parameters(statement.tree, args, statement)
    drop_unused(spark)
    runner = Runner(spark, statement, args, path=path, finish_dir=finish_dir, starts_query=starts_query)
    prepared = runner.prepare()
    df = None
    try:
        df = spark_sql(spark, prepared.sql, args, statement=statement, original=runner.original,
                       fallback=None)
    finally:
        if prepared.keep_views:
            pass
        elif df is not None and is_connect(spark):  # analysed each time it runs, by view name
            keep_until_unused(spark, df, runner.views)
            runner.views = []
        else:
            runner.drop_views()
    for stage in prepared.report.stages:
        if stage.panes_are_result:
            stage.panes = df
        trigger_checks.warn(stage.label, stage.notes)
    prepared.report.sql, prepared.report.args = prepared.sql, args
    setattr(df, ATTRIBUTE, prepared.report)
    if any("stream" in s.extra for s in prepared.report.stages):  # `df.writeStream` starts it as `start` does
        from .streaming.session_conf import start_with_settings

        start_with_settings(df)
    return df


def transpile(query: str) -> str:
    """The plain Spark SQL of `query`, every windowed SELECT rewritten natively.

    A statement without sqlflow clauses comes back unchanged. Raises SqlflowUnsupportedError,
    naming the windowed SELECT and the reason, when one has no native rewrite (a replay, a trigger
    that fires before the end of input, CUMULATE, a custom window function). Without a Spark
    session the event time is assumed to be a TIMESTAMP, and an unaliased item mentioning a pane
    column is named after its text.
    """
    from ..plan import passes

    statement = _statement(query)
    if statement is None or statement.is_plain:
        return query
    return passes.transpile(statement)


def explain(query: str, spark=None, args=None) -> str:
    """Which plan runs each windowed SELECT of `query`, and why: native rewrite or engine
    (vectorised or per-key), bounded or replay, how many buckets; then the Spark SQL that runs.

    With `spark` the query is analysed (types checked, names resolved, bucket count from Spark's
    size estimate) but no job runs; without it only the text is planned (no Spark needed).
    """
    from .execute import Runner
    from ..plan.params import named_parameters

    statement = _statement(query, spark=spark)
    if statement is None or statement.is_plain:
        return "plain Spark SQL: no windowed SELECT, the statement goes to spark.sql unchanged"
    args = named_parameters(statement.tree, args, statement)
    runner = Runner(spark, statement, args, path=_path(spark, None), dry=True)
    try:
        prepared = runner.prepare()
    finally:
        runner.drop_views()
    head = prepared.report.explain()
    return f"{head}\nSpark SQL:\n  {prepared.sql}"


def register(spark) -> list[str]:
    """Register sqlflow's window-assignment pandas UDFs in `spark` for plain SQL; returns their
    names (see sqlflow.spark.windowfns)."""
    from .windowfns import register_window_udfs

    return register_window_udfs(spark)

