"""Code that runs on Spark's Python workers (shipped as `sqlflow.udfs`).

Modules here import only the engine and the standard library at import time: no sqlglot, no
lark, no pyspark SQL layer.
"""
