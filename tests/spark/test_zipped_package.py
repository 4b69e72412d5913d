"""sqlflow imported from a zip, as `spark-submit --py-files sqlflow.zip` ships it
(docs/running-on-a-cluster.md, option 2).

The executor side (the engine, the bucket job) imports from a zip, and so does the front end: it
reads its lark grammar as a package resource, which works inside a zip.
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile

import pytest


@pytest.fixture(scope="module")
def zipped(tmp_path_factory, repo_root):
    """The package laid out as in the wheel, zipped (sqlflow/, grammar/ as sqlflow/grammar, udfs/
    as sqlflow/udfs)."""
    path = tmp_path_factory.mktemp("zip") / "sqlflow.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for source, target in (("sqlflow", "sqlflow"), ("grammar", "sqlflow/grammar"), ("udfs", "sqlflow/udfs")):
            for file in (repo_root / source).rglob("*"):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix in (".py", ".lark", ".json", ".csv", ".md"):
                    zf.write(file, f"{target}/{file.relative_to(repo_root / source).as_posix()}")
    return path


def run(zipped, code: str) -> subprocess.CompletedProcess:
    """Run `code` with only the zip and the site-packages on sys.path (-S: no .pth hooks, so an
    editable install of sqlflow cannot interfere)."""
    site = sysconfig.get_paths()["purelib"]
    prelude = f"import sys; sys.path[:0] = [{str(zipped)!r}, {site!r}]\n"
    return subprocess.run([sys.executable, "-S", "-c", prelude + code], capture_output=True, text=True, timeout=600)


def test_the_executor_side_imports_from_a_zip(zipped):
    proc = run(zipped, "import sqlflow.udfs.bucket, sqlflow.udfs.assign, sqlflow.engine.runner, sqlflow.demo\n"
                       "print(sqlflow.udfs.bucket.__file__)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(zipped))


def test_the_front_end_parses_from_a_zip(zipped):
    proc = run(zipped, "import sqlflow\nprint(sqlflow.transpile('SELECT k, COUNT(*) FROM t GROUP BY k WINDOW GLOBAL ON ts'))")
    assert proc.returncode == 0, proc.stderr
