"""The planner's passes (sqlflow/plan/passes.py), each run without Spark."""
from __future__ import annotations

import pytest
from sqlglot import exp

from sqlflow import ast
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.frontend import parse
from sqlflow.plan import passes
from sqlflow.plan.output import panes_select
from sqlflow.plan.pipelines import STAGE_KEY, StageLink
from sqlflow.plan.relations import replace_select, to_spark_sql
from sqlflow.plan.windowed_select import describe

RETRACTING = ast.AccumulationMode.ACCUMULATING_AND_RETRACTING


def _link(mode=RETRACTING, label="stage 1"):
    return StageLink(mode, None, False, label)


def test_the_passes_run_in_this_order():
    assert [p.__name__ for p in passes.PASSES] == ["plan_stages", "rewrite_consumers", "drop_watermark_clauses"]


def test_drop_watermark_clauses_leaves_plain_sql():
    s = parse("SELECT k, COUNT(*) FROM t WATERMARK ts DELAY OF 1m GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
    tree = passes.drop_watermark_clauses(s.tree, passes.Rewrite(s, passes.native_stage))
    assert s.source_watermarks() == []
    assert tree is s.tree


def test_rewrite_consumers_subtracts_a_retracting_stage():
    s = parse("SELECT k, SUM(n) AS total, COUNT(*) AS c FROM (SELECT * FROM panes) AS p GROUP BY k")
    s.tree.find(exp.Subquery).this.meta[STAGE_KEY] = _link()
    out = passes.rewrite_consumers(s.tree, passes.Rewrite(s, passes.native_stage))
    assert to_spark_sql(out) == (
        "SELECT k, SUM(IF(p.is_retraction, -(n), n)) AS total, COALESCE(SUM(IF(p.is_retraction, -1, 1)), 0) AS c "
        "FROM (SELECT * FROM panes) AS p GROUP BY k HAVING SUM(IF(p.is_retraction, -1, 1)) <> 0")


def test_rewrite_consumers_leaves_a_discarding_stage_alone():
    s = parse("SELECT k, SUM(n) AS total FROM (SELECT * FROM panes) AS p GROUP BY k")
    s.tree.find(exp.Subquery).this.meta[STAGE_KEY] = _link(ast.AccumulationMode.DISCARDING)
    before = to_spark_sql(s.tree)
    assert to_spark_sql(passes.rewrite_consumers(s.tree, passes.Rewrite(s, passes.native_stage))) == before


def test_a_select_reads_its_upstream_stages_once():
    """Run twice (a windowed SELECT in `plan_stages`, then every SELECT in `rewrite_consumers`),
    the subtraction is applied once."""
    s = parse("SELECT k, SUM(n) AS total FROM (SELECT * FROM panes) AS p GROUP BY k")
    s.tree.find(exp.Subquery).this.meta[STAGE_KEY] = _link()
    context = passes.Rewrite(s, passes.native_stage)
    once = to_spark_sql(passes.rewrite_consumers(s.tree, context))
    assert to_spark_sql(passes.rewrite_consumers(s.tree, context)) == once
    assert once.count("is_retraction, -(n)") == 1
    # the mark follows a copy (a SELECT over panes copies the CTEs of the SELECT it replaces)
    assert to_spark_sql(passes.rewrite_consumers(s.tree.copy(), context)) == once


def test_plan_stages_plans_innermost_first_and_collects_the_stages():
    s = parse("SELECT SUM(n) AS total FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k "
              "WINDOW FIXED(SIZE 1m) ON ts) AS w WINDOW GLOBAL ON window_end")
    seen = []

    def record(statement, number, select, windowing, tree):
        seen.append((number, type(windowing.window.fn).__name__, select.parent_select is not None))
        return f"stage {number}", tree

    context = passes.Rewrite(s, record)
    assert passes.plan_stages(s.tree, context) is s.tree
    assert seen == [(1, "Fixed", True), (2, "Global", False)]
    assert context.stages == ["stage 1", "stage 2"]


def test_a_stage_planner_may_replace_the_root():
    s = parse("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")

    def over_panes(statement, number, select, windowing, tree):
        ws = describe(statement, select, windowing)
        new = panes_select(ws, "panes_view", ["k", "n"])
        new.meta[STAGE_KEY] = _link(ast.AccumulationMode.DISCARDING)
        return ws.label(), replace_select(tree, select, new)

    tree = passes.rewrite(s.tree, passes.Rewrite(s, over_panes))
    assert to_spark_sql(tree) == ("SELECT __sqlflow_k0 AS `k`, __sqlflow_agg0 AS n, window_start, window_end, "
                                  "pane_index, pane_timing, is_last, emit_time, output_time FROM panes_view")


def test_transpile_rewrites_every_stage_natively():
    s = parse("SELECT k, COUNT(*) AS n FROM t WATERMARK ts DELAY OF 1m GROUP BY k WINDOW GLOBAL ON ts")
    assert passes.transpile(s) == (
        "SELECT k, COUNT(*) AS n, CAST(NULL AS TIMESTAMP) AS window_start, CAST(NULL AS TIMESTAMP) AS window_end, "
        "CAST(0 AS BIGINT) AS pane_index, 'ON_TIME' AS pane_timing, TRUE AS is_last, "
        "CAST(NULL AS TIMESTAMP) AS emit_time, CAST(NULL AS TIMESTAMP) AS output_time "
        "FROM t WHERE NOT ts IS NULL GROUP BY k")


def test_transpile_refuses_a_stage_without_a_native_rewrite():
    s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW CUMULATE(STEP 1m, SIZE 1h) ON ts")
    with pytest.raises(SqlflowUnsupportedError, match="no native Spark SQL for"):
        passes.transpile(s)


def test_a_consumer_of_an_engine_stage_reads_its_retractions():
    """The passes together, a stage planner standing in for the engine: stage 1 becomes a SELECT
    over its panes linked to the stage, and the aggregation over it subtracts retractions."""
    s = parse("SELECT SUM(n) AS total FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k "
              "WINDOW SESSIONS(GAP 1m) ON ts EMIT ACCUMULATING AND RETRACTING) AS w")

    def over_panes(statement, number, select, windowing, tree):
        ws = describe(statement, select, windowing)
        new = panes_select(ws, f"panes_{number}", ["k", "n"])
        new.meta[STAGE_KEY] = _link(windowing.mode, ws.label())
        return ws.label(), replace_select(tree, select, new)

    context = passes.Rewrite(s, over_panes)
    tree = passes.rewrite(s.tree, context)
    assert context.stages == ["the SELECT with WINDOW SESSIONS at line 1, column 72"]
    assert to_spark_sql(tree) == (
        "SELECT SUM(IF(w.is_retraction, -(n), n)) AS total FROM (SELECT __sqlflow_k0 AS `k`, __sqlflow_agg0 AS n, "
        "window_start, window_end, pane_index, pane_timing, is_last, emit_time, output_time, is_retraction "
        "FROM panes_1) AS w")


def test_describe_stage_defers_an_impossible_path():
    """A forced path that cannot run leaves the choice open: Spark's analysis of the input (a
    misspelt column, a wrong type) reports first, then the path's error is raised."""
    s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW CUMULATE(STEP 1m, SIZE 1h) ON ts")
    planned = passes.describe_stage(s, *s.windowed_selects()[0], forced="native")
    assert planned.choice is None
    assert planned.ws.window_kind == "CUMULATE" and planned.rel.keys == ["__sqlflow_k0"]
    assert passes.describe_stage(s, *s.windowed_selects()[0]).choice.path == "engine"
