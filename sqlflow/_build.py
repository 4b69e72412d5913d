"""Build-time only (pyproject.toml's `[tool.setuptools.cmdclass]`): the wheel carries
`worker_startup.PTH_NAME` at its root, so installing it puts the startup file into site-packages
(sqlflow/worker_startup.py says what it does and why). An editable install does not place it
(setuptools builds those from the package directories alone): copy it by hand, as
docs/spark-internals.md, 9, says, to measure what a user's install runs."""
from __future__ import annotations

import importlib.util
import os

from setuptools.command.build_py import build_py as _build_py


def _startup():
    """sqlflow/worker_startup.py, loaded from its file: setuptools loads this module by its path,
    before the package can be imported."""
    spec = importlib.util.spec_from_file_location("_sqlflow_worker_startup",
                                                  os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "worker_startup.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class build_py(_build_py):  # (setuptools names its commands so)
    """setuptools' build_py, and the startup file written at the root of the build."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            startup = _startup()
            with open(os.path.join(self.build_lib, startup.PTH_NAME), "w", encoding="utf-8") as f:
                f.write(startup.PTH_LINE + "\n")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        extra = [] if self.editable_mode else [os.path.join(self.build_lib, _startup().PTH_NAME)]
        return list(super().get_outputs(include_bytecode)) + extra
