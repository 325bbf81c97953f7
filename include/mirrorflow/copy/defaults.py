"""The copier's defaults, which the topology's ``replication`` settings override per link.

Kept apart from :mod:`mirrorflow.topology.replication` (which validates those
settings with pydantic) so that code on Spark executors does not import the
topology package for three numbers.
"""

#: Source offsets per transaction, at most. A copy also commits once a transaction has been open
#: ``TXN_SECONDS``, which is what usually ends one: each commit costs the copy a pause of tens of
#: milliseconds (the producer drains, then the commit's round trips), so fixed-count transactions of
#: 5,000 cost 1 KB copies about a third of their speed (measured in benchmarks/engine.py).
DEFAULT_TXN_RECORDS = 100_000
#: Seconds a transaction may stay open before the copy commits it; bounds in time what a killed copy
#: redoes (and what an at-least-once link may duplicate), far inside ``transaction.timeout.ms``.
TXN_SECONDS = 1.0
#: Partitions a Spark task copies at the same time; measured in benchmarks/ (docs/benchmarks.md).
DEFAULT_COPY_THREADS = 4
#: A transaction group with at least this many records to copy is copied alone among a Spark task's
#: threads: it keeps a core busy by itself, and two such groups side by side in one Python worker only
#: contend (for the GIL, and librdkafka's threads for the same core). Smaller groups spend most of
#: their time waiting on the brokers and overlap on the other threads. On two cores, 300,000 x 1 KB
#: over 64 partitions copied in 4.4 s one big group at a time per task and 5.4 s two at a time
#: (docs/benchmarks.md).
LARGE_GROUP_RECORDS = 50_000
