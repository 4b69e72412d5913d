"""Does master local-cluster[2,1,1024] work with pip-installed pyspark? Executors are separate
JVMs: which Python do their workers run, and do they import sqlflow?

Usage: python local_cluster.py [--spark-home]  (the flag sets SPARK_HOME to the pyspark package)
"""
from __future__ import annotations

import json
import os
import sys
import time

import pyspark

if "--spark-home" in sys.argv:
    os.environ["SPARK_HOME"] = os.path.dirname(pyspark.__file__)

from _common import spark  # noqa: E402


def probe(it):
    import socket

    import pandas as pd
    from sqlflow.udfs.probe import where

    for df in it:
        info = where()
        info["host"] = socket.gethostname()
        yield pd.DataFrame({"info": [json.dumps(info)] * len(df)})


def main():
    print("SPARK_HOME =", os.environ.get("SPARK_HOME"))
    t0 = time.time()
    s = spark(**{"spark.master": "local-cluster[2,1,1024]"})
    print(f"session up in {time.time() - t0:.1f}s, master {s.sparkContext.master}")
    df = s.range(8).repartition(4).mapInPandas(probe, "info string")
    rows = {r.info for r in df.collect()}
    for r in sorted(rows):
        print("worker:", r)
    execs = s.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    print("block managers (driver + executors):", execs, "driver pid", os.getpid())
    import subprocess

    ps = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout.splitlines()
    for line in ps:
        if "CoarseGrainedExecutorBackend" in line and "grep" not in line:
            pid, ppid, *args = line.split()
            print(f"executor JVM pid {pid} (parent {ppid}): ...{' '.join(args)[-120:]}")
    s.stop()


if __name__ == "__main__":
    main()
