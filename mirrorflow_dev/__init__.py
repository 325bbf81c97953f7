"""Development and test tooling: local stand-ins for production infrastructure, and how to fetch them.

Real Apache Kafka brokers on loopback (:mod:`mirrorflow_dev.kafka`), S3Proxy
(:mod:`mirrorflow_dev.s3`), a schema registry (:mod:`mirrorflow_dev.registry`),
a Spark Connect server and the Spark driver's class archive
(:mod:`mirrorflow_dev.spark`), the Maven fetch they share
(:mod:`mirrorflow_dev.maven`), one set of process and port helpers
(:mod:`mirrorflow_dev.process`), platform mode's servers
(:mod:`mirrorflow_dev.platform`), one client of Airflow's REST API
(:mod:`mirrorflow_dev.airflow_api`) and the parts of the demo, which platform
mode shares (:mod:`mirrorflow_dev.demo`). Used by the tests, the demo, the
benchmarks and ``scripts/bootstrap.sh``.

Not the product: it lives at the repository root, outside ``include/``, so it
is neither installed with ``mirrorflow`` nor zipped to Spark executors, and the
core never imports it. It is importable wherever the repository root is on
``sys.path`` (``python -m mirrorflow_dev.<module>`` from the root, pytest,
``scripts/demo.py`` and ``scripts/platform_mode.py``, ``python -m benchmarks.run``).
"""
