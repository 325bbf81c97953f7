"""The copy engine before and after a change: ``benchmarks.engine`` from two checkouts, alternated.

A restructuring must not slow the copy down, and one machine's noise is larger
than the effect sought, so the two trees run in turns (A B, then B A, ...), each
run on fresh clusters of its own, and the medians are compared. ``BEFORE`` (and
``--after``, else this working tree) is a commit; it is checked out into a
temporary worktree and put ahead of the installed package on ``PYTHONPATH``. The numbers go to stdout; the record of a run
is kept by hand in ``benchmarks/results/``.

    python -m benchmarks.engine_ab 67f78c1 --after 559dcf0 --rounds 6 -- --size 1000 --records 300000 --partitions 64 --no-raw
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: A line of ``benchmarks.engine``: the variant's label, then its seconds.
LINE = re.compile(r"^(?P<label>\S.*?)\s+(?P<seconds>\d+\.\d+)s\s")


def run_engine(tree: Path, engine_args: list[str]) -> dict[str, list[float]]:
    """One ``benchmarks.engine`` run from ``tree`` (its own clusters); seconds by variant."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "include"), str(tree)]),
           "MIRRORFLOW_CACHE_DIR": str(REPO / ".cache")}  # the jars this checkout fetched already
    out = subprocess.run([sys.executable, "-m", "benchmarks.engine", *engine_args], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=1800)
    found: dict[str, list[float]] = defaultdict(list)
    for line in out.stdout.splitlines():
        match = LINE.match(line)
        if match:
            found[match["label"]].append(float(match["seconds"]))
    if out.returncode != 0 or not found:
        print(f"  {tree.name}: no numbers (exit {out.returncode}): {(out.stderr or out.stdout)[-400:]}", flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_ab", description=__doc__.splitlines()[0])
    parser.add_argument("before", help="the commit to compare this tree against")
    parser.add_argument("--after", default=None,
                        help="a commit to run as the second side (default: this working tree, as it is)")
    parser.add_argument("--rounds", type=int, default=4, help="pairs of runs, the order alternating")
    parser.epilog = "after --: the arguments of benchmarks.engine"
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse gives a trailing nargs="*" nothing after "--" here; split by hand
    engine_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.engine_args = engine_args
    with tempfile.TemporaryDirectory(prefix="mirrorflow-ab-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(before), args.before],
                       check=True, capture_output=True)
        after = REPO
        if args.after is not None:
            after = Path(tmp) / "after"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(after), args.after],
                           check=True, capture_output=True)
        try:
            trees = {"before": before, "after": after}
            seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
            for round_ in range(args.rounds):
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for side in order:
                    for label, values in run_engine(trees[side], args.engine_args).items():
                        seconds[(side, label)].extend(values)
                        print(f"round {round_ + 1} {side:6s} {label:32s} " + " ".join(f"{v:.2f}" for v in values),
                              flush=True)
        finally:
            for tree in {before, after} - {REPO}:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"\n{'variant':34s} {'side':6s} {'runs':>4s} {'median':>7s}  seconds, sorted")
    for (side, label), values in sorted(seconds.items(), key=lambda kv: (kv[0][1], kv[0][0] != "before")):
        print(f"{label:34s} {side:6s} {len(values):4d} {statistics.median(values):7.2f}  "
              + " ".join(f"{v:.2f}" for v in sorted(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
