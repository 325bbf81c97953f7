"""Airflow glue for mirrorflow: each DAG's wiring and tasks, and the Airflow pieces they are made of.

Everything Airflow-specific lives here or in dags/; the algorithms live in the
core package ``mirrorflow``, which never imports Airflow. Airflow loads
``plugins/mirrorflow_status.py`` as its plugin; ``plugins/.airflowignore`` keeps
it from loading this package's files a second time as top-level modules.

The package, by room (the providers' split; lowest layer last):

- ``factories/``: the wiring of each DAG, ``<family>.py`` one family each, all
  with the house header of ``factories/dag_header.py`` (``mirror_dag``: start
  date, no catch-up, one run at a time, owner, retries, tags);
- ``ui/``: the Mirror page, its JSON API and the Prometheus metrics (docs/status.md);
- ``steps/``: what each DAG's tasks do, ``<family>.py`` one DAG family each;
- ``operators/``: tasks that submit a Spark job (``spark_job.py``, the base; the
  level copy, the onboarding's backfill, the archive), and the approval that
  holds an operator action until a person agrees (``approval.py``);
- ``sensors/``: waits on the clusters (``base.py``: ``PollingSensor``; lag, failover);
- ``notifiers/``: the alert notifier the factories attach to the tasks whose
  failures are incidents (docs/alerts.md);
- ``triggers/``: the same waits, run in the triggerer (``base.py``: ``PollingTrigger``
  and the checks it polls);
- ``hooks/``: Airflow connections turned into what the core takes: Kafka clusters
  (``cluster.py``, and which of them answer), schema registries and their sync
  (``registry.py``), the S3 archive (``archive.py``), the alert channels
  (``alerts.py``); ``masking.py`` hands every secret they read to the log masker;
- at the root, what every room may use: ``state.py`` (every Airflow Variable
  mirrorflow keeps), ``topology.py`` (the topology file plus the operators'
  cluster changes), ``spark.py`` (how a job reaches Spark), ``assets.py`` (the
  Airflow assets mirrorflow marks, and the names users' DAGs schedule on).

Imports point down that list, never up, and rooms of one layer (factories and
ui; steps, operators, sensors and notifiers) do not import each other: a step
never imports another step, and what two of them share lives in a hook or at
the root. ``tests/unit/test_layers.py`` holds the package to it.
"""
