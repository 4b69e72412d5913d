"""`python -m sqlflow.cli`, and console scripts installed before the command moved: the `sqlflow`
command lives in `sqlflow.interfaces.cli`."""
from __future__ import annotations

import sys

from .interfaces.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
