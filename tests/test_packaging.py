"""The wheel a user installs: its contents. That Spark's Python workers import it, on executors of
their own, is tests/spark/test_local_cluster.py's (one JVM for both checks).

The `wheel` fixture (tests/conftest.py) builds the wheel once per test run, or takes .ci/run's
(SQLFLOW_TEST_WHEEL); `wheel_venv` installs it non-editable into a fresh virtualenv, where
scripts run from an empty directory and the source tree cannot shadow the installed package.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

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


def test_wheel_installs_the_worker_startup_file(wheel):
    """At the wheel's root, so that pip puts it into site-packages (sqlflow/worker_startup.py)."""
    from sqlflow.worker_startup import PTH_LINE, PTH_NAME

    with zipfile.ZipFile(wheel) as zf:
        assert [n for n in zf.namelist() if n.endswith(".pth")] == [PTH_NAME]
        assert zf.read(PTH_NAME).decode() == PTH_LINE + "\n"
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        assert any(line.startswith(PTH_NAME + ",") for line in zf.read(record).decode().splitlines())
