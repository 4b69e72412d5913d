"""Spark's Python processes import the installed pyspark, not its bytecode-less zip.

Every Python process Spark starts (the workers' daemon, the process that plans each
transformWithState query's first micro-batch, Spark Connect's foreachBatch runner) gets a
`PYTHONPATH` that starts with `$SPARK_HOME/python/lib/pyspark.zip` and its py4j zip, ahead of
site-packages (Spark's `PythonUtils.sparkPythonPath`). With PySpark installed by pip, SPARK_HOME
is the installed package itself, and the zip holds the same files as the package beside it, but
as sources only: Python's zipimport neither reads nor writes cached bytecode for them, so each
such process compiles the pyspark modules it imports again. Importing pyspark's transformWithState
planning worker takes 0.48-0.55 s that way against 0.11-0.13 s from site-packages on the
project's 2-core machine, and Spark starts that process at every start of a stateful query
(docs/spark-internals.md, 9).

sqlflow installs a startup file (`PTH_NAME`, one line, `PTH_LINE`) into site-packages. Python
runs it as each process starts; when the process's path holds pyspark's zip it calls
`prefer_installed_pyspark`, which removes the zip (and the py4j zip) from the path when it lies
inside the pyspark package installed in a directory on that path, and py4j is installed there
too: the modules then come from that package, the same files, with their bytecode cached.
Anything else (a Spark distribution's own SPARK_HOME, a zip without an installed twin) is left
as it is, and `SQLFLOW_PYSPARK_ZIP=keep` in the environment turns it off.

>>> import os, tempfile
>>> site = tempfile.mkdtemp()
>>> for package in ("pyspark", "py4j"):
...     os.makedirs(os.path.join(site, package))
...     open(os.path.join(site, package, "__init__.py"), "w").close()
>>> lib = os.path.join(site, "pyspark", "python", "lib")
>>> path = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-0.10.9.9-src.zip"), "/elsewhere", site]
>>> prefer_installed_pyspark(path, environ={}) == ["/elsewhere", site]
True
>>> path == ["/elsewhere", site]  # (changed in place: it is given sys.path itself)
True
>>> zipped = ["/opt/spark/python/lib/pyspark.zip", site]  # a Spark distribution's zip: kept
>>> prefer_installed_pyspark(zipped, environ={}) == ["/opt/spark/python/lib/pyspark.zip", site]
True
>>> alone = [os.path.join(lib, "pyspark.zip")]  # the installed package's directory not on the path: kept
>>> prefer_installed_pyspark(alone, environ={}) == [os.path.join(lib, "pyspark.zip")]
True
>>> odd = [None, os.path.join(lib, "pyspark.zip"), site]  # (not every entry of a path need be a string)
>>> prefer_installed_pyspark(odd, environ={}) == [None, site]
True
>>> kept = [os.path.join(lib, "pyspark.zip"), site]
>>> prefer_installed_pyspark(kept, environ={"SQLFLOW_PYSPARK_ZIP": "keep"}) == [os.path.join(lib, "pyspark.zip"), site]
True
"""
from __future__ import annotations

import os
from collections.abc import Mapping

#: the startup file's name in site-packages, and its one line (Python runs a .pth line that starts
#: with "import"): it costs a scan of the path in every process, and imports this module only in
#: the processes Spark started
PTH_NAME = "sqlflow-worker-startup.pth"
PTH_LINE = ('import sys; any(isinstance(p, str) and p.endswith("pyspark.zip") for p in sys.path) and '
            '__import__("sqlflow.worker_startup").worker_startup.prefer_installed_pyspark(sys.path)')
#: the environment variable that keeps the zip (value "keep")
OPT_OUT = "SQLFLOW_PYSPARK_ZIP"


def prefer_installed_pyspark(path: list[str], environ: Mapping[str, str] = os.environ) -> list[str]:
    """Remove from `path` (in place; returned) the zips of pyspark and py4j that Spark put ahead of
    the same packages installed in a directory of `path`. Never raises."""
    if environ.get(OPT_OUT, "").strip().lower() == "keep":
        return path
    try:
        on_path = {_same(p) for p in path if isinstance(p, str) and p and not p.endswith(".zip")}
        drop = []
        for entry in path:
            if not isinstance(entry, str):
                continue
            lib = os.path.dirname(entry)
            name = os.path.basename(entry)
            if not (name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip"))):
                continue
            package = os.path.dirname(os.path.dirname(lib))  # <site>/pyspark from <site>/pyspark/python/lib
            site = os.path.dirname(package)
            if (os.path.basename(package) != "pyspark" or os.path.basename(os.path.dirname(lib)) != "python"
                    or _same(site) not in on_path):
                continue
            twin = "pyspark" if name == "pyspark.zip" else "py4j"
            if os.path.isfile(os.path.join(site, twin, "__init__.py")):
                drop.append(entry)
        for entry in drop:
            path.remove(entry)
    except Exception:  # noqa: BLE001  (a startup hook: a failure keeps the path as Spark gave it)
        pass
    return path


def _same(p: str) -> str:
    return os.path.normcase(os.path.realpath(p))
