"""The engine's face (`sqlflow/engine/__init__.py`): what other layers use of the engine they import
from `sqlflow.engine` itself, loaded on first use; and no module imports another's private names."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import sqlflow.engine as engine

ROOT = Path(__file__).resolve().parents[2]


def test_every_name_of_the_face_is_its_modules_own():
    for name in engine.__all__:
        value = getattr(engine, name)
        module = importlib.import_module(f"sqlflow.engine.{engine._FACE[name]}")
        assert getattr(module, name) is value, name
    assert set(engine.__all__) <= set(dir(engine))


def test_what_mypy_sees_of_the_face_is_the_face():
    """The TYPE_CHECKING imports (what mypy reads, the face being lazy) name each module of _FACE."""
    tree = ast.parse((ROOT / "sqlflow" / "engine" / "__init__.py").read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in guarded.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}
    assert seen == engine._FACE


def test_an_unknown_name_is_an_attribute_error():
    try:
        engine.nosuch  # noqa: B018
    except AttributeError as e:
        assert str(e) == "module 'sqlflow.engine' has no attribute 'nosuch'"
    else:
        raise AssertionError("no error")


def test_importing_the_face_loads_no_engine_module():
    """Executors import the package; each job pays only for the modules it uses."""
    code = ("import sys, sqlflow.engine; "
            "print(sorted(m for m in sys.modules if m.startswith('sqlflow.engine.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    assert done.stdout.strip() == "[]"


def _import_froms(folder: str):
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                yield path.relative_to(ROOT), node


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = list(path.with_suffix("").parts)
    parts = parts[:len(parts) - node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def test_the_spark_side_and_the_interfaces_import_the_engine_through_its_face():
    found = [f"{path}:{node.lineno}: {_absolute(path, node)}"
             for folder in ("sqlflow/spark", "sqlflow/interfaces", "sqlflow/diagram")
             for path, node in _import_froms(folder)
             if _absolute(path, node).startswith("sqlflow.engine.")]
    assert found == []


def test_no_module_imports_the_private_names_of_another():
    found = [f"{path}:{node.lineno}: {alias.name}"
             for folder in ("sqlflow", "udfs", "grammar")
             for path, node in _import_froms(folder)
             for alias in node.names
             if alias.name.startswith("_") and not alias.name.startswith("__")
             and _absolute(path, node).split(".")[0] in ("sqlflow", "udfs")]
    assert found == []
