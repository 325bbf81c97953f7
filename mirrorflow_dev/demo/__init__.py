"""The parts of ``make demo`` (scripts/demo.py), which platform mode (scripts/platform_mode.py) shares.

- :mod:`~mirrorflow_dev.demo.settings`: the run dir, topology, ports and modes
  (:class:`~mirrorflow_dev.demo.settings.DemoSettings`), and how the demo speaks;
- :mod:`~mirrorflow_dev.demo.servers`: its Kafka clusters, S3 server and Spark
  Connect server, detached, found again by their pid files;
- :mod:`~mirrorflow_dev.demo.secured`: the secured demo's principal, connections
  and exactly its derived ACLs;
- :mod:`~mirrorflow_dev.demo.standalone`: Airflow standalone, its environment,
  and one demo at a time;
- :mod:`~mirrorflow_dev.demo.traffic`: the sample traffic and the exactly-once check;
- :mod:`~mirrorflow_dev.demo.mirroring`: the level DAGs triggered round after
  round through the REST API (:mod:`mirrorflow_dev.airflow_api`), then the lag.
"""
