"""Spark's Python processes import the installed pyspark, not the bytecode-less zip Spark puts
first on their path (sqlflow/worker_startup.py; docs/spark-internals.md, 9)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pyspark
from sqlflow.worker_startup import OPT_OUT, PTH_LINE, PTH_NAME

PACKAGE = Path(pyspark.__file__).resolve().parent
SITE = PACKAGE.parent
ZIPS = [str(PACKAGE / "python" / "lib" / "pyspark.zip"), *map(str, sorted((PACKAGE / "python" / "lib").glob("py4j-*-src.zip")))]


def imported_from(env: dict) -> dict:
    """The files pyspark and py4j come from in a fresh interpreter whose path starts as a Spark
    worker's (Spark's zips first), after the startup file's line has run."""
    code = (f"import sys\nsys.path[:0] = {ZIPS!r}\nexec({PTH_LINE!r})\n"
            "import json, pyspark, py4j\nprint(json.dumps([pyspark.__file__, py4j.__file__]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(zip(("pyspark", "py4j"), json.loads(proc.stdout.strip().splitlines()[-1])))


def test_the_line_has_a_worker_import_the_installed_pyspark():
    assert all(Path(z).is_file() for z in ZIPS) and len(ZIPS) == 2, ZIPS  # pip's pyspark ships both zips
    got = imported_from({k: v for k, v in os.environ.items() if k != OPT_OUT})
    assert got["pyspark"] == str(PACKAGE / "__init__.py")
    assert Path(got["py4j"]).resolve().parent.parent == SITE


def test_the_zip_is_kept_when_the_environment_says_so():
    got = imported_from(dict(os.environ) | {OPT_OUT: "keep"})
    assert got["pyspark"] == f"{ZIPS[0]}/pyspark/__init__.py"
    assert ".zip/" in got["py4j"]


def test_spark_python_workers_import_the_installed_pyspark(spark):
    if not (SITE / PTH_NAME).is_file():
        pytest.skip(f"sqlflow is installed editable (pip install -e), which does not place {PTH_NAME}; "
                    "`pip install .` does, and docs/spark-internals.md 9 shows the one-line copy")

    def where(_):
        import sys

        import pyspark as worker_pyspark
        yield json.dumps([worker_pyspark.__file__, [p for p in sys.path if p.endswith(".zip") and "pyspark" in p]])

    (found,) = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    file, zips = json.loads(found)
    assert (file, zips) == (str(PACKAGE / "__init__.py"), [])
