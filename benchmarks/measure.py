"""How the comparisons measure (benchmarks/compare.py, flink_compare.py): each side's callable run
in interleaved rounds, its wall time and the peak resident memory of the process tree."""
from __future__ import annotations

import statistics
import threading
import time


class PeakMemory:
    """Samples the resident memory of this process and its descendants in a background thread,
    except the processes in `foreign` and theirs (a reference measuring its own, as Flink's)."""

    foreign: set[int] = set()

    def __init__(self, interval: float = 0.05):
        import psutil

        self.psutil = psutil
        self.interval = interval
        self.peak_total = self.peak_workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = self.psutil.Process()
        total = workers = 0
        skip = set()
        for pid in self.foreign:
            try:
                skip |= {pid, *(c.pid for c in self.psutil.Process(pid).children(recursive=True))}
            except self.psutil.Error:
                continue
        for p in [me, *me.children(recursive=True)]:
            if p.pid in skip:
                continue
            try:
                rss = p.memory_info().rss
                name = p.name()
            except self.psutil.Error:
                continue
            total += rss
            if p.pid != me.pid and name.startswith("python"):
                workers += rss
        self.peak_total = max(self.peak_total, total)
        self.peak_workers = max(self.peak_workers, workers)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


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
