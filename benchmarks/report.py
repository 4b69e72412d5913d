"""The results of benchmarks/compare.py as the Markdown table the README shows, each row with the
run that measured it (benchmarks/provenance.py: commit, command, versions, machine, load, spread)."""
from __future__ import annotations

import json
from pathlib import Path

import flink_compare
from provenance import BEFORE, KEY, OLD_HEADER, spread, version_of, with_records

HERE = Path(__file__).resolve().parent


def add_report_option(ap) -> None:
    """A harness's `--report` flag (its results file is its `--out`)."""
    ap.add_argument("--report", action="store_true", help="measure nothing: rewrite the table (and, for the "
                    "default --out, the README's) from the results file")


def reported(ap, args, write):
    """With `--report`: the harness's `write(out, results)` of its results file, measuring nothing
    (an argparse error if there is none); None without it."""
    if not args.report:
        return None
    out = Path(args.out)
    if not out.exists():
        ap.error(f"--report: no results file {args.out}")
    return write(out, json.loads(out.read_text()))
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


def beam_version() -> str | None:
    return version_of("apache-beam")


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
    "3sf": "3sf. small batches (50 of 2,000 rows), scenario 3's query through the stateful operator (the streaming "
           "DataFrame's): vs native streaming window aggregation, update mode",
    "3d": "3d. scenario 3's query on a session with Spark's defaults (200 shuffle partitions, Spark's state store), "
          "3 files of 50 rows, written by `df.writeStream`: vs native streaming window aggregation, update mode",
    "3do": "3do. scenario 3d through the owned-sink executor (`sqlflow.start`): vs native streaming window "
           "aggregation, update mode",
    "4": "4. scenario 2: vs Apache Beam Python SDK, DirectRunner",
    "f1": "f1. fixed windows, default trigger, bounded: vs Flink SQL TUMBLE, batch mode",
    "f2": "f2. sessions, default trigger, bounded: vs Flink SQL SESSION, streaming mode over the file",
    "f3": "f3. streaming fixed windows, default trigger, finished: vs Flink SQL TUMBLE, streaming mode",
    "f4": "f4. streaming sessions, default trigger, finished: vs Flink SQL SESSION, streaming mode",
    "f3o": "f3o. scenario f3 through the owned-sink executor (foreachBatch): vs Flink SQL TUMBLE, streaming mode",
    "f4o": "f4o. scenario f4 through the owned-sink executor: vs Flink SQL SESSION, streaming mode",
    "f5": "f5. streaming ORDER BY event time (no window), finished: vs Flink SQL ORDER BY its time attribute, "
          "streaming mode",
}


def runs_of(results: dict) -> dict:
    """The runs whose records `results` holds, in the order of the scenarios, each named by a letter:
    {(commit, command, started): "a", ...}. Scenario 5's sizes have no record of their own."""
    names: dict = {}
    for r in results.values():
        rec = r.get(KEY)
        if rec:
            names.setdefault(run_id(rec), "abcdefghijklmnopqrstuvwxyz"[len(names) % 26])
    return names


def run_id(rec: dict) -> tuple:
    return rec.get("commit"), rec.get("command"), rec.get("started")


def timing(side: dict) -> str:
    """A side's median with the spread of its rounds (from the rounds it kept)."""
    s = spread(side["seconds"]) if side.get("seconds") else None
    rounds = ("" if s is None else "; 1 round" if s["rounds"] == 1 else
              f"; {s['rounds']} rounds {s['min_s']}-{s['max_s']} s")
    return f"{side['rows_per_s']:,} rows/s ({side['median_s']} s{rounds})"


def run_cell(r: dict, runs: dict) -> str:
    """Which run measured a row and the machine's load over its scenario (start to end)."""
    rec = r.get(KEY)
    if not rec:
        return BEFORE
    extra = "".join(f"; {name.capitalize()} {rec['versions'][name]}" for name in ("beam", "flink")
                    if rec["versions"].get(name))
    return f"{runs[run_id(rec)]}; load {rec['load_average'][0]} to {rec['load_average'][1]}{extra}"


def run_notes(out: dict, runs: dict) -> list[str]:
    """The footnote: each run the table combines, and what is known of the rows recorded before."""
    lines = ["", "Runs combined in this table (each row's `record` in the results file: commit, command, "
             "versions, machine, the load average over 1 minute at the scenario's start and end, the spread of "
             "each side's rounds):", ""]
    recs = {run_id(r[KEY]): r[KEY] for r in out["results"].values() if r.get(KEY)}
    for rid, letter in runs.items():
        rec = recs[rid]
        m, v = rec["machine"], rec["versions"]
        commit = rec.get("commit") or "unknown"
        commit = commit[:12] + (" (dirty: uncommitted changes)" if commit.endswith(" dirty") else "")
        lines.append(f"- {letter}: `{rec['command']}` at commit {commit}, started {rec['started']}; Python "
                     f"{v.get('python')}, PySpark {v.get('pyspark')}, sqlflow {v.get('sqlflow')}; {m.get('cpus')} "
                     f"cores ({m.get('cpu', '?')}), {m.get('memory_gib', '?')} GiB, {m.get('platform')}.")
    if any(not r.get(KEY) for r in out["results"].values()):
        old = out.get(OLD_HEADER, {})
        said = ""
        if old.get("command"):
            load = old.get("load_average")
            said = (f" The file's one header then described only the last run merged into it: `{old['command']}`"
                    + (f", finished {old['finished']}" if old.get("finished") else "")
                    + (f", load {load[0]} at its start and {load[1]} at its end" if load else "") + ".")
        lines.append(f"- {BEFORE}: measured before each scenario kept its own record; its commit, command, "
                     f"versions and load were not recorded for the row (the rounds' spread is).{said}")
    return lines


def markdown(out: dict) -> str:
    """The README's table of a results file: one row per scenario, each saying which run measured
    it, the footnote describing those runs."""
    out = with_records(out)
    runs = runs_of(out["results"])
    lines = ["| scenario | rows | sqlflow | reference | ratio | target | met | same final values | "
             "peak memory sqlflow / reference | run, load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
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
        lines.append(f"| {name} | {r['rows']:,} | {timing(ours)} | {timing(ref)} | {r['ratio']} ({r['ratio_kind']}) | "
                     f"{r['target']} | {'yes' if r['met'] else '**no**'} | {same} | {memory} | {run_cell(r, runs)} |")
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
                  "| sqlflow / native throughput | same final values | rounds, s: sqlflow / native |",
                  "|---|---|---|---|---|---|---|"]
        for v in r["sizes"].values():
            rounds = " / ".join(f"{s['rounds']}: {s['min_s']}-{s['max_s']}" for s in
                                (v.get("sqlflow_spread"), v.get("reference_spread")) if s) or "not recorded"
            lines.append(f"| {v['rows']:,} rows | {v['sqlflow_us_per_row']} | {v['sqlflow_rows_per_s']:,} | "
                         f"{v['reference_us_per_row']} | {v['ratio']} | {'yes' if v['check_equal'] else 'NO'} | "
                         f"{rounds} |")
        lines.append(f"\nPer-row time, largest size over smallest: {r['per_row_growth']} "
                     f"(target: {r['target']}; met: {'yes' if r['met'] else '**no**'}; run: {run_cell(r, runs)}).")
    lines += run_notes(out, runs)
    return "\n".join(lines) + "\n"
