"""The wheel a user installs: its contents, and that Spark's Python workers can import it.

The `wheel` and `wheel_venv` fixtures (tests/conftest.py) build the wheel once per test run (or
take .ci/run's, SQLFLOW_TEST_WHEEL) and install it non-editable into a fresh virtualenv; scripts
run there from an empty directory, where the source tree cannot shadow the installed package.
"""
from __future__ import annotations

import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.conftest import run_in_wheel_venv

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

def _wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_wheel_contains_every_module_and_data_file(wheel):
    names = _wheel_names(wheel)
    expected = set()
    for source_dir, package_dir in (("sqlflow", "sqlflow"), ("grammar", "sqlflow/grammar"), ("udfs", "sqlflow/udfs")):
        for path in (REPO / source_dir).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            rel = path.relative_to(REPO / source_dir).as_posix()
            if path.suffix in (".py", ".lark") or rel.startswith("data/") or (source_dir == "grammar" and path.suffix == ".md"):
                expected.add(f"{package_dir}/{rel}")
    missing = sorted(expected - names)
    assert not missing, f"missing from the wheel (add the package to pyproject's packages?): {missing}"
    assert "sqlflow/udfs/probe.py" in names
    assert "sqlflow/engine/__init__.py" in names
    assert "sqlflow/spark/session.py" in names
    assert not any(n.startswith(("grammar/", "udfs/", "tests/")) for n in names), "top-level dirs leaked"


_EXECUTOR_PROBE = textwrap.dedent(
    """
    import json, os, sys

    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-wheel-probe", master="local[2]")

    @pandas_udf("string")
    def probe(ids: pd.Series) -> pd.Series:
        # Runs on a Python worker: these imports resolve there, from the installed wheel.
        import sqlflow.engine
        from sqlflow.udfs.probe import where

        info = where()
        return pd.Series([json.dumps({**info, "double": int(i) * 2}) for i in ids])

    rows = spark.range(4).repartition(2).select(probe("id").alias("info")).collect()
    spark.stop()
    print(json.dumps({
        "driver_pid": os.getpid(),
        "driver_sqlflow": __import__("sqlflow").__file__,
        "executor": [json.loads(r.info) for r in rows],
    }))
    """
)


def test_python_workers_import_the_installed_wheel(wheel_venv, tmp_path):
    script = tmp_path / "executor_probe.py"
    script.write_text(_EXECUTOR_PROBE)
    out = run_in_wheel_venv(wheel_venv, script)
    site = str(wheel_venv.root)
    assert out["driver_sqlflow"].startswith(site)
    assert sorted(row["double"] for row in out["executor"]) == [0, 2, 4, 6]
    for row in out["executor"]:
        assert row["pid"] != out["driver_pid"], "the UDF ran in the driver, not a Python worker"
        assert row["python"].startswith(site)
        for key in ("sqlflow_file", "engine_file", "probe_file"):
            assert row[key].startswith(site) and "site-packages" in row[key], (key, row[key])
        assert row["version"] == __import__("sqlflow").__version__
