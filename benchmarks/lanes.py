"""The level job on a Spark Connect server with different ``copy_threads``, rounds alternated, medians printed.

    python -m benchmarks.lanes --cases 1000x64x300000,1000x8x300000 --threads 4,1 --rounds 3

How the executor's lanes (at most one large transaction group at a time per Spark
task, mirrorflow.copy.engine.executor) were decided: before them, ``copy_threads=1`` against
4 on cases whose groups are all large. Since the lanes, both values copy such cases
one group at a time per task, so the same comparison now shows the noise between
runs; on cases with small groups it still shows what the extra threads give. The raw
loop runs in each round as the yardstick. Its numbers go to stdout, not to the record.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from benchmarks.common import Case, create_topic, prefill, records_on, warm_up
from benchmarks.mirrorflow_copy import mirrorflow_copy
from benchmarks.mm2 import recreate_topic
from benchmarks.raw_loop import raw_copy
from benchmarks.run import start_connect_server
from mirrorflow_dev.kafka import KafkaDistribution, LocalKafka


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lanes", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="1000x64x300000", help="SIZExPARTITIONSxRECORDS, comma-separated")
    parser.add_argument("--threads", default="4,1", help="copy_threads values, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cases = [Case(*map(int, c.split("x"))) for c in args.cases.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    run_dir = Path(tempfile.mkdtemp(prefix="mirrorflow-lanes-"))
    kafka = LocalKafka(run_dir, names=("src", "dst"), distribution=KafkaDistribution.fetch(), heap_max="1g",
                       progress=lambda m: None)
    kafka.start()
    server = None
    try:
        src, dst = kafka.clusters["src"].bootstrap, kafka.clusters["dst"].bootstrap
        warm_up(src, dst)
        server, _ = start_connect_server(run_dir)
        for case in cases:
            topic = create_topic(src, case.partitions)
            prefill(src, topic, case)
            times: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                for name in ["raw loop", *(f"{m} copy_threads={t}" for t in threads for m in ("EOS", "ALO"))]:
                    recreate_topic(dst, topic, case.partitions)
                    if name == "raw loop":
                        seconds, extra = raw_copy(src, dst, topic, case.partitions, case.records)["seconds"], ""
                    else:
                        r = mirrorflow_copy(src, dst, topic, exactly_once=name.startswith("EOS"),
                                            link_id=f"lanes-{uuid.uuid4().hex[:8]}.L1",
                                            copy_threads=int(name.rsplit("=", 1)[1]), connect_url=server.url)
                        seconds, extra = r["seconds"], f"  (plan {r['plan_s']:.2f}s, copy {r['copy_s']:.2f}s)"
                    on_target = records_on(dst, topic, case.partitions)
                    if on_target != case.records:
                        raise RuntimeError(f"{name}: {on_target} records on the target, expected {case.records}")
                    times.setdefault(name, []).append(seconds)
                    print(f"{case.size} B x {case.partitions}  {name:22s} {seconds:6.2f}s{extra}", flush=True)
            raw = statistics.median(times["raw loop"])
            for name, runs in times.items():
                median = statistics.median(runs)
                print(f"== {case.size} B x {case.partitions}  {name:22s} median {median:5.2f}s  "
                      f"vs raw {raw / median:4.2f}  ({' / '.join(f'{t:.2f}' for t in runs)})", flush=True)
    finally:
        if server is not None:
            server.stop()
        kafka.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
