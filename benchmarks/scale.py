"""How every periodic part's cost grows with the tree, and whether a bigger tree still converges exactly.

What runs again and again whatever the traffic must stay cheap as the tree grows:
the empty level run (config and ACL sync included), the ``on_data`` watcher's
poll, the lag monitor, the offsets sync, the idle audit and the Mirror page's
API (:mod:`benchmarks.scale_parts` says which function each one is). Each is
timed on two axes, rounds alternated, medians kept:

- partitions per level: 100, 1,000 and 10,000 (topics of 10 partitions) on a
  level-1 pair (c1 <-> c2), one record per source partition copied once before any
  clock; the audit is the target's (c2);
- clusters: 2, 4 and 8 (one level, the four-cluster tree of levels 1 and 3, a
  three-level tree of pairs of pairs), 10 topics x 10 partitions on every cluster;
  levels, watchers and audited clusters summed.

Three consumer groups, idle, have committed offsets on the first 20 partitions
(``--group-partitions``) of the first cluster, which the offsets sync carries to the others.
Every tree has brokers of its own (so that no tree's topics and internal state
weigh on another's), all of an axis's trees running side by side while it is measured.

Per part, the growth exponent: the least-squares slope of log(time) against
log(size). Then convergence on the cluster axis: messages produced on every
cluster, the levels run as the tests' ``converge()`` runs them, and after each
run which messages every cluster holds (so: how many level runs, and seconds of
them, a message needs to be everywhere); every cluster must end with every
message exactly once, or the run fails. The 8-cluster tree converges once more
under its level DAGs (``dag.test()``, Spark Connect).

    python -m benchmarks.scale --partitions 100,1000,10000 --clusters 2,4,8 --rounds 3 --record
    python -m benchmarks.scale --replot benchmarks/results/<record>.json   # its .png again (matplotlib:
                                                                          # requirements-bench.txt)

Progress to stderr, the tables to stdout; ``--record`` writes
``benchmarks/results/<date>-scale.json``, ``.md`` and ``.png`` (log-log, the goals at 10,000).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from benchmarks.common import stop_on_sigterm, warm_up
from benchmarks.scale_parts import (
    Tree,
    airflow_in_process,
    audit,
    check_exact,
    convergence,
    create_topics,
    dag_convergence,
    empty_run,
    groups_consumed,
    lag,
    make_tree,
    offsets,
    one_per_partition,
    page,
    restore_state,
    save_state,
    settle,
    warm,
    watcher,
)
from mirrorflow_dev.kafka import KafkaDistribution, LocalKafka

RESULTS = Path(__file__).resolve().parent / "results"
#: Partitions per topic on the partition axis; topics per cluster and their partitions on the cluster axis.
TOPIC_PARTITIONS, TREE_TOPICS = 10, 10
#: The trees of the cluster axis (YAML under ``tree:``).
TREES = {
    2: "  level: 1\n  children: [c1, c2]",
    4: ("  level: 3\n  children:\n    - {level: 1, children: [c1, c2]}\n"
        "    - {level: 1, children: [c3, c4]}"),
    8: ("  level: 3\n  children:\n"
        "    - level: 2\n      children:\n        - {level: 1, children: [c1, c2]}\n"
        "        - {level: 1, children: [c3, c4]}\n"
        "    - level: 2\n      children:\n        - {level: 1, children: [c5, c6]}\n"
        "        - {level: 1, children: [c7, c8]}"),
}
#: (key, what, shown in ms): the timed parts, in the order each round runs them.
PARTS = (("empty_run", "empty level run", False), ("watcher", "watcher poll", True), ("lag", "lag monitor", False),
         ("offsets", "offsets sync", False), ("audit", "idle audit", False), ("page", "page API", False))
#: The goals at 10,000 partitions per level, in seconds (and no new connection per watcher poll).
GOALS = {"empty_run": 3.0, "watcher": 0.3, "lag": 15.0, "audit": 30.0, "page": 1.0}
GOAL_SIZE = 10_000


def progress(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def tables_out() -> Iterator[TextIO]:
    """This process's stdout for the tables alone: meanwhile whatever else writes there (Airflow logs to stdout,
    and so do the processes it starts) goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    with os.fdopen(os.dup(saved), "w") as tables:
        try:
            yield tables
        finally:
            tables.flush()
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


# --------------------------------------------------------------------------- the trees

@contextlib.contextmanager
def brokers(run_dir: Path, names: list[str], heap_max: str) -> Iterator[LocalKafka]:
    """Single-broker clusters for one axis, stopped on the way out (their directory kept if something failed)."""
    kafka = LocalKafka(run_dir, names=names, distribution=KafkaDistribution.fetch(), heap_max=heap_max,
                       owner_pid=os.getpid(), progress=progress)
    try:
        kafka.start()
        yield kafka
    except BaseException:
        progress(f"the brokers' data and logs are kept in {run_dir} for a look; delete it after")
        raise
    else:
        kafka.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        kafka.stop()


def pair_tree(kafka: LocalKafka, size: int, run_dir: Path, group_partitions: int) -> Tree:
    """``size`` partitions on c1 (one record each), copied to c2 before any clock; every part once, untimed."""
    prefix = f"p{size}"
    bootstraps = {c: kafka.clusters[f"{prefix}-{c}"].bootstrap for c in ("c1", "c2")}
    topics = {f"{prefix}-{i:04d}": TOPIC_PARTITIONS for i in range(max(1, size // TOPIC_PARTITIONS))}
    tree = make_tree(run_dir, f"{size:,} partitions", size, prefix, bootstraps, TREES[2], topics)
    restore_state(tree)  # none yet: the Variables of the tree set up before are cleared
    warm_up(*bootstraps.values())
    started = time.monotonic()
    create_topics(bootstraps["c1"], topics)
    written = one_per_partition(tree, "c1")
    progress(f"{tree.label}: {len(topics)} topics made and filled in {time.monotonic() - started:.0f}s")
    copied = settle(tree, progress)
    if copied != len(written):
        raise AssertionError(f"NOT EXACT: {tree.label}: the first run copied {copied} of {len(written)} records")
    groups_consumed(tree, "c1", group_partitions)
    warm(tree, progress)
    save_state(tree)
    return tree


def cluster_tree(kafka: LocalKafka, count: int, run_dir: Path, group_partitions: int) -> Tree:
    """The ``count``-cluster tree: its topics on every cluster, one record per partition each, converged exactly
    before any clock; every part once, untimed."""
    prefix = f"t{count}"
    bootstraps = {f"c{i}": kafka.clusters[f"{prefix}-c{i}"].bootstrap for i in range(1, count + 1)}
    topics = {f"{prefix}-{i:02d}": TOPIC_PARTITIONS for i in range(TREE_TOPICS)}
    conv = f"{prefix}-conv"
    tree = make_tree(run_dir, f"{count} clusters", count, prefix, bootstraps, TREES[count], {**topics, conv: 2},
                     conv)
    restore_state(tree)
    written = []
    for cluster, bootstrap in bootstraps.items():
        create_topics(bootstrap, tree.topics)
        written += one_per_partition(tree, cluster, skip=conv)
    settle(tree, progress)
    check_exact(tree, topics, written, "first copy")
    groups_consumed(tree, "c1", group_partitions)
    warm(tree, progress)
    save_state(tree)
    return tree


# --------------------------------------------------------------------------- rounds

#: Where ``--profile`` writes each tree's profiles (cProfile of the empty level run and the page, round 1).
PROFILE_DIR: Path | None = None


def _profile(tree: Tree, parts: dict[str, Callable[[], dict[str, Any]]]) -> None:
    """Each part once more under cProfile: its stats to ``PROFILE_DIR``, its 12 costliest calls to the progress."""
    import cProfile
    import io
    import pstats

    assert PROFILE_DIR is not None
    for part, run in parts.items():
        profiler = cProfile.Profile()
        profiler.runcall(run)
        path = PROFILE_DIR / f"{tree.label.replace(' ', '-').replace(',', '')}-{part}.prof"
        profiler.dump_stats(str(path))
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(12)
        progress(f"{tree.label}: {part} profiled into {path}:\n{out.getvalue()[-3000:]}")


def measure_tree(axis: str, tree: Tree, round_no: int, polls: int) -> list[dict[str, Any]]:
    """Every part once on ``tree``, in :data:`PARTS` order (the lag monitor stores the snapshot the page reads)."""
    audited = ["c2"] if axis == "partitions" else sorted(tree.bootstraps)
    restore_state(tree)
    measured: dict[str, Callable[[], dict[str, Any]]] = {
        "empty_run": lambda: empty_run(tree), "watcher": lambda: watcher(tree, polls), "lag": lambda: lag(tree),
        "offsets": lambda: offsets(tree), "audit": lambda: audit(tree, audited), "page": lambda: page(tree)}
    rows = [{"axis": axis, "size": tree.size, "round": round_no, "part": part, **measured[part]()}
            for part, _, _ in PARTS]
    if PROFILE_DIR and round_no == 0:  # after the timed parts, so the profiler's cost is in no number
        _profile(tree, {part: measured[part] for part in ("empty_run", "page")})
    save_state(tree)
    shown = ", ".join(f"{what} {_value(r['seconds'], ms)}" for r, (_, what, ms) in zip(rows, PARTS))
    progress(f"round {round_no + 1}, {tree.label}: {shown}; "
             f"{rows[1]['connections_per_poll']:.2f} new connections per watcher poll")
    return rows


def measure_rounds(axis: str, trees: list[Tree], rounds: int, polls: int) -> list[dict[str, Any]]:
    """``rounds`` rounds over the trees, the order reversed every other round."""
    rows: list[dict[str, Any]] = []
    for round_no in range(rounds):
        for tree in trees if round_no % 2 == 0 else list(reversed(trees)):
            rows += measure_tree(axis, tree, round_no, polls)
    return rows


def partition_axis(sizes: list[int], args: argparse.Namespace, run_dir: Path) -> list[dict[str, Any]]:
    names = [f"p{n}-{c}" for n in sizes for c in ("c1", "c2")]
    trees: list[Tree] = []
    with brokers(run_dir / "partitions", names, heap_max="1g") as kafka:
        try:
            for size in sizes:
                trees.append(pair_tree(kafka, size, run_dir, args.group_partitions))
            return measure_rounds("partitions", trees, args.rounds, args.polls)
        finally:
            for tree in trees:
                tree.close()


def cluster_axis(counts: list[int], args: argparse.Namespace, run_dir: Path
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any] | None]:
    """The parts by tree size, then each tree's convergence, and the 8-cluster tree's under its level DAGs."""
    trees: list[Tree] = []
    names = [f"t{n}-c{i}" for n in counts for i in range(1, n + 1)]
    with brokers(run_dir / "clusters", names, heap_max="512m") as kafka:
        try:
            warm_up(*(c.bootstrap for c in kafka.clusters.values()))
            for count in counts:
                trees.append(cluster_tree(kafka, count, run_dir, args.group_partitions))
            rows = measure_rounds("clusters", trees, args.rounds, args.polls)
            converged = [convergence(tree, args.messages, progress) for tree in trees]
            eight = next((t for t in trees if t.size == 8), None)
            dags = None if eight is None or args.no_dags else _under_dags(eight, args.messages, run_dir)
            return rows, converged, dags
        finally:
            for tree in trees:
                tree.close()


def _under_dags(tree: Tree, messages: int, run_dir: Path) -> dict[str, Any]:
    from mirrorflow.spark import driver_java_options
    from mirrorflow_dev.spark import LocalConnectServer

    server = LocalConnectServer(cores=2, run_dir=run_dir / "spark-connect",
                                conf={"spark.driver.extraJavaOptions": driver_java_options()})
    started = time.monotonic()
    server.start()
    progress(f"Spark Connect server on {server.url} in {time.monotonic() - started:.0f}s")
    try:
        return {"spark": "spark_connect", **dag_convergence(tree, messages, server.url, run_dir, progress)}
    finally:
        server.stop()


# --------------------------------------------------------------------------- summary

def medians(rows: list[dict[str, Any]], key: str = "seconds") -> dict[tuple[str, int, str], float]:
    """(axis, size, part) -> the median of ``key`` over the rounds."""
    found: dict[tuple[str, int, str], list[float]] = {}
    for row in rows:
        if key in row:
            found.setdefault((row["axis"], row["size"], row["part"]), []).append(row[key])
    return {k: statistics.median(v) for k, v in found.items()}


def exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) against log(size): 1 is linear growth, 0 none."""
    logs = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in logs}) < 2:
        return None
    return statistics.linear_regression([x for x, _ in logs], [y for _, y in logs]).slope


def exponents(med: dict[tuple[str, int, str], float]) -> dict[str, dict[str, float | None]]:
    axes = sorted({axis for axis, _, _ in med})
    return {axis: {part: exponent(sorted((s, v) for (a, s, p), v in med.items() if a == axis and p == part))
                   for part, _, _ in PARTS} for axis in axes}


def _value(seconds: float | None, ms: bool) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.1f} ms" if ms else f"{seconds:.2f} s"


def _bound(seconds: float, ms: bool) -> str:
    return f"≤ {seconds * 1000:g} ms" if ms else f"≤ {seconds:g} s"


def _goal(part: str, med: dict[tuple[str, int, str], float], connections: dict[tuple[str, int, str], float]) -> str:
    if part not in GOALS:
        return "–"
    wanted = _bound(GOALS[part], part == "watcher") + (", no new connection" if part == "watcher" else "")
    got = med.get(("partitions", GOAL_SIZE, part))
    if got is None:
        return f"{wanted} (10,000 not measured)"
    met = got <= GOALS[part] and (part != "watcher" or connections[("partitions", GOAL_SIZE, part)] == 0)
    return f"{wanted}: {'met' if met else '**not met**'}"


def axis_table(axis: str, rows: list[dict[str, Any]]) -> list[str]:
    med, conns = medians(rows), medians(rows, "connections_per_poll")
    slopes = exponents(med).get(axis, {})
    sizes = sorted({s for a, s, _ in med if a == axis})
    if not sizes:
        return []
    goal = axis == "partitions"
    head = "| part | " + " | ".join(f"{s:,}" for s in sizes) + " | exponent |" + (" goal at 10,000 |" if goal else "")
    lines = [head, "|---|" + "---:|" * (len(sizes) + 1) + ("---|" if goal else "")]
    for part, what, ms in PARTS:
        slope = slopes.get(part)
        cells = " | ".join(_value(med.get((axis, s, part)), ms) for s in sizes)
        lines.append(f"| {what} | {cells} | {'–' if slope is None else f'{slope:.2f}'} |"
                     + (f" {_goal(part, med, conns)} |" if goal else ""))
        if part == "watcher":
            cells = " | ".join(f"{conns[(axis, s, part)]:.2f}" for s in sizes)
            lines.append(f"| new connections per watcher poll | {cells} | – |" + (" 0 |" if goal else ""))
    return lines


def convergence_table(converged: list[dict[str, Any]], dags: dict[str, Any] | None) -> list[str]:
    lines = ["| tree | levels | messages | level runs until quiet | runs to reach every cluster, max (median) | "
             "seconds of level runs to reach every cluster, max | exactly once |", "|---|---:|---:|---:|---:|---:|---|"]
    for c in converged:
        lines.append(f"| {c['clusters']} clusters | {c['levels']} | {c['messages']} | {c['runs']} | "
                     f"{c['max_runs']} ({c['median_runs']:g}) | {c['max_seconds']:.2f} | yes |")
    if dags:
        lines.append(f"| 8 clusters, level DAGs (dag.test(), Spark Connect) | 3 | {dags['messages']} | {dags['runs']} "
                     f"| {dags['reached_after']} | {dags['seconds_to_reach']:.1f} (DAG runs) | yes |")
    return lines


def summarize(rows: list[dict[str, Any]], converged: list[dict[str, Any]], dags: dict[str, Any] | None,
              rounds: int) -> str:
    out = [f"# Scale: the periodic parts by tree size (medians of {rounds} round(s), alternated)", ""]
    partitions = axis_table("partitions", rows)
    if partitions:
        out += ["## Partitions per level (a level-1 pair, topics of 10 partitions; the audit: the target's)", "",
                *partitions, ""]
    clusters = axis_table("clusters", rows)
    if clusters:
        out += ["## Clusters (10 topics x 10 partitions on each; every level's run and watcher poll and every "
                "cluster's audit, summed)", "", *clusters, ""]
    if converged:
        out += ["## Convergence (new messages on every cluster, the levels run lowest first, round after round)", "",
                *convergence_table(converged, dags), ""]
    out.append("Exponent: the least-squares slope of log(time) against log(size) (1: linear, 0: flat).")
    return "\n".join(out)


# --------------------------------------------------------------------------- the record

def write_record(args: argparse.Namespace, argv: list[str], rows: list[dict[str, Any]], summary: str,
                 converged: list[dict[str, Any]], dags: dict[str, Any] | None) -> Path:
    from benchmarks.report import machine

    stem = RESULTS / f"{dt.date.today().isoformat()}-scale{'-' + args.label if args.label else ''}"
    med = medians(rows)
    stem.with_suffix(".json").write_text(json.dumps({
        "date": dt.date.today().isoformat(), "command": " ".join(["python -m benchmarks.scale", *argv]),
        "host": machine(), "rounds": args.rounds, "polls": args.polls, "goals_s": GOALS,
        "exponents": exponents(med), "convergence": converged, "dag_convergence": dags, "rows": rows,
    }, indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(f"{summary}\n")
    try:
        plot(med, stem.with_suffix(".png"))
    except ModuleNotFoundError as exc:  # the record is kept; the drawing can be made again from it
        progress(f"no plot ({exc}): pip install -r requirements-bench.txt, then --replot {stem}.json")
    return stem


def plot(med: dict[tuple[str, int, str], float], path: Path) -> Path:
    """Log-log, one panel per axis, one line per part; the goals as bars at 10,000 partitions."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = [a for a in ("partitions", "clusters") if any(k[0] == a for k in med)]
    slopes = exponents(med)
    fig, panels = plt.subplots(1, len(axes), figsize=(6.5 * len(axes), 4.6), squeeze=False)
    for ax, axis in zip(panels[0], axes):
        sizes = sorted({s for a, s, _ in med if a == axis})
        for part, what, _ in PARTS:
            points = sorted((s, v) for (a, s, p), v in med.items() if a == axis and p == part)
            slope = slopes[axis][part]
            line, = ax.plot([s for s, _ in points], [v for _, v in points], marker="o",
                            label=what + ("" if slope is None else f" (exponent {slope:.2f})"))
            if axis == "partitions" and part in GOALS:
                ax.plot([GOAL_SIZE], [GOALS[part]], marker="_", markersize=22, markeredgewidth=3,
                        color=line.get_color(), linestyle="none")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # the sizes alone on the x axis
        ax.set_xlabel("partitions per level" if axis == "partitions" else "clusters")
        ax.set_ylabel("seconds (median)")
        ax.set_title("by partitions per level (bars: the goals at 10,000)" if axis == "partitions"
                     else "by clusters (all levels, all clusters)", fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- main

def _sizes(text: str) -> list[int]:
    return sorted({int(s.replace("_", "")) for s in text.split(",") if s.strip()})


def main(argv: list[str] | None = None) -> int:
    stop_on_sigterm()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="100,1000,10000",
                        help="partitions per level, comma-separated ('': none)")
    parser.add_argument("--clusters", default="2,4,8", help="tree sizes among 2, 4 and 8, comma-separated ('': none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--polls", type=int, default=5, help="watcher polls per level and round (and again, watched)")
    parser.add_argument("--group-partitions", type=int, default=20,
                        help="partitions each of the three consumer groups has committed offsets on (0: all)")
    parser.add_argument("--messages", type=int, default=5, help="convergence: messages produced on each cluster")
    parser.add_argument("--no-dags", action="store_true", help="skip the 8-cluster convergence under the level DAGs")
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/<date>-scale.json, .md, .png")
    parser.add_argument("--label", default="", help="with --record: <date>-scale-<label>.json, .md, .png")
    parser.add_argument("--replot", metavar="JSON", help="only draw a record's .png again from its .json")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="after round 1's timed parts, profile the empty level run and the page on each tree "
                             "(cProfile stats into DIR)")
    args = parser.parse_args(argv)
    if args.profile:
        global PROFILE_DIR
        PROFILE_DIR = args.profile.resolve()
        PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    if args.replot:
        rows = json.loads(Path(args.replot).read_text())["rows"]
        progress(f"written {plot(medians(rows), Path(args.replot).with_suffix('.png'))}")
        return 0
    sizes, counts = _sizes(args.partitions), _sizes(args.clusters)
    if set(counts) - set(TREES):
        parser.error(f"--clusters: trees of {sorted(TREES)} clusters only")
    run_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-scale-"))
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    converged: list[dict[str, Any]] = []
    dags = None
    with tables_out() as tables, airflow_in_process(progress):
        if sizes:
            rows += partition_axis(sizes, args, run_dir)
        if counts:
            by_clusters, converged, dags = cluster_axis(counts, args, run_dir)
            rows += by_clusters
        summary = summarize(rows, converged, dags, args.rounds)
        print(summary, file=tables)
    shutil.rmtree(run_dir, ignore_errors=True)  # the topology files and the Spark Connect server's directory
    progress(f"done in {(time.monotonic() - started) / 60:.1f} min")
    if args.record:
        stem = write_record(args, sys.argv[1:] if argv is None else argv, rows, summary, converged, dags)
        progress(f"written {stem}.json, .md and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
