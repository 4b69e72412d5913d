"""What a benchmark result records about the run that measured it, per scenario: the commit (and
whether the tree had changes), the exact command line, the versions, the machine, its load at the
scenario's start and end, and the spread of each side's rounds. A results file that merges runs
(`--only`) keeps each scenario's own record, so every row says where it came from.

One helper for every script that writes benchmarks/results/: `run_facts` once per process, at the
start; `record` for each scenario (or row) when it has been measured."""
from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the record's key in a scenario's (or row's) results
KEY = "record"
#: what a row measured before records were kept per scenario is marked with, instead of its facts
BEFORE = "recorded before per-scenario records"
#: where a results file keeps the one header it had before per-scenario records (it described only
#: the last of the runs merged into the file)
OLD_HEADER = "header_before_per_scenario_records"
_HEADER_KEYS = ("command", "machine", "versions", "finished", "minutes", "load_average", "load_at_start",
                "measured_at", "date", "cpus", "pyspark")


def commit(repo: Path = REPO) -> str | None:
    """`git rev-parse HEAD`, with " dirty" appended when tracked files differ from it (results files
    under benchmarks/results/ aside: a run rewrites them); None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                 ":(exclude)benchmarks/results"], cwd=repo, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + (" dirty" if status.stdout.strip() else "")


def command(script: str, argv: list[str] | None) -> str:
    """The command line that reproduces the run, as typed from the repository's root.

    >>> command("compare.py", ["--only", "1,2", "--out", "/tmp/a b.json"])
    "python benchmarks/compare.py --only 1,2 --out '/tmp/a b.json'"
    """
    import sys

    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", f"benchmarks/{script}", *(shlex.quote(a) for a in args)])


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def load() -> float:
    """The load average over the last minute (the machine is shared: how busy it was)."""
    return round(os.getloadavg()[0], 2)


def machine() -> dict:
    info: dict = {"cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30)
    except ImportError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def version_of(distribution: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(distribution)
    except Exception:  # noqa: BLE001 - not installed
        return None


def versions() -> dict:
    """Python's, PySpark's and sqlflow's (the imported package's, so the checkout's own)."""
    out = {"python": platform.python_version(), "pyspark": version_of("pyspark")}
    try:
        import sqlflow

        out["sqlflow"] = sqlflow.__version__
    except ImportError:
        out["sqlflow"] = None
    return out


def run_facts(script: str, argv: list[str] | None) -> dict:
    """What every scenario of one run shares; call it once, at the start (the commit before the run
    rewrites any results file)."""
    return {"commit": commit(), "command": command(script, argv), "started": now(),
            "machine": machine(), "versions": versions()}


def spread(seconds: list[float]) -> dict:
    """The rounds' min, median and max.

    >>> spread([7.3, 16.7, 11.6])
    {'rounds': 3, 'min_s': 7.3, 'median_s': 11.6, 'max_s': 16.7}
    """
    return {"rounds": len(seconds), "min_s": min(seconds), "median_s": round(statistics.median(seconds), 3),
            "max_s": max(seconds)}


def spreads(result: dict) -> dict:
    """The spread of every side of `result` that kept its rounds (`measure`'s "seconds")."""
    return {name: spread(side["seconds"]) for name, side in result.items()
            if isinstance(side, dict) and side.get("seconds")}


def record(run: dict, load_at_start: float, result: dict | None = None, **more_versions: str | None) -> dict:
    """A scenario's record: the run's facts, the versions of the references it used
    (`more_versions`, e.g. beam=..., flink=...; None left out), the load at its start and now,
    when it finished, and the spread of each side's rounds in `result`."""
    facts = dict(run, versions={**run["versions"], **{k: v for k, v in more_versions.items() if v is not None}})
    facts.update(finished=now(), load_average=[load_at_start, load()])
    if result is not None:
        facts["spread"] = spreads(result)
    return facts


def old_header(previous: dict) -> dict:
    """The header a results file had before per-scenario records (None if none), for `previous`'s
    successor to keep under OLD_HEADER: what it said is kept, but not taken for any row's facts."""
    if OLD_HEADER in previous:
        return previous[OLD_HEADER]
    return {k: previous[k] for k in _HEADER_KEYS if k in previous}


def with_records(out: dict) -> dict:
    """`out` (a results file's content, of any age) in the per-scenario form: a header of the old
    form moves under OLD_HEADER.

    >>> with_records({"command": "python benchmarks/compare.py --only 3", "results": {"3": {}}})
    {'results': {'3': {}}, 'header_before_per_scenario_records': {'command': 'python benchmarks/compare.py --only 3'}}
    """
    header = old_header(out)
    rest = {k: v for k, v in out.items() if k not in _HEADER_KEYS and k != OLD_HEADER}
    return dict(rest, **({OLD_HEADER: header} if header else {}))


def kept_header(previous: dict | None, results: dict) -> dict:
    """{OLD_HEADER: ...} to keep in a results file while some of its `results` has no record of
    its own (they were measured before records were kept per scenario), else {}."""
    header = with_records(previous or {}).get(OLD_HEADER)
    if header and any(not isinstance(r, dict) or KEY not in r for r in results.values()):
        return {OLD_HEADER: header}
    return {}
