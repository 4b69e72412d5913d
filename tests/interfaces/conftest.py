"""Fixtures of the interface tests (magics, command line, pane diagrams, notebooks).

- matplotlib draws off screen (Agg) and every figure a test opened is closed after it.
- `paper`: the paper's running example as pandas frames with timestamps
  (examples/data/paper_example.csv and paper_watermark.csv, made from sqlflow/data/paper_example.json).
- `engine_figure(n)`: the panes of the paper's figure n computed by the engine (no Spark).
- `sqlflow_cli`: runs the installed `sqlflow` command in a subprocess (each run starts a JVM);
  `spark_sql`: the real spark-sql of the pyspark wheel, for side-by-side runs;
  `spark_conf_dir(where, **settings)`: a SPARK_CONF_DIR that keeps Spark's files under `where`.
"""
from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
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
    from sqlflow.columns import ARRIVAL_TIME, EVENT_TIME
    from sqlflow.engine.plan import EnginePlan
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


def _spark_conf_dir(where: Path, **settings: str) -> Path:
    """A SPARK_CONF_DIR whose spark-defaults.conf keeps the metastore, the warehouse and derby.log
    under `where` (nothing lands in the repository) plus `settings`, as a user would configure
    spark-sql."""
    conf = where / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    lines = {
        "spark.sql.warehouse.dir": str(where / "spark-warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={where / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={where}",
        "spark.ui.enabled": "false",
        **settings,
    }
    (conf / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in lines.items()))
    return conf


@pytest.fixture(scope="session")
def spark_conf_dir():
    """spark_conf_dir(where, **settings) -> a SPARK_CONF_DIR (see _spark_conf_dir)."""
    return _spark_conf_dir


#: what Spark's JVM prints as it starts (spark-sql prints it too; a notebook's local_session
#: adds the level it sets): not about any query
SPARK_START = re.compile(r"WARNING: Using incubator modules|Using Spark's default log4j profile|"
                         r"Setting default log level|To adjust logging level|.* WARN NativeCodeLoader: |"
                         r"Setting Spark log level to ")


#: a Python warning as the warnings module prints it: `file:line: Category: message`, then the line
_PYTHON_WARNING = re.compile(r"^\S+:\d+: \w*Warning: .*\n(?:  .*\n)?", re.MULTILINE)


def _stderr_lines(text: str) -> list[str]:
    """The lines of `text` (a process's or a cell's stderr) other than Spark's start-up lines, its
    console progress bars (`[Stage 1:>   (0 + 1) / 1]` redrawn with carriage returns, which a
    session started from Python shows for any slow stage) and Python warnings (sqlflow's own
    warnings to the user)."""
    text = re.sub(r"\[Stage [^\r\n\]]*\]|\r *(?=\r)", "", text).replace("\r", "")
    text = _PYTHON_WARNING.sub("", text)
    return [line for line in text.splitlines() if not SPARK_START.match(line)]


@pytest.fixture(scope="session")
def stderr_lines():
    """stderr_lines(text) -> the lines of a stderr that are not Spark's start-up or progress bars."""
    return _stderr_lines


@pytest.fixture(scope="session")
def sqlflow_cli(tmp_path_factory):
    """run(*args, input=None, cwd=repo root, env=None) -> CliRun: the installed `sqlflow` command,
    configured through SPARK_CONF_DIR (spark-defaults.conf: metastore and warehouse in a scratch
    directory, 2 shuffle partitions, no UI), as spark-sql would be."""
    exe = shutil.which("sqlflow", path=str(Path(sys.executable).parent)) or shutil.which("sqlflow")
    if exe is None:
        pytest.fail("the sqlflow command is not installed next to this Python: install the project as the "
                    "README says (pip install -e \".[test]\")")
    scratch = tmp_path_factory.mktemp("cli")
    base = dict(os.environ)
    base.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    base["PYTHONUNBUFFERED"] = "1"
    base["SPARK_CONF_DIR"] = str(_spark_conf_dir(scratch, **{"spark.sql.shuffle.partitions": "2"}))

    def run(*args, input=None, cwd=REPO_ROOT, timeout=600, env=None):
        proc = subprocess.run([exe, *args], input=input, capture_output=True, text=True, cwd=cwd,
                              env={**base, **(env or {})}, timeout=timeout)
        return CliRun(proc.returncode, proc.stdout, proc.stderr)

    run.scratch = scratch
    run.exe = exe
    return run


@pytest.fixture(scope="session")
def spark_sql(tmp_path_factory):
    """run(*args, input=None, cwd, env=None) -> CliRun: the real spark-sql that ships in the pyspark
    wheel (bin/spark-sql), for side-by-side comparisons."""
    import pyspark

    exe = Path(pyspark.__file__).parent / "bin" / "spark-sql"
    if not exe.exists():
        pytest.skip("this pyspark build ships no bin/spark-sql, the command the CLI is compared with "
                    "(the pip wheel has it)")
    base = dict(os.environ)
    base.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    base["SPARK_HOME"] = str(exe.parent.parent)
    base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"

    def run(*args, input=None, cwd, timeout=600, env=None):
        proc = subprocess.run([str(exe), *args], input=input, capture_output=True, text=True, cwd=cwd,
                              env={**base, **(env or {})}, timeout=timeout)
        return CliRun(proc.returncode, proc.stdout, proc.stderr)

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


class Terminal:
    """The command on a pseudo-terminal: what a user typing at the prompt sees."""

    def __init__(self, args, env, cwd=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            # as from a terminal's shell: Ctrl-C interrupts (a run started in the background by a
            # non-interactive shell, e.g. `.ci/run &`, inherits SIGINT ignored, and so would Python)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.environ.update(env)
            if cwd is not None:
                os.chdir(cwd)
            os.execvp(args[0], args)
        self.buffer = b""

    def expect(self, text: str, timeout: float = 300) -> str:
        end = time.monotonic() + timeout
        while text.encode() not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                raise AssertionError(f"waited for {text!r}; got {self.buffer.decode(errors='replace')!r}")
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.buffer += chunk
        i = self.buffer.index(text.encode()) + len(text)
        seen, self.buffer = self.buffer[:i], self.buffer[i:]
        return seen.decode(errors="replace").replace("\r\n", "\n")

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 300) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                os.read(self.fd, 4096)
            except OSError:
                pass
            time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("the prompt did not exit")


@pytest.fixture
def terminal():
    """Terminal(args, env, cwd=None): a command on a pseudo-terminal, as a user at a prompt sees it."""
    return Terminal


@pytest.fixture
def sqlflow_exe() -> str:
    """The installed `sqlflow` command next to this Python (a README install puts it there)."""
    exe = os.path.join(os.path.dirname(sys.executable), "sqlflow")
    if not os.path.exists(exe):
        pytest.fail(f"the sqlflow command is not installed at {exe}: install the project as the README says")
    return exe
