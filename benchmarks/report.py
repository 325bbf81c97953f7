"""Results of one benchmark run as JSON, Markdown and a PNG chart, and the block in docs/benchmarks.md.

``docs/benchmarks.md`` keeps its hand-written parts (the method, the goals); only the
text between :data:`START` and :data:`END` is generated: the current numbers of every
case and section, each from its newest record, and a link to every record. A record's
own ``.md`` keeps the full tables of its run.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.throughput import CONTENDERS, ratios

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- latest-run:start -->", "<!-- latest-run:end -->"
ORDER = ("producer ceiling", *CONTENDERS)


def machine() -> dict[str, Any]:
    """The machine and the versions the numbers belong to."""
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gib = None
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())[1])
        mem_gib = round(kb / 2**20, 1)
    except (OSError, TypeError):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    import confluent_kafka
    import pyspark

    from mirrorflow_dev.kafka import KAFKA_VERSION
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem_gib, "kernel": platform.release(),
        "python": platform.python_version(), "java": java[0] if java else "unknown",
        "kafka": KAFKA_VERSION, "mirrormaker2": KAFKA_VERSION, "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
        "brokers": "one KRaft broker per cluster, loopback, 1 GiB heap, same machine",
    }


def _throughput_table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| size | partitions | records | contender | seconds | records/s | MB/s | vs MM2 | vs raw | check |",
           "|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        r = ratios(row)
        for name in ORDER:
            run = row["runs"].get(name)
            if run is None:
                continue
            vs_mm2, vs_raw, copying = (r.get(name, {}).get(key) for key in ("vs_mm2", "vs_raw", "copying"))
            if "on_target" not in run:
                check = ""
            elif run["lost"] == 0 and run["duplicated"] == 0:
                check = "exact"
            else:
                check = f"**{run['lost']} lost, {run['duplicated']} duplicated**"
            extra = (f" (plan {run['plan_s']:.1f}s, copy {run['copy_s']:.1f}s = "
                     f"{run['copy_records_per_s']:,} rec/s)" if "copy_records_per_s" in run else "")
            if "rounds_s" in run:
                extra += f" median of {' / '.join(f'{x:.1f}' for x in run['rounds_s'])}"
            out.append(f"| {row['size']:,} B | {row['partitions']} | {row['records']:,} | {name} | "
                       f"{run['seconds']:.1f}{extra} | {_fmt(run['records_per_s'])} | {_fmt(run['mb_per_s'], 1)} | "
                       f"{_fmt(vs_mm2, 2)} | {_fmt(vs_raw, 2)}{_copying(copying)} | {check} |")
    return out


def _copying(ratio: float | None) -> str:
    return "" if ratio is None else f" (copying {ratio:.2f})"


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    commands = results.get("commands", [results.get("command", "make bench")])
    out = [f"Run of {results['date']} ({', '.join(f'`{c}`' for c in commands)}), "
           f"{results['total_minutes']:.0f} minutes in all.",
           "",
           f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; "
           f"Python {m['python']}; {m['java']}; Kafka and MirrorMaker 2 {m['kafka']}; PySpark {m['pyspark']}; "
           f"confluent-kafka {m['confluent_kafka']} (librdkafka {m['librdkafka']}). {m['brokers']}.", ""]
    carried = results.get("carried")
    if carried:
        out += ["Not measured again in this run, carried over from the earlier record named: "
                + ", ".join(f"{section} ({date})" for section, date in sorted(carried.items())) + ".", ""]
    rows = results.get("throughput", [])
    if rows:
        out += ["### Copy throughput", "",
                "Seconds from start to the last record committed on the target; MB = 10^6 bytes of values. "
                "`vs MM2` compares with MirrorMaker 2 at the same exactly-once setting, `vs raw` with the raw loop; "
                "`copying` compares mirrorflow's copy phase alone (its records/s once the Spark tasks copy, "
                "without the Spark start and planning) with the raw loop. `(Connect)`: the same level job from a "
                "fresh client process (as an Airflow task on a `spark_connect` connection runs it) on a Spark "
                "Connect server that is already up, instead of a `spark-submit` per micro-batch.",
                "", *_throughput_table(rows), ""]
    volume = results.get("volume", [])
    if volume:
        out += ["### Copy throughput at volume", "",
                "The same measurement with about 2 GB per case, where Spark's fixed start-up is a smaller share.",
                "", *_throughput_table(volume), ""]
    start = results.get("spark_start")
    if start:
        out += ["### Spark start-up of one micro-batch", "",
                f"A trivial two-task job submitted like the level job; medians of {start['runs']} runs.", "",
                "| entry point on | total, s | launch (spark-submit, JVM, Python), s | context up, s | first job "
                "(Python workers), s | stop, s |", "|---|---:|---:|---:|---:|---:|"]
        for variant, label in (("session", "SparkSession, JVM defaults (before 2026-11-22)"),
                               ("context", "bare SparkContext, JVM defaults (before 2026-11-23)"),
                               ("archive", "bare SparkContext, class archive and C1 (now)")):
            v = start.get(variant)
            if v is None:  # records before 2026-11-23 measured the first two only
                continue
            out.append(f"| {label} | {v['total_s']:.1f} | {v['launch_s']:.1f} | {v['context_s']:.1f} | "
                       f"{v['first_job_s']:.1f} | {v['stop_s']:.1f} |")
        out.append("")
    threads = results.get("threads")
    if threads:
        out += ["### Partitions copied at once per Spark task (`replication.copy_threads`)", "",
                "mirrorflow EOS, 1 KB messages, two Spark tasks (`local[*]` on this machine).", "",
                "| partitions | records | copy_threads | seconds | copy phase, s | records/s while copying |",
                "|---:|---:|---:|---:|---:|---:|"]
        for t in threads:
            out.append(f"| {t['partitions']} | {t['records']:,} | {t['copy_threads']} | {t['seconds']:.1f} | "
                       f"{t['copy_s']:.2f} | {t['copy_records_per_s']:,} |")
        out.append("")
    fixed = results.get("empty_batch")
    if fixed:
        mem = fixed["memory"]
        out += ["### Empty micro-batch", "",
                "| what | seconds |", "|---|---:|",
                f"| level job alone (`spark-submit` start to exit) | {fixed['spark_submit_s']:.1f} |",
                f"| of which planning | {fixed['plan_s']:.2f} |",
                f"| `mirror_level_1` DAG run under `dag.test()` | {fixed['dag_run_s']:.1f} |",
                f"| of which the `copy` task | {fixed['copy_task_s']:.1f} |",
                f"| of which the `plan` task | {fixed['plan_task_s']:.1f} |", "",
                f"Medians of {fixed['runs']} runs. Peak memory of the empty batch: JVM (driver and executor, "
                f"local mode) {mem['jvm_mib']:.0f} MiB, Python driver {mem['python_driver_mib']:.0f} MiB, "
                f"Python workers {mem['python_workers_mib']:.0f} MiB.", ""]
    if fixed and fixed.get("connect"):
        c = fixed["connect"]
        out += ["On a Spark Connect server (`spark_connect` connection), the same empty batch:", "",
                "| what | seconds |", "|---|---:|",
                f"| level job alone (a fresh client process, start to exit) | {c['client_s']:.2f} |",
                f"| of which planning | {c['plan_s']:.2f} |",
                f"| `mirror_level_1` DAG run under `dag.test()` | {c['dag_run_s']:.1f} |",
                f"| of which the `copy` task | {c['copy_task_s']:.1f} |",
                f"| of which the `plan` task | {c['plan_task_s']:.1f} |", ""]
    server = results.get("connect_server")
    if server:
        out += ["### The Spark Connect server's one-time start", "",
                f"Started once per machine (or deployment), not per micro-batch: up and listening in "
                f"{server['start_s']:.1f} s; its first job, which starts the session's Python workers, "
                f"{server['first_job_s']:.2f} s; a job of a later client of the same session (warm workers) "
                f"{server['warm_job_s']:.3f} s.", ""]
    plans = results.get("planning", [])
    if plans:
        out += ["### Planning time by partition count", "",
                "| partitions | topics | first plan (creates target topics), s | steady plan, s |",
                "|---:|---:|---:|---:|"]
        for p in plans:
            out.append(f"| {p['partitions']:,} | {p['topics']} | {p['first_s']:.2f} | {p['steady_s']:.2f} |")
        out.append("")
    lat = results.get("latency")
    if lat:
        out += ["### Latency to convergence (four clusters)", "",
                "From produce on any cluster until the message is readable on all four; messages produced in the "
                "measurement window. The level runs are started on each schedule tick as the DAGs' schedule would "
                "(one at a time, no catch-up), without the Airflow scheduler in the loop.", "",
                "| schedule | messages | median, s | p99, s | max, s | level runs (median duration, overran) |",
                "|---|---:|---:|---:|---:|---|"]
        for x in lat:
            runs = "; ".join(f"{k}: {v['runs']} runs, {v['median_run_s']} s, {v['overran']} overran"
                             for k, v in x["runs"].items())
            out.append(f"| {x['schedule']} | {x['messages']:,} | {x['median_s']} | {x['p99_s']} | {x['max_s']} "
                       f"| {runs} |")
        out.append("")
    mem = results.get("peak_memory")
    if mem:
        out += ["### Peak memory at the largest case", "",
                f"mirrorflow EOS at {mem['case']}: JVM (driver and executor, local mode) {mem['jvm_mib']:.0f} MiB, "
                f"Python driver {mem['python_driver_mib']:.0f} MiB, Python workers together "
                f"{mem['python_workers_mib']:.0f} MiB; all processes together {mem['total_mib']:.0f} MiB.", ""]
    mem = results.get("peak_memory_connect")
    if mem:
        out += [f"mirrorflow EOS (Connect) at {mem['case']}, the server's processes (they stay up between runs): "
                f"JVM {mem['jvm_mib']:.0f} MiB, Python workers together {mem['python_workers_mib']:.0f} MiB; "
                f"together {mem['total_mib']:.0f} MiB.", ""]
    return "\n".join(out)


#: mirrorflow's contenders in the docs page's compact tables, with their short column names.
SUMMARY_CONTENDERS = (("mirrorflow EOS", "EOS"), ("mirrorflow at-least-once", "at-least-once"),
                      ("mirrorflow EOS (Connect)", "EOS (Connect)"),
                      ("mirrorflow at-least-once (Connect)", "at-least-once (Connect)"))
#: The sections a record may measure, as the docs page's list of records names them.
SECTION_NAMES = {"throughput": "throughput", "volume": "volume", "spark_start": "Spark start",
                 "threads": "copy_threads", "empty_batch": "empty batch", "planning": "planning",
                 "latency": "latency"}


def records(out_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every stored record of ``out_dir`` as (name, results), oldest first (``2026-11-23`` before ``2026-11-23b``).

    Only ``make bench``'s records: the scheduler latency records (``*-scheduler.json``, no machine
    section) have a section of docs/benchmarks.md written by hand.
    """
    found = [(path.stem, json.loads(path.read_text())) for path in sorted(out_dir.glob("*.json"))]
    return [(name, rec) for name, rec in found if "machine" in rec]


def measured(record: dict[str, Any], section: str) -> bool:
    """Whether ``record`` measured ``section`` itself (not carried over from an earlier record)."""
    return bool(record.get(section)) and section not in record.get("carried", {})


def current(recs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The current numbers: each throughput and volume case, and each other section, from its newest record.

    Quick (smoke) runs are left out. Peak memory comes from the newest record that measured it at the
    largest case, so that a run of small messages only does not stand for the largest case.
    """
    full = [(name, rec) for name, rec in recs if not rec.get("quick")]
    cases: dict[tuple[bool, int, int], tuple[str, dict[str, Any]]] = {}
    sections: dict[str, tuple[str, Any]] = {}
    for name, rec in full:
        for kind in ("throughput", "volume"):
            if measured(rec, kind):
                for row in rec[kind]:
                    cases[(kind == "volume", row["size"], row["partitions"])] = (name, row)
        for section in ("empty_batch", "connect_server", "spark_start", "planning", "threads", "latency"):
            if measured(rec, section):
                sections[section] = (name, rec[section])
    for section in ("peak_memory", "peak_memory_connect"):
        found = [(_largest_bytes(rec), name) for name, rec in full if measured(rec, section)]
        if found:
            name = max(found)[1]
            sections[section] = (name, dict(full)[name][section])
    return {"cases": [(*cases[key], key[0]) for key in sorted(cases)], "sections": sections}


def _largest_bytes(record: dict[str, Any]) -> int:
    return max((row["size"] * row["records"] for row in record.get("throughput", [])), default=0)


def _size(size: int) -> str:
    return f"{size // 1000} KB" if size >= 1000 else f"{size} B"


def _case(row: dict[str, Any], volume: bool) -> str:
    return f"{_size(row['size'])} x {row['partitions']}" + (" (volume)" if volume else "")


def _seconds(row: dict[str, Any], name: str) -> str:
    run = row["runs"].get(name)
    return "–" if run is None else f"{run['seconds']:.1f}"


def _exact(row: dict[str, Any]) -> str:
    bad = [f"{name}: {run['lost']} lost, {run['duplicated']} duplicated" for name, run in row["runs"].items()
           if "on_target" in run and (run["lost"] or run["duplicated"])]
    return f"**{'; '.join(bad)}**" if bad else "yes"


def _rounds(row: dict[str, Any]) -> int:
    return max((len(run.get("rounds_s", [])) for run in row["runs"].values()), default=0) or 1


def _ratio_cell(r: dict[str, float | None] | None) -> str:
    if r is None:
        return "–"
    copying = "" if r["copying"] is None else f" ({r['copying']:.2f})"
    return f"{_fmt(r['vs_mm2'], 2)} / {_fmt(r['vs_raw'], 2)}{copying}"


def summary(out_dir: Path, docs_dir: Path) -> str:
    """The generated part of docs/benchmarks.md: the current numbers, compact, and a link to every record."""
    recs = records(out_dir)
    by_name = dict(recs)
    now = current(recs)

    def link(name: str, ext: str = "md", text: str | None = None) -> str:
        path = os.path.relpath((out_dir / f"{name}.{ext}").resolve(), docs_dir.resolve())
        return f"[{text or name}]({path})"

    mirrorflow = [short for _, short in SUMMARY_CONTENDERS]
    out = ["### Copy throughput", "",
           "Seconds from start to the last record committed on the target; medians when the case ran several "
           "rounds. Each case comes from its newest record. `exact`: every contender's copy was read back "
           "(`read_committed`) with nothing lost or duplicated.", "",
           "| case | records | raw loop | MM2 EOS | MM2 at-least-once | "
           + " | ".join(f"mirrorflow {short}" for short in mirrorflow) + " | rounds | exact | record |",
           "|---|---:|---:|---:|---:|" + "---:|" * len(mirrorflow) + "---:|---|---|"]
    for name, row, volume in now["cases"]:
        cells = [_seconds(row, c) for c in ("raw loop", "MM2 EOS", "MM2 at-least-once")]
        cells += [_seconds(row, c) for c, _ in SUMMARY_CONTENDERS]
        out.append(f"| {_case(row, volume)} | {row['records']:,} | {' | '.join(cells)} | {_rounds(row)} | "
                   f"{_exact(row)} | {link(name)} |")
    out += ["", "mirrorflow's rate against MirrorMaker 2 at the same exactly-once setting / against the raw loop "
                "(above 1: faster); in brackets its copy phase alone (without Spark's start and planning) against "
                "the raw loop.", "",
            "| case | " + " | ".join(f"mirrorflow {short}" for short in mirrorflow) + " |",
            "|---|" + "---:|" * len(mirrorflow)]
    for name, row, volume in now["cases"]:
        r = ratios(row)
        out.append(f"| {_case(row, volume)} | "
                   + " | ".join(_ratio_cell(r.get(c)) for c, _ in SUMMARY_CONTENDERS) + " |")
    out += ["", *_other_sections(now["sections"], link)]
    used = sorted({name for name, _, _ in now["cases"]} | {name for name, _ in now["sections"].values()})
    if used:
        machines: dict[str, list[str]] = {}
        for name in used:
            m = by_name[name]["machine"]
            machines.setdefault(f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB", []).append(name)
        m = by_name[used[-1]]["machine"]
        out += ["### Machines", "", *(f"- {machine}: {', '.join(names)}" for machine, names in machines.items()),
                "", f"Versions in {used[-1]}: Python {m['python']}; {m['java']}; Kafka and MirrorMaker 2 "
                    f"{m['kafka']}; PySpark {m['pyspark']}; confluent-kafka {m['confluent_kafka']} (librdkafka "
                    f"{m['librdkafka']}); {m['brokers']}.", ""]
    out += ["### Records", "",
            "Every run's full tables, newest first (the numbers as measured in JSON, the throughput chart as PNG):",
            ""]
    for name, rec in reversed(recs):
        files = [link(name, "json", "JSON")]
        if (out_dir / f"{name}.png").exists():
            files.append(link(name, "png", "chart"))
        quick = " (quick: a smoke run)" if rec.get("quick") else ""
        out.append(f"- {link(name)} ({', '.join(files)}): {_measured_sections(rec)}{quick}; "
                   f"{rec['machine']['cpu']}")
    return "\n".join(out)


def _measured_sections(rec: dict[str, Any]) -> str:
    parts = []
    for section, label in SECTION_NAMES.items():
        if not measured(rec, section):
            continue
        if section == "throughput":
            rounds = max(_rounds(row) for row in rec[section])
            label += (f" ({', '.join(_size(s) for s in sorted({row['size'] for row in rec[section]}))}"
                      + (f", {rounds} rounds)" if rounds > 1 else ")"))
        elif section == "latency":
            label += f" ({', '.join(x['schedule'] for x in rec[section])})"
        parts.append(label)
    return ", ".join(parts) or "nothing measured"


def _other_sections(sections: dict[str, tuple[str, Any]], link: Any) -> list[str]:
    rows = []
    if "empty_batch" in sections:
        name, e = sections["empty_batch"]
        rows.append(("empty micro-batch, `spark-submit`", f"{e['spark_submit_s']:.1f} s start to exit (planning "
                     f"{e['plan_s']:.2f} s); `mirror_level_1` under `dag.test()` {e['dag_run_s']:.1f} s", name))
        if e.get("connect"):
            c = e["connect"]
            rows.append(("empty micro-batch, Spark Connect", f"{c['client_s']:.2f} s, a fresh client process start "
                         f"to exit; `mirror_level_1` under `dag.test()` {c['dag_run_s']:.1f} s", name))
    if "connect_server" in sections:
        name, s = sections["connect_server"]
        rows.append(("Spark Connect server's one-time start", f"up in {s['start_s']:.1f} s; its first job (the "
                     f"session's Python workers start) {s['first_job_s']:.2f} s; a later client's job "
                     f"{s['warm_job_s']:.3f} s", name))
    if "spark_start" in sections:
        name, s = sections["spark_start"]
        v = s.get("archive") or s["context"]
        rows.append(("Spark start-up of a trivial job", f"{v['total_s']:.1f} s: launch {v['launch_s']:.1f}, "
                     f"context {v['context_s']:.1f}, first job {v['first_job_s']:.1f}, stop {v['stop_s']:.1f}",
                     name))
    if "planning" in sections:
        name, plans = sections["planning"]
        rows.append(("planning, steady (first plan, which creates the target topics)",
                     "; ".join(f"{p['partitions']:,} partitions {p['steady_s']:.2f} s ({p['first_s']:.2f} s)"
                               for p in plans), name))
    if "threads" in sections:
        name, threads = sections["threads"]
        for partitions in sorted({t["partitions"] for t in threads}):
            ts = [t for t in threads if t["partitions"] == partitions]
            rows.append((f"copy phase by `copy_threads`, EOS, 1 KB x {partitions} x {ts[0]['records']:,}",
                         ", ".join(f"{t['copy_threads']}: {t['copy_s']:.2f} s" for t in ts), name))
    if "latency" in sections:
        name, lat = sections["latency"]
        for x in lat:
            runs = ", ".join(f"{level} {v['median_run_s']} s" for level, v in x["runs"].items())
            rows.append((f"latency to convergence, four clusters, schedule {x['schedule']}",
                         f"median {x['median_s']} s, p99 {x['p99_s']} s (median run: {runs})", name))
    for section, label in (("peak_memory", "peak memory, `spark-submit`"),
                           ("peak_memory_connect", "peak memory, the Connect server's processes")):
        if section in sections:
            name, m = sections[section]
            driver = f", Python driver {m['python_driver_mib']:.0f}" if m.get("python_driver_mib") else ""
            rows.append((label, f"{m['total_mib']:.0f} MiB, EOS at {m['case']} (JVM {m['jvm_mib']:.0f}{driver}, "
                                f"Python workers {m['python_workers_mib']:.0f})", name))
    if not rows:
        return []
    return ["### Other measurements", "", "| what | measured | record |", "|---|---|---|",
            *(f"| {what} | {value} | {link(name)} |" for what, value, name in rows), ""]


def chart(results: dict[str, Any], path: Path) -> Path | None:
    rows = results.get("throughput", [])
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["size"] for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.2), squeeze=False)
    names = [n for n in ORDER if any(n in r["runs"] for r in rows)]
    width = 0.8 / len(names)
    for ax, size in zip(axes[0], sizes):
        cases = [r for r in rows if r["size"] == size]
        for i, name in enumerate(names):
            xs = [j + i * width for j in range(len(cases))]
            ys = [c["runs"].get(name, {}).get("mb_per_s", 0) for c in cases]
            ax.bar(xs, ys, width, label=name)
        ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(cases))])
        ax.set_xticklabels([f"{c['partitions']} part." for c in cases])
        ax.set_title(f"{size:,} B messages")
        ax.set_ylabel("MB/s")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    fig.suptitle(f"Copy throughput, {results['date']} ({results['machine']['cores']} cores, one machine)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def merge_same_day(results: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """This run's sections on top of an earlier run of the same day (sections run separately make one record)."""
    path = out_dir / f"{results['date']}.json"
    if not path.exists():
        return {**results, "commands": [results["command"]], "minutes": {results["command"]: results["total_minutes"]}}
    earlier = json.loads(path.read_text())
    merged = {**earlier, **{k: v for k, v in results.items() if k not in ("command", "total_minutes")}}
    for section in ("throughput", "volume"):  # contenders run separately: one case, all of their runs
        if section in earlier and section in results:
            merged[section] = _merge_cases(earlier[section], results[section])
    merged["commands"] = [*earlier.get("commands", [earlier.get("command", "?")]), results["command"]]
    merged["minutes"] = {**earlier.get("minutes", {}), results["command"]: results["total_minutes"]}
    merged["total_minutes"] = round(sum(merged["minutes"].values()), 1)
    carried = {k: v for k, v in merged.get("carried", {}).items() if k not in results}  # measured now
    if carried:
        merged["carried"] = carried
    else:
        merged.pop("carried", None)
    return merged


def _merge_cases(earlier: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases of both runs; a case in both keeps the earlier run's contenders that this run did not run."""
    key = lambda case: (case["size"], case["partitions"], case["records"])  # noqa: E731
    cases = {key(c): c for c in earlier}
    for case in now:
        old = cases.get(key(case))
        cases[key(case)] = case if old is None else {**case, "runs": {**old["runs"], **case["runs"]}}
    return sorted(cases.values(), key=key)


def carry(results: dict[str, Any], earlier_path: Path, sections: tuple[str, ...]) -> dict[str, Any]:
    """Sections this run did not measure, taken from an earlier record and marked as such."""
    earlier = json.loads(earlier_path.read_text())
    carried = dict(results.get("carried", {}))
    for section in sections:
        if section not in results and section in earlier:
            results[section] = earlier[section]
            carried[section] = earlier.get("carried", {}).get(section, earlier["date"])
    if carried:
        results["carried"] = carried
    return results


def write(results: dict[str, Any], out_dir: Path,
          docs: Path | None = REPO / "docs" / "benchmarks.md") -> dict[str, Path | None]:
    """Write the record's JSON, Markdown and chart; regenerate the block of ``docs`` (unless None).

    The block holds the current numbers of every record in ``out_dir`` (:func:`summary`), not this run's
    tables alone: a run that measures a few cases updates those and keeps the others' newest numbers.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = results["date"]
    json_path = out_dir / f"{stem}.json"
    json_path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    md = markdown(results)
    md_path = out_dir / f"{stem}.md"
    md_path.write_text(f"# Benchmark run {stem}\n\n{md}\n")
    png = chart(results, out_dir / f"{stem}.png")
    if docs is None:
        return {"json": json_path, "markdown": md_path, "png": png, "docs": None}
    block = summary(out_dir, docs.parent)
    text = docs.read_text() if docs.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        raise ValueError(f"{docs} lacks the markers {START} / {END}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    docs.write_text(f"{head}{START}\n{block}\n{END}{tail}")
    return {"json": json_path, "markdown": md_path, "png": png, "docs": docs}


if __name__ == "__main__":  # re-render a stored run: python -m benchmarks.report benchmarks/results/<date>.json
    data = json.loads(Path(sys.argv[1]).read_text())
    print(write(data, Path(sys.argv[1]).parent))
