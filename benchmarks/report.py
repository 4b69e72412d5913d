"""The results of benchmarks/compare.py as the Markdown table the README shows, with the machine
and versions they were measured on."""
from __future__ import annotations

import os
import platform
from pathlib import Path

import flink_compare

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
TABLE_BEGIN, TABLE_END = "<!-- benchmarks/results/compare.md: begin -->", "<!-- benchmarks/results/compare.md: end -->"


def readme_with(readme: str, table: str, results: str = "compare.md") -> str:
    """`readme` with `table` between the two markers of benchmarks/results/<results> (the table
    is rewritten by every run).

    >>> readme_with(f"a\\n{TABLE_BEGIN}\\nold\\n{TABLE_END}\\nb\\n", "new\\n").splitlines()[1:4]
    ['<!-- benchmarks/results/compare.md: begin -->', 'new', '<!-- benchmarks/results/compare.md: end -->']
    """
    begin_marker = f"<!-- benchmarks/results/{results}: begin -->"
    end_marker = f"<!-- benchmarks/results/{results}: end -->"
    head, begin, rest = readme.partition(begin_marker)
    _, end, tail = rest.partition(end_marker)
    if not begin or not end:
        raise ValueError(f"README.md has no {begin_marker} ... {end_marker} region for the table")
    return f"{head}{begin_marker}\n{table}{end_marker}{tail}"


def machine() -> dict:
    info = {"cpus": os.cpu_count(), "platform": platform.platform()}
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


def beam_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("apache-beam")
    except Exception:  # noqa: BLE001 - not installed
        return None


NAMES = {
    "1": "1. fixed windows, default trigger, bounded: vs hand-written `groupBy(window(...))`",
    "2": "2. sessions, early/late firings, accumulating and retracting, replayed: vs native `session_window`",
    "2p": "2p. scenario 2, then a replayed hourly window over the sessions' output time (two stages): vs native "
          "`session_window`, then `window()` over each session's end",
    "2b": "2b. sessions, default trigger, bounded: vs native `session_window`",
    "3": "3. streaming fixed windows, early and late firings: vs native streaming window aggregation, update mode",
    "3b": "3b. streaming fixed windows, default trigger, sqlflow's stateful operator: vs native streaming window "
          "aggregation, append mode",
    "3c": "3c. streaming sessions, early firings every second, late firings, retracting, 30m lateness: vs native "
          "streaming `session_window` (final sessions only), append mode",
    "3o": "3o. scenario 3 through the owned-sink executor (foreachBatch): vs native streaming window "
          "aggregation, update mode",
    "3co": "3co. scenario 3c through the owned-sink executor: vs native streaming `session_window`, append mode",
    "3s": "3s. small batches (50 of 2,000 rows), scenario 3's query through the owned-sink executor: vs native "
          "streaming window aggregation, update mode",
    "3d": "3d. scenario 3's query on a session with Spark's defaults (200 shuffle partitions, Spark's state store), "
          "3 files of 50 rows, written by `df.writeStream`: vs native streaming window aggregation, update mode",
    "4": "4. scenario 2: vs Apache Beam Python SDK, DirectRunner",
    "f1": "f1. fixed windows, default trigger, bounded: vs Flink SQL TUMBLE, batch mode",
    "f2": "f2. sessions, default trigger, bounded: vs Flink SQL SESSION, streaming mode over the file",
    "f3": "f3. streaming fixed windows, default trigger, finished: vs Flink SQL TUMBLE, streaming mode",
    "f4": "f4. streaming sessions, default trigger, finished: vs Flink SQL SESSION, streaming mode",
}


def markdown(out: dict) -> str:
    m = out["machine"]
    lines = [f"Machine: {m.get('cpus')} cores ({m.get('cpu', '?')}), {m.get('memory_gib', '?')} GiB, "
             f"{m['platform']}; Python {out['versions']['python']}, PySpark {out['versions']['pyspark']}, "
             f"Beam {out['versions']['beam']}, Flink {out['versions'].get('flink')}. Command: "
             f"`{out['command'].strip()}` ({out['minutes']} minutes, {out['finished']}"
             + (f"; load average over 1 minute {out['load_average'][0]} at the start, {out['load_average'][1]} at the end"
                if out.get("load_average") else "") + ").", "",
             "| scenario | rows | sqlflow | reference | ratio | target | met | same final values | peak memory sqlflow / reference |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, name in NAMES.items():
        r = out["results"].get(key)
        if not r:
            continue
        ours, ref = r["sqlflow"], r["reference"]
        own = ref.get("beam_peak_rss_mb") or ref.get("flink_peak_rss_mb")  # a reference in its own process
        memory = f"{ours['peak_rss_mb']:,} / {own or ref['peak_rss_mb']:,} MB"
        check = r.get("check")
        same = "n/a" if check is None else ("yes" if check["equal"] else
                                            f"NO ({check['only_sqlflow']} / {check['only_reference']} differ)")
        lines.append(f"| {name} | {r['rows']:,} | {ours['rows_per_s']:,} rows/s ({ours['median_s']} s) | "
                     f"{ref['rows_per_s']:,} rows/s ({ref['median_s']} s) | {r['ratio']} ({r['ratio_kind']}) | "
                     f"{r['target']} | {'yes' if r['met'] else '**no**'} | {same} | {memory} |")
    floor = out["results"].get("2", {}).get("floor")
    if floor:
        lines += ["", f"Scenario 2's floor (`replay_floor` in benchmarks/compare.py, same rounds): the global "
                  f"watermark pass {floor['floor_watermark_pass']} s + handing the rows to the Python workers in "
                  f"their buckets {floor['floor_bucket_transfer']} s = {floor['total_s']} s, "
                  f"{floor['share_of_reference']:.0%} of the native reference's time, before sqlflow's engine "
                  f"computes a single pane."]
    free = out["results"].get("2", {}).get("engine_free")
    if free:
        lines += ["", f"Scenario 2 with a zero-cost engine (`engine_free`: every bucket job yields the output the "
                  f"engine computed for its bucket before, so all the rest runs): {free['median_s']} s, "
                  f"{free['ratio']}x the reference's throughput; the engine's own share of sqlflow's time: "
                  f"{free['engine_s']} s."]
    single = out["results"].get("2p", {}).get("single_stage")
    if single:
        lines += ["", f"Scenario 2p's first stage alone (scenario 2's query, same rounds): {single['median_s']} s; "
                  f"the two-stage pipeline takes {single['stage_two_overhead']}x its time (the first stage runs once, "
                  f"kept; the second collects its holds for their output watermark and replays its panes, "
                  f"spread over buckets by hour)."]
    lines += flink_compare.notes(out["results"])
    if "5" in out["results"]:
        r = out["results"]["5"]
        lines += ["", "| scenario 5: scenario 2 at | sqlflow µs/row | sqlflow rows/s | native `session_window` µs/row "
                  "| sqlflow / native throughput | same final values |", "|---|---|---|---|---|---|"]
        for v in r["sizes"].values():
            lines.append(f"| {v['rows']:,} rows | {v['sqlflow_us_per_row']} | {v['sqlflow_rows_per_s']:,} | "
                         f"{v['reference_us_per_row']} | {v['ratio']} | {'yes' if v['check_equal'] else 'NO'} |")
        lines.append(f"\nPer-row time, largest size over smallest: {r['per_row_growth']} "
                     f"(target: {r['target']}; met: {'yes' if r['met'] else '**no**'}).")
    return "\n".join(lines) + "\n"
