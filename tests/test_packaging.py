"""The wheel a user installs: its contents, and that Spark's Python workers can import it.

The wheel is built from a copy of the source tree (so no build/ or *.egg-info appears in the
checkout, and no stale build/lib leaks into it), installed non-editable into a fresh virtualenv
(no --system-site-packages; dependencies come from pip's cache, so this takes ~20 s), and scripts
are run there from an empty directory, where the source tree cannot shadow the installed package.

To check more end-to-end behaviour of the installed wheel (a windowed `sqlflow.sql` query, the
CLI), write a script and call `run_in_wheel_venv(wheel_venv, script)`: a script prints one JSON
object as its last line of stdout, which the call returns parsed.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

#: Generated or irrelevant paths not copied into the build tree.
_IGNORE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache",
    ".ipynb_checkpoints", ".venv", "venv", "metastore_db", "spark-warehouse", "derby.log", "results",
)

#: Environment variables of this process that must not leak into the wheel's venv.
_DROP_ENV = (
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
    "SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "SQLFLOW_TEST_INSTALLED",
)


def _run(cmd: list[str], *, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


@dataclass(frozen=True)
class WheelVenv:
    root: Path
    python: Path
    workdir: Path  # an empty directory to run scripts from

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.root)
        return env


def run_in_wheel_venv(venv: WheelVenv, script: Path, *args: str, timeout: int = 300):
    """Run `script` with the wheel venv's python from an empty directory; return its last stdout
    line parsed as JSON."""
    proc = _run([str(venv.python), str(script), *args], cwd=venv.workdir, env=venv.env(), timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"{script.name} printed nothing\n--- stderr ---\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel from a clean copy of the source tree."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(REPO, src, ignore=_IGNORE)
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(src)], cwd=base)
    (built,) = (base / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_venv(wheel, tmp_path_factory) -> WheelVenv:
    """A fresh virtualenv with the wheel (and its dependencies, from pip's cache) installed."""
    base = tmp_path_factory.mktemp("wheel-venv")
    root = base / "venv"
    _run([sys.executable, "-m", "venv", str(root)], cwd=base)
    venv = WheelVenv(root=root, python=root / "bin" / "python", workdir=base / "run")
    venv.workdir.mkdir()
    _run([str(venv.python), "-m", "pip", "install", "--quiet", str(wheel)], cwd=base, env=venv.env())
    return venv


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
