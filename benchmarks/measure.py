"""How the comparisons measure (benchmarks/compare.py, flink_compare.py): each side's callable run
in interleaved rounds, its wall time and the peak resident memory of the process tree."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


class PeakMemory:
    """The peak resident memory of this process and its descendants, sampled every `interval`
    seconds by a Python process of its own (a thread here would take this interpreter's lock from
    the side being measured, whose driver may be doing its work in Python), except the processes
    in `foreign` and theirs (a reference measuring its own, as Flink's) and the sampler itself."""

    foreign: set[int] = set()

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak_total = self.peak_workers = 0
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "PeakMemory":
        args = [sys.executable, "-c", _SAMPLER, str(os.getpid()), str(self.interval), *map(str, self.foreign)]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":  # its first sample is taken
            raise RuntimeError(f"the memory sampler did not start (exit {self._proc.wait()})")
        return self

    def __exit__(self, *exc) -> None:
        assert self._proc is not None
        out, _ = self._proc.communicate("stop\n", timeout=60)  # one last sample, then the peaks
        self.peak_total, self.peak_workers = map(int, out.split())


#: the sampler's program: argv = the measured process's pid, the interval, the foreign pids; it
#: says "ready" after its first sample, and prints the peaks when a line arrives on stdin
_SAMPLER = """
import sys, threading, psutil
root, interval, foreign = int(sys.argv[1]), float(sys.argv[2]), {int(p) for p in sys.argv[3:]}
me = psutil.Process()
peak_total = peak_workers = 0

def sample():
    global peak_total, peak_workers
    skip = {me.pid}
    for pid in foreign:
        try:
            skip |= {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
        except psutil.Error:
            continue
    try:
        top = psutil.Process(root)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return
    total = workers = 0
    for p in procs:
        if p.pid in skip:
            continue
        try:
            rss = p.memory_info().rss
            name = p.name()
        except psutil.Error:
            continue
        total += rss
        if p.pid != root and name.startswith("python"):
            workers += rss
    peak_total, peak_workers = max(peak_total, total), max(peak_workers, workers)

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
sample()
print("ready", flush=True)
while not stop.wait(interval):
    sample()
sample()
print(peak_total, peak_workers, flush=True)
"""


WARMUP = 1  # runs of each side before the measured ones (--warmup)
#: the bounded scenarios on up to --rows rows (1, 2b, and 2 at 1M and 2M rows: a few seconds per
#: round) warm up 5 times and repeat 11 times (--repeat and --warmup override). Both sides keep
#: getting faster over their first rounds (the JVM compiling their code): at one warm-up and 3
#: rounds the medians moved by +-25% between runs (scenario 1 with the same code: 1.05x to 1.55x),
#: at 2 and 7 by +-15% (1.00x to 1.16x); 15 rounds of scenario 1 went from 0.66-0.71 s (both
#: sides) in the first rounds to 0.47-0.53 s in the last ones
SHORT_WARMUP, SHORT_REPEAT = 5, 11


def measure(sides: dict, rows: int, repeat: int, warmup: int = WARMUP) -> dict:
    """Run each side's callable `warmup` times to warm up and then `repeat` times, interleaved."""
    runs = {name: [] for name in sides}
    for i in range(repeat + warmup):
        for name, fn in sides.items():
            with PeakMemory() as memory:
                start = time.perf_counter()
                extra = fn()
                seconds = time.perf_counter() - start
            run = {"seconds": round(seconds, 3), "peak_rss_mb": round(memory.peak_total / 2**20),
                   "peak_python_workers_mb": round(memory.peak_workers / 2**20)}
            if isinstance(extra, dict):
                run.update(extra)
                if "timed_s" in run:  # the side timed its own work (Beam: the pipeline, not the process)
                    run["wall_s"], run["seconds"] = run["seconds"], run.pop("timed_s")
            if i >= warmup:
                runs[name].append(run)
            print(f"    {name}{' (warm-up)' if i < warmup else ''}: {run['seconds']} s, "
                  f"{run['peak_rss_mb']} MB", flush=True)
    out = {}
    for name, rs in runs.items():
        median = statistics.median(r["seconds"] for r in rs)
        out[name] = {"median_s": round(median, 3), "rows_per_s": round(rows / median),
                     "seconds": [r["seconds"] for r in rs],
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                     "peak_python_workers_mb": max(r["peak_python_workers_mb"] for r in rs)}
        for key in rs[0]:
            if key not in ("seconds", "peak_rss_mb", "peak_python_workers_mb"):
                out[name][key] = rs[-1][key]
    return out


def noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()
