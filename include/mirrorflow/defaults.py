"""The copier's defaults, which the topology's ``replication`` settings override per link.

One home below both readers: the topology (which validates the settings with
pydantic) and the copy engine on Spark executors (which must not import pydantic
for a few numbers). The measurements behind each value are in docs/benchmarks.md.
"""

from typing import Final

#: Source offsets per transaction, at most. A copy also commits once a transaction has been open
#: ``TXN_SECONDS``, which is what usually ends one: each commit costs the copy a pause (the producer
#: drains, then the commit's round trips), so small fixed-count transactions cost copies much speed.
DEFAULT_TXN_RECORDS = 100_000
#: Seconds a transaction may stay open before the copy commits it; bounds in time what a killed copy
#: redoes (and what an at-least-once link may duplicate), far inside ``transaction.timeout.ms``.
TXN_SECONDS = 1.0
#: Partitions a Spark task copies at the same time.
DEFAULT_COPY_THREADS = 4
#: A transaction group with at least this many records to copy is copied alone among a Spark task's
#: threads: it keeps a core busy by itself, and two such groups side by side in one Python worker only
#: contend (for the GIL, and librdkafka's threads for the same core). Smaller groups spend most of
#: their time waiting on the brokers and overlap on the other threads.
LARGE_GROUP_RECORDS = 50_000
#: What a copy does when the source lost offsets the link has not copied (``replication`` key ``on_gap``).
DEFAULT_ON_GAP: Final = "fail"

#: An idle link's checkpoint is committed again once it is older than this share of the target's
#: ``offsets.retention.minutes``: level runs are far more frequent, so it never comes near expiry.
KEEP_ALIVE_FRACTION = 0.5
