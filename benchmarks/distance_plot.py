"""The distance records as one figure: every measured cost against the round trip to the far cluster(s).

It reads the records the distance benchmarks wrote and draws four panels, medians
per round trip:

- copy throughput, 8 partitions (``benchmarks.distance``, ``--far src`` and ``--far dst``):
  mirrorflow and MirrorMaker 2 exactly once, 1 KB and 10 KB;
- the empty level run (the same records), with the goal (2x its loopback time);
- a planned failover (``benchmarks.failover_distance``): mirrorflow to and from the far
  cluster, MirrorMaker 2's group sync, and the record before the scans shared a reader;
- ``on_data`` latency through the demo's scheduler (``benchmarks.scheduler_latency --rtts``):
  median and p99, with the goal set for loopback (15 s).

    python -m benchmarks.distance_plot --out benchmarks/results/2026-11-30-distance.png \\
        --copy 2026-11-29-distance-src 2026-11-29-distance-dst \\
        --failover 2026-11-30-failover-distance-before 2026-11-30-failover-distance \\
        --ondata 2026-11-30-ondata-distance
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"{name}.json").read_text())


def _medians(rows: list[dict[str, Any]], contender: str, key: str, size: int | None = None
             ) -> list[tuple[float, float]]:
    by_rtt: dict[float, list[float]] = {}
    for r in rows:
        if r["contender"] == contender and (size is None or r.get("size") == size):
            by_rtt.setdefault(r["rtt_ms"], []).append(r[key])
    return sorted((rtt, statistics.median(v)) for rtt, v in by_rtt.items())


def _line(ax: Any, points: list[tuple[float, float]], label: str, **style: Any) -> None:
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label, **style)


def plot(copy: list[str], failover: list[str], ondata: list[str], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((tput, empty), (fo, od)) = plt.subplots(2, 2, figsize=(12, 8.5))
    for name in copy:
        record = _load(name)
        far, rows = record["far"], record["rows"]
        for size, dash in ((1000, "-"), (10000, "--")):
            _line(tput, _medians(rows, "mirrorflow", "mb_per_s", size), f"mirrorflow {size // 1000} KB, {far} far",
                  linestyle=dash)
            _line(tput, _medians(rows, "mm2 eos", "mb_per_s", size), f"MirrorMaker 2 {size // 1000} KB, {far} far",
                  linestyle=dash, alpha=0.6)
        points = _medians(rows, "empty batch", "seconds")
        _line(empty, points, f"empty level run, {far} far")
        if points:
            empty.plot([p[0] for p in points], [2 * points[0][1]] * len(points), linestyle=":",
                       label=f"goal: 2x its loopback time ({far} far)")
    tput.set_yscale("log")
    tput.set_title("copy throughput, 8 partitions, exactly once (MB/s)", fontsize=10)
    empty.set_title("an empty level run (s)", fontsize=10)
    for name in failover:
        rows = _load(name)["rows"]
        before = name.endswith("-before")
        for contender in ("mirrorflow to far", "mirrorflow from far", "mm2 to far"):
            if before and contender.startswith("mm2"):
                continue
            _line(fo, _medians(rows, contender, "seconds"),
                  contender.replace("mm2", "MirrorMaker 2 group sync") + (" (before: a reader per scan)"
                                                                          if before else ""),
                  linestyle="--" if before else "-", alpha=0.5 if before else 1.0)
    fo.set_title("a planned failover, 8 partitions (s)", fontsize=10)
    for name in ondata:
        cases = [r for r in _load(name)["scheduler_latency"] if "error" not in r and r.get("rtt_ms") is not None]
        for key, label in (("median_s", "median"), ("p99_s", "p99")):
            _line(od, sorted((r["rtt_ms"], r[key]) for r in cases),
                  f"on_data {label}, demo, {'+'.join(cases[0]['far']) if cases else ''} far")
        if cases:
            od.axhline(15.0, linestyle=":", label="goal p99 (set for loopback): 15 s")
    od.set_title("a message reaching all four clusters, on_data (s)", fontsize=10)
    for ax in (tput, empty, fo, od):
        ax.set_xlabel("round trip to the far cluster (ms)")
        ax.set_xticks([0, 50, 100])
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.distance_plot", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--copy", nargs="*", default=[], help="records of benchmarks.distance (names, no suffix)")
    parser.add_argument("--failover", nargs="*", default=[], help="records of benchmarks.failover_distance")
    parser.add_argument("--ondata", nargs="*", default=[], help="records of benchmarks.scheduler_latency --rtts")
    args = parser.parse_args(argv)
    print(plot(args.copy, args.failover, args.ondata, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
