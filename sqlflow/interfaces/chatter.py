"""PySpark's worker chatter: lines Spark prints about the internals of sqlflow's own queries.

They are not the user's business and push the rows and errors off the screen (a notebook cell,
the command's stderr), so the interfaces leave them out at the default log level:

- the transformWithStateInPandas driver worker prints each step of its start ("... Python
  worker finish init stage of Python runner. Received UDF from JVM: ...") with a blank line after;
- Spark warns about every temporary checkpoint directory (memory and console sinks, a SELECT
  over a stream), that AQE is off in streaming queries, and that a job group it cancels at the
  end of an availableNow stream has no jobs left;
- the state store warns when a timer it deletes is already gone, and its server when the Python
  side closes its socket.

The command reads the JVM's stderr through a pipe and drops these lines (`ChatterFilter`); in a
notebook, where Spark was started by someone else, `quiet(spark)` drops them inside the JVM.

>>> keep = ChatterFilter()
>>> [keep(line) for line in ["Streaming TransformWithStateInPandas Python worker finish init stage.\\n", "\\n",
...                          "26/01/01 12:00:00 WARN Something: the user's concern\\n", "\\n"]]
[False, False, True, True]
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading

#: what a chatter line contains
PATTERNS = (
    "TransformWithStateInPandas Python worker",
    "TransformWithStateInPySpark Python worker",
    "Temporary checkpoint location created which is deleted normally",
    "Failed to delete timer",
    "No more data to read from the socket",
    "is not supported in streaming DataFrames/Datasets and will be disabled",
    "Disabling AQE since AQE is not supported in stateful workloads",
    "Cannot find active jobs for it",
)
_CHATTER = re.compile("|".join(re.escape(p) for p in PATTERNS))


def is_chatter(line: str) -> bool:
    """Whether one line is chatter (see the module's docstring)."""
    return _CHATTER.search(line) is not None


class ChatterFilter:
    """keep(line): False for chatter and for the blank line the worker prints after each."""

    def __init__(self) -> None:
        self._after_chatter = False

    def __call__(self, line: str) -> bool:
        if is_chatter(line):
            self._after_chatter = True
            return False
        if self._after_chatter and not line.strip():
            return False
        self._after_chatter = False
        return True


#: a JVM system property set once the JVM's chatter is quieted (so it is done once per JVM)
_QUIETED = "sqlflow.chatter.quieted"


def quiet(spark) -> None:
    """Drop the chatter of the JVM behind `spark` at its source, once per JVM: a log4j filter
    (Spark's log lines), and System.err (where Spark copies its Python workers' output) read
    through a pipe by a thread that passes on all but the chatter to this process's stderr
    (a notebook cell). Best effort: a JVM this cannot reach (Spark Connect) is left alone."""
    try:
        jvm = spark._jvm
        system = jvm.java.lang.System
        if system.getProperty(_QUIETED) is not None:
            return
        system.setProperty(_QUIETED, "true")
        _filter_log(jvm, spark.sparkContext._gateway)
        if hasattr(os, "mkfifo"):
            _filter_system_err(jvm)
    except Exception:  # noqa: BLE001 - quieter output is a nicety, never a failure
        pass


def _filter_log(jvm, gateway) -> None:
    log4j = jvm.org.apache.logging.log4j
    result = log4j.core.Filter.Result
    pattern = "(?s).*(" + "|".join(re.escape(p) for p in PATTERNS) + ").*"
    deny = log4j.core.filter.RegexFilter.createFilter(pattern, gateway.new_array(jvm.java.lang.String, 0),
                                                      True, result.DENY, result.NEUTRAL)
    context = log4j.LogManager.getContext(False)
    context.getConfiguration().addFilter(deny)
    context.updateLoggers()


def _filter_system_err(jvm) -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="sqlflow-stderr-"), "jvm-stderr")
    os.mkfifo(path)

    def copy() -> None:
        keep = ChatterFilter()
        with open(path, "rb") as fifo:  # opens once the JVM opens its end
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
            for raw in fifo:  # until the JVM exits: it never blocks on a full pipe
                line = raw.decode("utf-8", "replace")
                if keep(line):
                    try:
                        sys.stderr.write(line)
                        sys.stderr.flush()
                    except Exception:  # noqa: BLE001 - keep draining whatever stderr does
                        pass

    threading.Thread(target=copy, name="sqlflow-jvm-system-err", daemon=True).start()
    stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(path), True, "UTF-8")
    jvm.java.lang.System.setErr(stream)
