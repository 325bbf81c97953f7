# syntax=docker/dockerfile:1
#
# Image for every Airflow service of docker-compose.yaml (api-server, scheduler,
# dag-processor, triggerer, airflow-init). Build context: the repository root
# (only the files allowed by deploy/airflow.Dockerfile.dockerignore are sent).
#
#   docker build -f deploy/airflow.Dockerfile -t mirrorflow-airflow:3.3.2-local .
#
# Pinned to the official image of the Airflow version in requirements.txt, on the
# project's Python minor (3.11): the Spark driver runs in this image and PySpark
# refuses executors whose Python minor differs from the driver's, so this must match
# deploy/spark.Dockerfile.
FROM apache/airflow:3.3.2-python3.11

# --- Java runtime (as root) -------------------------------------------------------
# mirror_* DAGs call spark-submit (from the pyspark wheel) in *client* mode with the
# LocalExecutor: the Spark driver is a JVM started inside the task process, i.e. in
# the scheduler container. Without a JRE here spark-submit fails with
# "JAVA_HOME is not set". default-jre-headless is the distribution's supported JRE
# (17 on Debian bookworm, 21 on trixie); Spark 4.x runs on both.
USER root
# (man1 must exist on slim Debian images or the JRE's postinst fails.)
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless \
 && apt-get autoremove -yqq --purge \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/default-java
RUN test -x "${JAVA_HOME}/bin/java" && "${JAVA_HOME}/bin/java" -version

# Directories the compose file mounts named volumes on; a fresh named volume takes
# the ownership of the image directory, so the airflow user (group 0) can write them.
RUN mkdir -p /opt/mirrorflow /opt/airflow/auth /opt/airflow/logs \
 && chown -R airflow:0 /opt/mirrorflow /opt/airflow/auth /opt/airflow/logs \
 && chmod -R g+rwX /opt/mirrorflow /opt/airflow/auth /opt/airflow/logs

# --- Python dependencies (as airflow, as the official image requires) --------------
USER airflow
COPY --chown=airflow:0 requirements.txt constraints.txt /opt/mirrorflow/
# requirements.txt pins the direct dependencies, constraints.txt the tested transitive
# set. apache-airflow is named again with the image's own version so pip can never
# up- or downgrade Airflow underneath the image. The Spark provider pulls in
# pyspark-client, which ships the same `pyspark` package files and would shadow the
# full pyspark (the one with the jars and spark-submit), so pyspark is reinstalled last
# at the pinned version, exactly as scripts/bootstrap.sh does for the local venv.
RUN pip install --no-cache-dir \
        "apache-airflow==${AIRFLOW_VERSION}" \
        -r /opt/mirrorflow/requirements.txt \
        -c /opt/mirrorflow/constraints.txt \
 && pip install --no-cache-dir --no-deps --force-reinstall \
        "$(grep -E '^pyspark==' /opt/mirrorflow/requirements.txt)" \
 && spark-submit --version

# --- the mirrorflow package ------------------------------------------------------------
# Editable install at /opt/mirrorflow: the compose file bind-mounts ./include over
# /opt/mirrorflow/include, so a code change is live in every service without a
# rebuild, while the image alone (no mounts) still has a working copy.
# (The package is built with hatchling from pyproject.toml: the core in include/, the Airflow glue in
# plugins/mirrorflow_airflow/, the Spark entry scripts in spark_jobs/ and README.md are all part of it.)
COPY --chown=airflow:0 pyproject.toml README.md /opt/mirrorflow/
COPY --chown=airflow:0 include/ /opt/mirrorflow/include/
COPY --chown=airflow:0 plugins/mirrorflow_airflow/ /opt/mirrorflow/plugins/mirrorflow_airflow/
COPY --chown=airflow:0 spark_jobs/ /opt/mirrorflow/spark_jobs/
RUN pip install --no-cache-dir --no-deps -e /opt/mirrorflow \
 && python -c "import mirrorflow, confluent_kafka, pyspark; print('mirrorflow', mirrorflow.__file__, 'pyspark', pyspark.__version__)"

ENV PYSPARK_PYTHON=python3 \
    PYSPARK_DRIVER_PYTHON=python3
