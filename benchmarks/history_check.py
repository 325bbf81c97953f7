"""What the truncation check costs a micro-batch that continues from checkpoints.

Every checkpoint names the last record read before it, and a copy that goes on
from a checkpoint reads that record again first (:mod:`mirrorflow.copy.state.history`):
one more fetch per transaction group and run. This measures a level run (in this
process, no Spark: the planner and ``copy_tasks`` as one Spark task runs them)
over ``--partitions`` partitions that each got ``--new`` records since the last
run, with the check and with it switched off, rounds alternated, and prints the
medians and their ratio::

    python -m benchmarks.history_check --partitions 64 --new 10 --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from benchmarks.common import Case, create_topic, local_clusters, prefill, warm_up
from mirrorflow.copy.engine import group, partition
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob


def _level_run(src: str, dst: str, topic: str, link_id: str, partitions: int) -> tuple[float, int]:
    spec = JobSpec(level=1, run_id=f"bench-{uuid.uuid4().hex[:6]}", topics=(topic,),
                   clusters={"src": {"bootstrap.servers": src}, "dst": {"bootstrap.servers": dst}}, slots=1,
                   links=(LinkJob(link_id, 1, "src", "dst"),), copy_threads=4)
    started = time.monotonic()
    result = run_job(spec)
    seconds = time.monotonic() - started
    if result.errors:
        raise RuntimeError(f"level run failed: {result.errors[:3]}")
    return seconds, result.copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.history_check", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--new", type=int, default=10, help="new records per partition before each run")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    verify = {"group": group.verify, "partition": partition.verify}

    def check(on: bool) -> None:
        group.verify = verify["group"] if on else (lambda *a, **k: {})  # type: ignore[assignment]
        partition.verify = verify["partition"] if on else (lambda *a, **k: {})  # type: ignore[assignment]

    with local_clusters("mirrorflow-history-") as kafka:
        src, dst = kafka.clusters["src"].bootstrap, kafka.clusters["dst"].bootstrap
        warm_up(src, dst)
        topic = create_topic(src, args.partitions)
        create_topic(dst, args.partitions, name=topic)
        link = f"history-{uuid.uuid4().hex[:6]}.L1"
        prefill(src, topic, Case(100, args.partitions, 1000 * args.partitions))
        _level_run(src, dst, topic, link, args.partitions)  # first copy: from here on every run continues
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for on in (True, False):
                prefill(src, topic, Case(100, args.partitions, args.new * args.partitions))
                check(on)
                seconds, copied = _level_run(src, dst, topic, link, args.partitions)
                if copied != args.new * args.partitions:
                    raise RuntimeError(f"copied {copied}, expected {args.new * args.partitions}")
                times[on].append(seconds)
                print(f"check {'on ' if on else 'off'}  {seconds:6.3f}s", flush=True)
        check(True)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        print(f"level run, {args.partitions} partitions x {args.new} new records, {args.rounds} rounds alternated: "
              f"median with the check {on:.3f}s, without {off:.3f}s, ratio {on / off:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
