"""The planner: a windowed statement's analysis and rewriting, without Spark.

Between the frontend (which parses a statement) and the Spark integration (which runs it): each
windowed SELECT is taken apart (`windowed_select`), its path chosen (`path_choice`, by the
engine's rules in `sqlflow.engine.paths`), its input relation built (`inputs`), rewritten into
plain Spark SQL (`native_rewrite`) or replaced by a SELECT over the engine's panes (`output`),
and the aggregations downstream of it adjusted to its accumulation mode (`pipelines`). The order
of these steps over a statement is the list of passes in `passes`. Nothing here imports pyspark
(tests/test_layering.py); `sqlflow.spark` runs the result.
"""
