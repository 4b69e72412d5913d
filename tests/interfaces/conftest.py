"""Fixtures of the interface tests (magics, command line, pane diagrams, notebooks).

- matplotlib draws off screen (Agg) and every figure a test opened is closed after it.
- `paper`: the paper's running example as pandas frames with timestamps
  (examples/data/paper_example.csv and paper_watermark.csv, made from sqlflow/data/paper_example.json).
- `engine_figure(n)`: the panes of the paper's figure n computed by the engine (no Spark).
- `sqlflow_cli`: runs the installed `sqlflow` command in a subprocess (each run starts a JVM).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@dataclass
class Paper:
    inputs: "object"      # k, id, v, ts, arrived_at (pandas timestamps)
    watermark: "object"   # proc_time, watermark (NaT = +inf)


@pytest.fixture(scope="session")
def paper() -> Paper:
    import pandas as pd

    data = REPO_ROOT / "examples" / "data"
    inputs = pd.read_csv(data / "paper_example.csv", parse_dates=["ts", "arrived_at"])
    watermark = pd.read_csv(data / "paper_watermark.csv", parse_dates=["proc_time", "watermark"])
    return Paper(inputs, watermark)


@pytest.fixture(scope="session")
def engine_figure():
    """figure number -> (EngineResult, engine input rows, heuristic Timeline): the paper's example
    on the engine, as tests/engine/paper.py configures it (times in microseconds of the day)."""
    import json
    from importlib import resources

    import pandas as pd

    from sqlflow import ast
    from sqlflow.engine.aggregates import Aggregate
    from sqlflow.engine.plan import ARRIVAL_TIME, EVENT_TIME, EnginePlan
    from sqlflow.engine.runner import Engine
    from sqlflow.engine.watermarks import Timeline
    from sqlflow.time import HOUR, MINUTE, SECOND

    example = json.loads(resources.files("sqlflow").joinpath("data/paper_example.json").read_text())

    def clock(text):
        h, m, s = map(int, text.split(":"))
        return (h * 3600 + m * 60 + s) * SECOND

    ev = example["inputs"]["events"]
    rows = pd.DataFrame({"k": [e["key"] for e in ev], "v": [e["value"] for e in ev],
                         EVENT_TIME: [clock(e["event_time"]) for e in ev],
                         ARRIVAL_TIME: [clock(e["proc_time"]) for e in ev]})
    steps = example["inputs"]["watermarks"]
    timeline = Timeline.from_steps([clock(s["proc_time"]) for s in steps],
                                   [2**63 - 1 if s["watermark"] == "+inf" else clock(s["watermark"])
                                    for s in steps])
    D = ast.Duration
    early_late = ast.Sequence((ast.RepeatUntil(ast.Period(D(MINUTE)), ast.Watermark()),
                               ast.Repeat(ast.Watermark())))
    A, DISC = ast.AccumulationMode.ACCUMULATING, ast.AccumulationMode.DISCARDING
    RETR = ast.AccumulationMode.ACCUMULATING_AND_RETRACTING
    two = ast.Fixed(D(2 * MINUTE))
    configs = {
        6: (ast.Global(), None, A, False),
        7: (ast.Global(), ast.Repeat(ast.Period(D(MINUTE))), A, True),
        8: (ast.Global(), ast.Repeat(ast.Period(D(MINUTE))), DISC, True),
        9: (ast.Global(), ast.Repeat(ast.Count(2)), DISC, True),
        10: (two, None, A, False),
        12: (two, None, A, True),
        13: (two, early_late, A, True),
        14: (ast.Sessions(D(MINUTE)), early_late, RETR, True),
    }

    def run(n):
        window, trigger, mode, replay = configs[n]
        windowing = ast.Windowing(ast.WindowClause(window), trigger, ast.AllowedLateness(D(HOUR)), ast.Emit(mode))
        plan = EnginePlan(windowing, (Aggregate("sum", "v", "total"),), keys=("k",))
        return Engine(plan).run(rows, timeline=timeline, replay=replay), rows, timeline

    return run


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(scope="session")
def sqlflow_cli(tmp_path_factory):
    """run(*args, input=None, cwd=repo root) -> CliRun: the installed `sqlflow` command."""
    exe = shutil.which("sqlflow", path=str(Path(sys.executable).parent)) or shutil.which("sqlflow")
    if exe is None:
        pytest.skip("the sqlflow command is not installed (pip install -e .)")
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYTHONUNBUFFERED"] = "1"
    scratch = tmp_path_factory.mktemp("cli")

    def run(*args, input=None, cwd=REPO_ROOT, timeout=240):
        proc = subprocess.run([exe, *args], input=input, capture_output=True, text=True, cwd=cwd,
                              env=env, timeout=timeout)
        return CliRun(proc.returncode, proc.stdout, proc.stderr)

    run.scratch = scratch
    return run


@pytest.fixture(scope="session")
def ipython(spark):
    """A real IPython shell with `%load_ext sqlflow` done and `spark` in its namespace."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "sqlflow")
    shell.user_ns["spark"] = spark
    return shell


@pytest.fixture
def magic_config(ipython):
    """Restores the SqlflowMagic defaults a test changed with %config."""
    from sqlflow.interfaces.magic import SqlflowMagic

    magics = next(c for c in ipython.configurables if isinstance(c, SqlflowMagic))
    saved = {name: getattr(magics, name) for name in magics.trait_names() if magics.trait_metadata(name, "config")}
    yield magics
    for name, value in saved.items():
        setattr(magics, name, value)
