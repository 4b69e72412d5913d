"""The `sqlflow` command's SparkSession, started the way spark-sql starts its own.

spark-sql is `spark-submit --class SparkSQLCLIDriver "$@"`: spark-submit reads
`$SPARK_CONF_DIR/spark-defaults.conf` (or `--properties-file`), applies `--master`, `--conf`
and the other spark-submit flags (`--jars`, `--packages`, `--driver-memory`, ...), and the CLI
keeps its catalog in Hive's Derby metastore `./metastore_db` and tables in `./spark-warehouse`.
The command launches Spark's JVM through the same spark-submit (PySpark's `launch_gateway`, with
the flags in PYSPARK_SUBMIT_ARGS), so every one of those means what it means to spark-sql.
Spark's defaults hold unless the user sets them (the master is `local[*]`, the session time zone
the JVM's, 200 shuffle partitions, the default state store: sqlflow sets RocksDB for each stream
it starts); only `NEEDED` is added, each unless set.

The JVM's stderr comes through a pipe: PySpark's worker chatter is dropped (`spark.log_filter`), the rest
is passed on (or dropped with -S).
"""
from __future__ import annotations

import argparse
import os
import shlex
import threading
from typing import TextIO

from ..spark.log_filter import ChatterFilter

#: spark-submit's options that take a value, as spark-sql passes them on (`--master`, `--name`
#: and `--conf` are the command's own options, passed on too); the help is spark-submit's
SUBMIT_OPTIONS = {
    "--deploy-mode": "client (the only mode of an interactive SQL shell)",
    "--jars": "comma-separated jars on the driver and executor classpaths",
    "--packages": "comma-separated maven coordinates (groupId:artifactId:version) to include",
    "--exclude-packages": "comma-separated groupId:artifactId to exclude from --packages",
    "--repositories": "comma-separated remote repositories to search for --packages",
    "--py-files": "comma-separated .zip, .egg or .py files for the Python path",
    "--files": "comma-separated files placed in the working directory of each executor",
    "--archives": "comma-separated archives extracted into the working directory of each executor",
    "--properties-file": "a file of extra properties (default: conf/spark-defaults.conf)",
    "--driver-memory": "memory of the driver (e.g. 1000M, 2G; default 1024M)",
    "--driver-java-options": "extra Java options of the driver",
    "--driver-library-path": "extra library path entries of the driver",
    "--driver-class-path": "extra class path entries of the driver",
    "--driver-cores": "cores of the driver (cluster mode only)",
    "--executor-memory": "memory per executor (e.g. 1000M, 2G; default 1G)",
    "--executor-cores": "cores per executor",
    "--num-executors": "number of executors to launch (YARN and Kubernetes)",
    "--total-executor-cores": "total cores of all executors (standalone)",
    "--proxy-user": "user to impersonate when submitting",
    "--principal": "Kerberos principal (with --keytab)",
    "--keytab": "keytab of the principal",
    "--queue": "YARN queue to submit to",
}

#: settings sqlflow's statements need, each used only if the user did not set it
NEEDED = {
    # the temporary checkpoints of the command's own streams (a SELECT over a stream) deleted
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # as spark-sql: the Hive metastore (./metastore_db) and no progress bars between the rows
    "spark.sql.catalogImplementation": "hive",
    "spark.ui.showConsoleProgress": "false",
}


#: what spark-submit sets itself for PySpark's shell, not for spark-sql: NEEDED's value holds
#: unless given with --conf
_SHELL_SETTINGS = frozenset({"spark.ui.showConsoleProgress"})


def add_submit_options(parser: argparse.ArgumentParser) -> None:
    """spark-submit's options, collected in order into `args.submit` as (flag, value) pairs."""
    group = parser.add_argument_group("spark-submit options (passed to spark-submit, as spark-sql does)")
    for flag, text in SUBMIT_OPTIONS.items():
        group.add_argument(flag, metavar="VALUE", dest="submit", action=_Pairs, default=[], help=text)


class _Pairs(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        getattr(namespace, self.dest).append((option_string, values))


def submit_args(args: argparse.Namespace) -> list[str]:
    """The spark-submit arguments of the command line, in spark-submit's own words.

    >>> ns = argparse.Namespace(master="local[1]", name="n", conf=[("a.b", "1")], submit=[("--jars", "x.jar")])
    >>> submit_args(ns)
    ['--master', 'local[1]', '--name', 'n', '--conf', 'a.b=1', '--jars', 'x.jar']
    """
    out = []
    if args.master:
        out += ["--master", args.master]
    if args.name:
        out += ["--name", args.name]
    for key, value in args.conf:
        out += ["--conf", f"{key}={value}"]
    for flag, value in args.submit:
        out += [flag, value]
    return out


def check_deploy_mode(args: argparse.Namespace) -> str | None:
    """spark-sql's refusal of cluster mode, or None."""
    for flag, value in args.submit:
        if flag == "--deploy-mode" and value.strip().lower() != "client":
            return "Cluster deploy mode is not applicable to Spark SQL shell."
    return None


def start_session(args: argparse.Namespace, *, err: TextIO, silent: bool):
    """(SparkSession, whether this call started Spark). Spark already running in this process
    (the command called from Python) is used as is: its JVM cannot take spark-submit flags."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from ..spark.session import check_java, jvm_start_error, set_environment

    if SparkContext._gateway is not None:  # PySpark's own record of a JVM it started
        builder = SparkSession.builder
        for key, value in args.conf:
            builder = builder.config(key, value)
        return builder.getOrCreate(), False
    set_environment()
    check_java()
    before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    theirs = (before or "").replace("pyspark-shell", "").strip()
    os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join(
        p for p in (theirs, shlex.join(submit_args(args)), "pyspark-shell") if p)
    read_end, write_end = os.pipe()
    copier = _pass_on(os.fdopen(read_end, "rb"), err, silent)
    try:
        gateway = launch_gateway(popen_kwargs={"stderr": write_end})
    except Exception as error:
        os.close(write_end)
        copier.join(5)  # spark-submit's own message (a bad flag, a missing package) comes first
        failed = jvm_start_error(error)
        if failed is None:
            raise
        raise failed from None
    finally:
        if before is None:
            del os.environ["PYSPARK_SUBMIT_ARGS"]
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = before
    os.close(write_end)  # the JVM holds its own copy: the copier ends when the JVM does
    defaults = gateway.jvm.org.apache.spark.SparkConf(True)  # spark-submit's view: defaults file, --conf
    conf = SparkConf()
    given = {key for key, _ in args.conf}
    for key, value in NEEDED.items():
        if key not in given and (key in _SHELL_SETTINGS or not defaults.contains(key)):
            conf.set(key, value)
    if silent:
        conf.set("spark.log.level", "ERROR")
    SparkContext(gateway=gateway, conf=conf)
    return SparkSession.builder.getOrCreate(), True


def _pass_on(stream, err: TextIO, silent: bool) -> threading.Thread:
    """A thread copying the JVM's stderr to `err`, less PySpark's worker chatter (all of it with
    -S). It reads to the end, so the JVM never blocks on a full pipe."""

    def copy() -> None:
        quiet, keep = silent, ChatterFilter()

        def write(lines: list[str]) -> None:
            nonlocal quiet
            for line in lines:
                if quiet:
                    return
                try:
                    err.write(line)
                    err.flush()
                except (OSError, ValueError):  # our stderr is closed (exit): keep draining
                    quiet = True

        for raw in iter(stream.readline, b""):
            write(keep.feed(raw.decode("utf-8", "replace")))
        write(keep.flush())

    thread = threading.Thread(target=copy, name="sqlflow-jvm-stderr", daemon=True)
    thread.start()
    return thread
