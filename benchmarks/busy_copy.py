"""Another copy running beside a measurement: the copy engine, over and over, between two clusters of its own.

``benchmarks.scheduler_latency --busy`` starts it for its window, so that the
``on_data`` latency is also measured on a machine that is busy the way a shared
Airflow or Spark host is. It copies ``--records`` records of ``--size`` bytes
over 8 partitions exactly once (``copy_tasks``, the path a Spark task runs, 4
threads), into a fresh target topic each time, until it is stopped; each copy's
seconds go to stdout.

    python -m benchmarks.busy_copy --size 1000 --records 300000
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from benchmarks.common import Case, create_topic, local_clusters, prefill, warm_up
from benchmarks.engine import engine_copy_many


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.busy_copy", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with local_clusters("mirrorflow-busy-", ("busy-src", "busy-dst")) as kafka:
        src, dst = kafka.clusters["busy-src"].bootstrap, kafka.clusters["busy-dst"].bootstrap
        warm_up(src, dst)
        topic = create_topic(src, args.partitions)
        prefill(src, topic, Case(args.size, args.partitions, args.records))
        print("busy: copying", flush=True)
        copies = 0
        while not stop.is_set():
            r = engine_copy_many(src, dst, topic, args.partitions, args.records, exactly_once=True, threads=4)
            copies += 1
            print(f"busy: copy {copies} took {r['seconds']:.2f}s at {time.strftime('%H:%M:%S')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
