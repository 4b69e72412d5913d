"""Without Java, the demo, the command and a notebook say what is missing and how to install it,
instead of PySpark's JAVA_GATEWAY_EXITED traceback. Each run is a subprocess whose PATH holds no
java (or whose JAVA_HOME points nowhere); no JVM starts, so the runs are quick."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

NEEDED = "sqlflow: SPARK: Spark needs Java 17 (or 21) and found none:"
HOW = ("install it (Debian, Ubuntu: sudo apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17; "
       "conda: conda install -c conda-forge openjdk=17), then put its bin directory on PATH or set JAVA_HOME to it")


def _without_java(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT", "SPARK_REMOTE")}
    env["PATH"] = str(tmp_path)   # no java there (nor anything else)
    env.update(extra)
    return env


@pytest.mark.parametrize("case", ["no java on PATH", "JAVA_HOME points nowhere"])
@pytest.mark.parametrize("program", ["demo", "command"])
def test_without_java_the_message_says_how_to_install_it(tmp_path, repo_root, sqlflow_exe, program, case):
    if case == "no java on PATH":
        env, why = _without_java(tmp_path), "no java on PATH, and JAVA_HOME is not set"
    else:
        nowhere = tmp_path / "jdk"
        env = _without_java(tmp_path, JAVA_HOME=str(nowhere), PATH=os.environ["PATH"])
        why = f"JAVA_HOME is {nowhere}, which has no bin/java"
    args = [sys.executable, "-m", "sqlflow.demo"] if program == "demo" else [sqlflow_exe, "-e", "SELECT 1"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=repo_root, env=env, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr == f"{NEEDED} {why}\n{HOW}\n"
    assert "Traceback" not in proc.stdout + proc.stderr


def test_in_a_notebook_the_error_is_the_message_alone(tmp_path, repo_root):
    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\n"
            "shell.run_line_magic('load_ext', 'sqlflow')\n"
            "r = shell.run_cell('%sqlflow SELECT 1')\n"
            "print('FAILED' if not r.success else 'RAN')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo_root,
                          env=_without_java(tmp_path), timeout=300)
    assert "FAILED" in proc.stdout, proc.stdout + proc.stderr
    assert f"{NEEDED} no java on PATH, and JAVA_HOME is not set\n{HOW}" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "JAVA_GATEWAY_EXITED" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("program", ["demo", "command"])
def test_a_java_that_cannot_run_spark_is_named(tmp_path, repo_root, sqlflow_exe, program):
    """A java that exits at once (too old, broken): spark-submit's own message, then which java
    was run and what Spark needs, no traceback."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'Error: this java is too old' >&2\nexit 1\n")
    java.chmod(0o755)
    env = _without_java(tmp_path, JAVA_HOME=str(java.parent.parent), PATH=os.environ["PATH"])
    args = [sys.executable, "-m", "sqlflow.demo"] if program == "demo" else [sqlflow_exe, "-e", "SELECT 1"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=repo_root, env=env, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: this java is too old\n")
    assert proc.stderr.endswith(
        f"sqlflow: SPARK: Spark's JVM did not start with {java} (spark-submit's messages are above); "
        f"Spark needs Java 17 (or 21)\ncheck that {java} -version says 17 or 21; or {HOW}\n")
    assert "Traceback" not in proc.stderr and "JAVA_GATEWAY_EXITED" not in proc.stderr
