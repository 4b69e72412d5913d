"""Warnings to the user, at the user's line, shown every time they are raised.

Python's default action shows a warning once per (text, category, line) of the module it is
attributed to, so a second notebook cell with the same mistake (same line 1 of `__main__`) would
say nothing. `warn` gives `warnings.warn_explicit` a fresh registry each time instead: the
warning shows each time, and every filter the user set (`ignore`, `error`, `once`) still applies,
since no filter of sqlflow's is installed.
"""
from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../sqlflow


def warn(message: str, category: type[Warning]) -> None:
    """Warn `message`, attributed to the first caller outside the sqlflow package."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame = frame.f_back
    if frame is None:  # called from sqlflow only (an import): attribute it to the caller
        warnings.warn(message, category, stacklevel=2)
        return
    # no module_globals: for `python -c` code its loader is the built-in importer, which cannot
    # give the source line (warn_explicit raised ImportError there); the file name is enough
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__", "<unknown>"), registry={})
