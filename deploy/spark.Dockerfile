# syntax=docker/dockerfile:1
#
# Image for spark-master and spark-worker of docker-compose.yaml (Spark standalone).
# Build context: the repository root, filtered by deploy/spark.Dockerfile.dockerignore.
#
#   docker build -f deploy/spark.Dockerfile -t mirrorflow-spark:4.3.0-local .
#
# Why not FROM apache/spark:4.x-python3? Those images take python3 from Ubuntu
# (3.10 on jammy, 3.12 on noble), while the driver runs in the Airflow image on
# Python 3.11, and PySpark refuses to run when the executors' Python minor differs
# from the driver's. Installing a second Python into that image, or shipping a
# packed environment with spark.archives on every submit, are both heavier than
# starting from the official Python 3.11 image: the pyspark wheel *is* a complete
# Spark distribution (jars, bin/spark-class, spark-submit), so master, worker and
# executors run the exact pyspark version the driver uses (requirements.txt), and
# the executors' Python has confluent-kafka (native code) and mirrorflow installed.
# On a real cluster you cannot control, ship a packed venv with spark.archives
# instead (DESIGN.md section 8); this image is the compose/dev answer.
FROM python:3.11.14-slim-bookworm

# Java for the Spark JVMs (master, worker, executors). Spark 4.x needs Java 17+;
# bookworm's default JRE is OpenJDK 17. procps: Spark's scripts call `ps`.
# (man1 must exist on slim Debian images or the JRE's postinst fails.)
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/default-java
RUN test -x "${JAVA_HOME}/bin/java" && "${JAVA_HOME}/bin/java" -version

# pyspark at the version pinned in requirements.txt plus mirrorflow's own runtime
# dependencies (pyproject.toml: pydantic, PyYAML, confluent-kafka), all held to the
# tested versions by constraints.txt. Airflow itself is not needed on executors.
WORKDIR /opt/mirrorflow
COPY requirements.txt constraints.txt pyproject.toml README.md /opt/mirrorflow/
COPY include/ /opt/mirrorflow/include/
# (the package's build needs every part pyproject.toml names, though executors import only include/'s)
COPY plugins/mirrorflow_airflow/ /opt/mirrorflow/plugins/mirrorflow_airflow/
COPY spark_jobs/ /opt/mirrorflow/spark_jobs/
RUN pip install --no-cache-dir -c constraints.txt \
        "$(grep -E '^pyspark==' requirements.txt)" \
        -e /opt/mirrorflow \
 && python -c "import mirrorflow, confluent_kafka, pyspark; print('mirrorflow', mirrorflow.__file__, 'pyspark', pyspark.__version__)"

# SPARK_HOME is the pyspark package directory (bin/, jars/ live there).
# PYTHONPATH: compose bind-mounts ./include over /opt/mirrorflow/include (live code);
# Python workers inherit the worker's PYTHONPATH, so executors import the same copy.
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYTHONPATH=/opt/mirrorflow/include \
    PYSPARK_PYTHON=python3 \
    SPARK_WORKER_DIR=/opt/spark-work \
    SPARK_NO_DAEMONIZE=1
RUN test -x "${SPARK_HOME}/bin/spark-class"

# Run as an unprivileged user (uid 185, as in the apache/spark images).
RUN groupadd --system --gid 185 spark \
 && useradd --system --uid 185 --gid spark --home-dir /opt/spark-work --create-home spark
USER spark
WORKDIR /opt/spark-work
EXPOSE 7077 8080 8081
CMD ["spark-class", "org.apache.spark.deploy.master.Master"]
