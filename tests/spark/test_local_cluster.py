"""sqlflow.sql on a real cluster layout: Spark's `local-cluster[2,1,1024]` master (two executor
JVMs with their own Python workers), from the installed wheel in a fresh virtualenv.

The engine path runs `sqlflow.udfs.bucket` inside the executors' Python workers, the native path,
`sqlflow.register`'s UDFs and a pandas UDF probing where `sqlflow` comes from
(sqlflow/udfs/probe.py) run there too: everything must import from the installed wheel.
The wheel and its virtualenv are the `wheel_venv` fixture's (tests/conftest.py), shared with
tests/test_packaging.py.

It runs in the release tier (`--release`: a virtualenv and three JVMs). The default run keeps
the parts apart: tests/test_packaging.py checks the wheel holds every module and data file, and
tests/spark/test_zipped_package.py runs the executors' imports from a package outside the source
tree.
"""
from __future__ import annotations

import sys
import textwrap

import pytest

from tests.conftest import run_in_wheel_venv

pytestmark = pytest.mark.slow


SCRIPT = textwrap.dedent('''
    import json, os, sys

    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    import sqlflow
    from sqlflow.demo import FIGURE_14, load_clickstream, load_paper_example
    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-local-cluster", master="local-cluster[2,1,1024]",
                          conf={"spark.sql.shuffle.partitions": "4"})
    load_paper_example(spark)
    load_clickstream(spark)
    figure = sqlflow.sql(spark, FIGURE_14).orderBy("emit_time", "is_retraction", "window_start").collect()
    native = sqlflow.sql(spark, "SELECT COUNT(*) AS n FROM clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON event_time",
                         path="native").agg({"n": "sum"}).first()[0]
    engine = sqlflow.sql(spark, "SELECT COUNT(*) AS n FROM clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON event_time",
                         path="engine").agg({"n": "sum"}).first()[0]
    @pandas_udf("string")
    def probe(ids: pd.Series) -> pd.Series:
        # Runs on an executor's Python worker: these imports resolve there, from the installed wheel.
        import sqlflow.engine
        from sqlflow.udfs.probe import where

        info = where()
        return pd.Series([json.dumps({**info, "double": int(i) * 2}) for i in ids])

    probed = [json.loads(r.info) for r in spark.range(4).repartition(2).select(probe("id").alias("info")).collect()]
    sqlflow.register(spark)
    windows = spark.sql("SELECT COUNT(*) FROM clicks LATERAL VIEW explode(sqlflow_sliding(event_time, '10m', '5m')) AS w").first()[0]
    where = spark.range(4).repartition(4).selectExpr("1 AS x").rdd.map(
        lambda r: (__import__("sqlflow.udfs.bucket").udfs.bucket.__file__, os.getpid(),
                   __import__("pyspark").__file__)).collect()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    print(json.dumps({
        "master": spark.sparkContext.master, "executors": executors,
        "figure14": sorted((-r["total"] if r["is_retraction"] else r["total"]) for r in figure),
        "native": native, "engine": engine, "windows": windows,
        "worker_files": sorted({w[0] for w in where}), "driver_pid": os.getpid(),
        "worker_pids": sorted({w[1] for w in where}), "driver_sqlflow": sqlflow.__file__, "probed": probed,
        "worker_pyspark": sorted({w[2] for w in where}),
    }))
    spark.stop()
''')


@pytest.mark.release
def test_bounded_queries_on_a_local_cluster_from_the_wheel(wheel_venv, tmp_path):
    script = tmp_path / "cluster.py"
    script.write_text(SCRIPT)
    out = run_in_wheel_venv(wheel_venv, script, timeout=600)
    assert out["master"] == "local-cluster[2,1,1024]"
    assert out["executors"] == 2
    assert out["figure14"] == sorted([5, 7, 10, -7, -10, 25, 3, -5, -25, 39, -3, 12])
    assert out["native"] == out["engine"] == 2000
    assert out["windows"] == 4000  # every click is in two sliding windows of 10m every 5m
    site = str(wheel_venv.root)
    assert all(f.startswith(site) and "site-packages" in f for f in out["worker_files"]), out["worker_files"]
    assert out["driver_pid"] not in out["worker_pids"]
    # the executors' workers import the installed pyspark, not Spark's zip (sqlflow/worker_startup.py)
    assert out["worker_pyspark"] == [f"{site}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages/pyspark/__init__.py"], \
        out["worker_pyspark"]
    # a pandas UDF's Python workers import sqlflow, its engine and its UDF modules from the wheel
    assert out["driver_sqlflow"].startswith(site)
    assert sorted(row["double"] for row in out["probed"]) == [0, 2, 4, 6]
    for row in out["probed"]:
        assert row["pid"] != out["driver_pid"], "the UDF ran in the driver, not a Python worker"
        assert row["python"].startswith(site)
        for key in ("sqlflow_file", "engine_file", "probe_file"):
            assert row[key].startswith(site) and "site-packages" in row[key], (key, row[key])
        assert row["version"] == __import__("sqlflow").__version__
