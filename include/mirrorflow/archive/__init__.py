"""The S3 archive of Kafka topics: Parquet objects per partition and UTC date, manifests, progress.

Modules, smallest first: :mod:`.location` (where: bucket, prefix, endpoint,
credentials), :mod:`.layout` (object keys), :mod:`.records` (the Parquet
schema), :mod:`.writer` (what an executor does for one partition range),
:mod:`.job` (the driver: plan, run, manifest, progress) and :mod:`.reader`
(coverage and records back, in offset order).

Needs ``boto3`` and ``pyarrow`` besides the core's dependencies; nothing else in
mirrorflow imports this package, so a copy-only executor does not need them.
"""
