"""The layers (README, "How it works"), checked two ways.

1. At run time: importing every executor module (`sqlflow.engine.*`, `sqlflow.udfs.*`) in a fresh
   interpreter loads no sqlglot, no lark and no `pyspark.sql`, which Spark's Python workers would
   otherwise pay for (or lack) on every task.
2. From the source: each module's own import statements (function-local ones included, read with
   Python's `ast`) import nothing from a higher layer, nor a library its layer must not use.

Bottom to top: ast, errors, time and columns; the frontend (with the grammar) and the engine, peers
that do not import each other; the udfs, which run on executors and import only the engine; the
planner (`sqlflow.plan`: a statement's analysis and rewriting, no pyspark); the Spark integration;
the interfaces (CLI, magic, diagrams, the demo, the package's own facade).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sqlflow

#: layer -> (the modules in it, by name prefix; the layers it may import besides its own)
LAYERS: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "bottom": (("sqlflow.ast", "sqlflow.errors", "sqlflow.time", "sqlflow.columns", "sqlflow.worker_startup"),
               frozenset()),
    # setuptools' build step (pyproject.toml's cmdclass), run before the package can be imported
    "build": (("sqlflow._build",), frozenset()),
    "frontend": (("sqlflow.frontend", "sqlflow.grammar"), frozenset({"bottom"})),
    "engine": (("sqlflow.engine",), frozenset({"bottom"})),
    "udfs": (("sqlflow.udfs",), frozenset({"engine", "bottom"})),
    "plan": (("sqlflow.plan",), frozenset({"engine", "frontend", "bottom"})),
    "spark": (("sqlflow.spark",), frozenset({"plan", "udfs", "engine", "frontend", "bottom"})),
    "interfaces": (("sqlflow.cli", "sqlflow.magic", "sqlflow.diagram", "sqlflow.demo", "sqlflow.interfaces"),
                   frozenset({"spark", "plan", "udfs", "engine", "frontend", "bottom"})),
}
#: the layers that may import each library (any of its submodules)
LIBRARIES = {
    "sqlglot": frozenset({"frontend", "plan", "spark", "interfaces"}),
    "lark": frozenset({"frontend"}),
    "pyspark": frozenset({"spark", "interfaces"}),
}
#: (module, import) pairs allowed against the rules above, and why
EXCEPTIONS = {
    # The transformWithState processor must subclass pyspark's StatefulProcessor. The class is
    # built on first use (never at import), and an executor that runs it is in pyspark's own
    # transformWithState worker, which has loaded pyspark.sql already.
    ("sqlflow.udfs.tws", "pyspark.sql.streaming"),
    # The stateful operator's processor pickles its spec when it is built (on the driver), so that
    # the process Spark starts to plan a query unpickles it without importing the engine.
    ("sqlflow.udfs.tws", "pyspark"),
    # Its state schemas as StructTypes (a DDL string is a JVM round trip, udfs/operator_frames.struct_type),
    # built in its init, in that same worker.
    ("sqlflow.udfs.operator_frames", "pyspark.sql.types"),
    # Whether the process runs a Spark task (`TaskContext`, udfs/worker_gc.py): imported in a
    # worker function when the worker imported modules since it last froze them, where Spark's
    # worker has loaded pyspark already.
    ("sqlflow.udfs.worker_gc", "pyspark"),
}
#: where each package's source is: grammar/ and udfs/ ship as sqlflow.grammar and sqlflow.udfs
SOURCES = {"sqlflow": "sqlflow", "sqlflow.grammar": "grammar", "sqlflow.udfs": "udfs"}
EXECUTOR_PACKAGES = ("sqlflow.engine", "sqlflow.udfs")


def _layer(module: str) -> str | None:
    if module == "sqlflow":  # the package's __init__: the public facade
        return "interfaces"
    for layer, (prefixes, _) in LAYERS.items():
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return layer
    return None


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the project: name -> (file, is a package's __init__)."""
    found = {}
    for package, folder in SOURCES.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join([package, *parts])] = (path, is_package)
    return found


def _imports(name: str, path: Path, is_package: bool, modules) -> list[tuple[str, int]]:
    """What `name` imports (absolute module names) and where, from its import statements."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target not in modules and base == "sqlflow":
                    # `from sqlflow import sql`: the facade's lazy name resolves to its module
                    target = sqlflow._LAZY.get(alias.name) or \
                        ("sqlflow.errors" if hasattr(sqlflow.errors, alias.name) else "sqlflow")
                out.append((target if target in modules else base, node.lineno))
    return out


def _violations(name: str, imported: str) -> str | None:
    layer = _layer(name)
    if (name, imported) in EXCEPTIONS:
        return None
    top = imported.split(".")[0]
    if top in LIBRARIES:
        return None if layer in LIBRARIES[top] else f"the {layer} layer imports {top}"
    if top != "sqlflow" or imported == "sqlflow":
        return None  # the standard library and other libraries; the bare package (its version)
    other = _layer(imported)
    if other is None:
        return f"{imported} is in no layer: add it to LAYERS in tests/test_layering.py"
    if other != layer and other not in LAYERS[layer][1]:
        return f"the {layer} layer imports the {other} layer"
    return None


@pytest.fixture(scope="module")
def modules(repo_root):
    return _modules(repo_root)


def test_every_module_belongs_to_a_layer(modules):
    assert [m for m in modules if _layer(m) is None] == []


def test_no_module_imports_a_higher_layer(modules):
    found = []
    for name, (path, is_package) in modules.items():
        for imported, line in _imports(name, path, is_package, modules):
            why = _violations(name, imported)
            if why:
                found.append(f"{path}:{line}: {name} imports {imported}: {why}")
    assert found == []


def test_columns_import_nothing_from_the_project(modules):
    path, is_package = modules["sqlflow.columns"]
    assert [m for m, _ in _imports("sqlflow.columns", path, is_package, modules) if m.startswith("sqlflow")] == []


def test_the_checker_reports_each_kind_of_violation(modules, tmp_path):
    assert _violations("sqlflow.engine.runner", "sqlflow.frontend.scan") == \
        "the engine layer imports the frontend layer"
    assert _violations("sqlflow.frontend.api", "sqlflow.engine.plan") == "the frontend layer imports the engine layer"
    assert _violations("sqlflow.udfs.bucket", "sqlflow.spark.conf") == "the udfs layer imports the spark layer"
    assert _violations("sqlflow.ast", "sqlflow.frontend") == "the bottom layer imports the frontend layer"
    assert _violations("sqlflow.spark.api", "sqlflow.cli") == "the spark layer imports the interfaces layer"
    assert _violations("sqlflow.udfs.bucket", "pyspark.sql.functions") == "the udfs layer imports pyspark"
    assert _violations("sqlflow.engine.plan", "sqlglot.exp") == "the engine layer imports sqlglot"
    assert _violations("sqlflow.spark.api", "lark") == "the spark layer imports lark"
    assert _violations("sqlflow.plan.pipelines", "pyspark.sql") == "the plan layer imports pyspark"
    assert _violations("sqlflow.plan.pipelines", "sqlflow.spark.report") == "the plan layer imports the spark layer"
    assert _violations("sqlflow.plan.inputs", "sqlflow.udfs.bucket") == "the plan layer imports the udfs layer"
    assert _violations("sqlflow.engine.plan", "sqlflow.plan.inputs") == "the engine layer imports the plan layer"
    assert _violations("sqlflow.plan.inputs", "sqlflow.frontend.statement") is None
    assert _violations("sqlflow.spark.execute", "sqlflow.plan.pipelines") is None
    assert _violations("sqlflow.engine.plan", "sqlflow.nosuch") == \
        "sqlflow.nosuch is in no layer: add it to LAYERS in tests/test_layering.py"
    assert _violations("sqlflow.cli", "sqlflow.spark.api") is None
    assert _violations("sqlflow.udfs.bucket", "sqlflow.engine.runner") is None
    # relative, function-local and facade imports resolve to the module they load
    source = tmp_path / "plan.py"
    source.write_text("from . import kernels\nfrom ..time import NEG_INF\n"
                      "def f():\n    from sqlflow import sql, SqlflowError, ast\n")
    assert _imports("sqlflow.engine.plan", source, False, modules) == [
        ("sqlflow.engine.kernels", 1), ("sqlflow.time", 2),
        ("sqlflow.spark.api", 4), ("sqlflow.errors", 4), ("sqlflow.ast", 4)]


EXECUTOR_IMPORTS = """
import importlib, pkgutil, sys
for package in {packages!r}:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(info.name)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlglot", "lark")
                        or m == "pyspark.sql" or m.startswith("pyspark.sql."))
        if loaded:
            print("LOADED", info.name, loaded[:5])
            raise SystemExit(1)
        print("OK", info.name)
"""


def test_executor_modules_load_no_sqlglot_lark_or_pyspark_sql(modules, tmp_path):
    code = EXECUTOR_IMPORTS.format(packages=EXECUTOR_PACKAGES)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    imported = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("OK ")}
    assert imported == {m for m in modules if m.startswith(tuple(p + "." for p in EXECUTOR_PACKAGES))}


PLAN_IMPORTS = """
import importlib, pkgutil, sys
import sqlflow.plan
for info in pkgutil.walk_packages(sqlflow.plan.__path__, "sqlflow.plan."):
    importlib.import_module(info.name)
    print("OK", info.name)
print("PYSPARK", sorted(m for m in sys.modules if m.split(".")[0] == "pyspark")[:5])
"""


def test_plan_modules_load_no_pyspark(modules, tmp_path):
    """The planner runs without Spark: importing all of it loads no pyspark module."""
    done = subprocess.run([sys.executable, "-c", PLAN_IMPORTS], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "PYSPARK []"
    imported = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("OK ")}
    assert imported == {m for m in modules if m.startswith("sqlflow.plan.")}
