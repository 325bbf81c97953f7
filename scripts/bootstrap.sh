#!/usr/bin/env bash
# Prepare a fresh machine for mirrorflow: check prerequisites, build .venv from the
# pinned requirements, fetch Apache Kafka's jars (and the test servers) from Maven Central.
# Idempotent: a second run only checks, unless a requirements file changed.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'mirrorflow setup: %s\n' "$*" >&2; exit 1; }
say() { printf '==> %s\n' "$*"; }

# --- prerequisites ---------------------------------------------------------
PY=""
for candidate in "${MIRRORFLOW_PYTHON:-}" python3.11 python3; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
    PY=$(command -v "$candidate"); break
  fi
done
[ -n "$PY" ] || die "Python 3.11 is required (python3.11 or python3 must be 3.11; set MIRRORFLOW_PYTHON to point at one). On Debian: apt-get install python3.11 python3.11-venv"

command -v java >/dev/null 2>&1 || die "Java 17 or newer is required to run Apache Kafka and Spark (not found on PATH). On Debian: apt-get install openjdk-17-jre-headless"
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n1)
[ -n "$java_major" ] && [ "$java_major" -ge 17 ] || die "Java 17 or newer is required; found: $(java -version 2>&1 | head -n1)"

command -v mvn >/dev/null 2>&1 || die "Maven is required to fetch Apache Kafka from Maven Central (not found on PATH). On Debian: apt-get install maven"

# --- Chromium, Prometheus, PostgreSQL and Redis (Debian packages the tests use) ----------
# Debian's chromium, driven by Playwright (its own browser download is not used), for the UI tests;
# Debian's prometheus (/usr/bin/prometheus and /usr/bin/promtool) for the metrics tests (docs/metrics.md);
# Debian's postgresql and redis-server for platform mode and its tests (docs/platform.md).
# One apt-get for whatever is missing; nothing when all are there.
chromium=${MIRRORFLOW_CHROMIUM:-/usr/bin/chromium}
prometheus=${MIRRORFLOW_PROMETHEUS:-/usr/bin/prometheus}
promtool=${MIRRORFLOW_PROMTOOL:-/usr/bin/promtool}
apt_packages=()
[ -x "$chromium" ] || apt_packages+=(chromium chromium-driver)
{ [ -x "$prometheus" ] && [ -x "$promtool" ]; } || apt_packages+=(prometheus)
pg_initdb=$(ls -d ${MIRRORFLOW_PG_BIN:-/usr/lib/postgresql/*/bin}/initdb 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$pg_initdb" ] || apt_packages+=(postgresql)
command -v "${MIRRORFLOW_REDIS_SERVER:-redis-server}" >/dev/null 2>&1 || apt_packages+=(redis-server)
if [ "${#apt_packages[@]}" -gt 0 ]; then
  wanted="${apt_packages[*]}"
  command -v apt-get >/dev/null 2>&1 || die "$wanted are required by the tests (Chromium: $chromium, Prometheus: $prometheus, $promtool, PostgreSQL, Redis) and there is no apt-get here: install them and set MIRRORFLOW_CHROMIUM, MIRRORFLOW_PROMETHEUS, MIRRORFLOW_PROMTOOL, MIRRORFLOW_PG_BIN, MIRRORFLOW_REDIS_SERVER"
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    die "$wanted are required by the tests; installing them needs root. Run: sudo apt-get update && sudo apt-get install -y --no-install-recommends $wanted"
  fi
  say "Installing what the tests need (apt-get: $wanted)"
  "${as_root[@]}" apt-get update -qq || die "apt-get update failed; $wanted are needed by the tests"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null ||
    die "apt-get install $wanted failed; they are needed by the tests"
fi
[ -x "$chromium" ] || die "Chromium was installed but $chromium is still missing; set MIRRORFLOW_CHROMIUM to its executable"
say "Chromium is installed: $("$chromium" --version 2>/dev/null | head -n1)"
[ -x "$prometheus" ] && [ -x "$promtool" ] || die "Prometheus was installed but $prometheus or $promtool is still missing; set MIRRORFLOW_PROMETHEUS and MIRRORFLOW_PROMTOOL to its executables"
say "Prometheus is installed: $("$prometheus" --version 2>&1 | head -n1)"
pg_initdb=$(ls -d ${MIRRORFLOW_PG_BIN:-/usr/lib/postgresql/*/bin}/initdb 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$pg_initdb" ] || die "PostgreSQL was installed but its initdb is missing under /usr/lib/postgresql/*/bin; set MIRRORFLOW_PG_BIN to the directory of its server programs"
say "PostgreSQL is installed: $("$pg_initdb" --version | head -n1)"
command -v "${MIRRORFLOW_REDIS_SERVER:-redis-server}" >/dev/null 2>&1 || die "Redis was installed but redis-server is missing; set MIRRORFLOW_REDIS_SERVER to its executable"
say "Redis is installed: $("${MIRRORFLOW_REDIS_SERVER:-redis-server}" --version | head -n1)"

# --- Jars and servers from Maven Central, in the background --------------------
# They need only Java and Maven (mirrorflow_dev's fetchers use the standard library), so they
# run while the Python environment is built; their output is shown once they are done.
fetch_log=$(mktemp)
(
  export PYTHONPATH="$PWD/include:$PWD"
  # Maven's JVM with the JIT's first tier only: these are short builds, and the second tier's
  # compiles cost more than they save (the registry's two builds: 72 -> 36 CPU s, 44 -> 31 s).
  export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-XX:TieredStopAtLevel=1"
  # Apache Kafka's jars; Apicurio Registry, built into .cache/schema-registry (first time: a few
  # minutes; the tests of mirror_schemas' REST path); S3Proxy's jars (the tests of the S3 archive).
  "$PY" -m mirrorflow_dev.kafka fetch && "$PY" -m mirrorflow_dev.registry fetch && "$PY" -m mirrorflow_dev.s3 fetch
) >"$fetch_log" 2>&1 &
fetch_pid=$!
fetched() {
  local rc=0
  wait "$fetch_pid" || rc=$?
  cat "$fetch_log"; rm -f "$fetch_log"
  [ "$rc" -eq 0 ] || die "fetching from Maven Central failed (the lines above say what)"
}

# --- virtualenv ------------------------------------------------------------
# Installed with uv: the same pinned set as `pip install -r requirements.txt -c constraints.txt`,
# in a fraction of pip's time. pyspark is published as a source distribution only; pip keeps the
# wheel it builds in its own cache, which uv does not reuse, so the wheel comes from `pip wheel`.
UV_PIN="uv==0.13.9"
stamp_src=$(cat requirements.txt requirements-dev.txt constraints.txt pyproject.toml | sha256sum | cut -c1-16)
stamp=.venv/.mirrorflow-stamp
venv_rebuilt=""
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_src" ]; then
  say "Python environment .venv is up to date"
else
  say "Creating .venv with $PY and installing pinned requirements (first time: a few minutes)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet "$UV_PIN"
  pyspark_pin=$(grep -E '^pyspark==' requirements.txt)
  # Outside the checkout, shared by every checkout on this machine: uv keeps an unpacked copy of an
  # installed wheel per wheel *path*, so a wheel in each fresh clone's .cache/ cost 480 MB of uv's cache
  # every time (tests/dags/test_installed_wheel.py takes it from here too: mirrorflow_dev/install.py).
  wheels="${MIRRORFLOW_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/mirrorflow/wheels}"
  compgen -G "$wheels/pyspark-${pyspark_pin#pyspark==}-*.whl" >/dev/null ||
    .venv/bin/python -m pip wheel --quiet --no-deps -w "$wheels" "$pyspark_pin"
  uv_install=(.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode --find-links "$wheels")
  "${uv_install[@]}" -r requirements.txt -r requirements-dev.txt -c constraints.txt
  # The Spark provider's pyspark-client ships the same `pyspark` files as pyspark
  # (and lags behind it); reinstall the pinned full pyspark last so its files win.
  "${uv_install[@]}" --no-deps --reinstall-package pyspark "$pyspark_pin"
  # An in-tree egg-info of an older setuptools build would be a second `mirrorflow` distribution on sys.path.
  rm -rf include/mirrorflow.egg-info
  "${uv_install[@]}" --no-deps -e .
  .venv/bin/python -c 'import airflow, pyspark, confluent_kafka, mirrorflow; print("   airflow", airflow.__version__, "| pyspark", pyspark.__version__, "| confluent-kafka", confluent_kafka.version())'
  echo "$stamp_src" > "$stamp"
  venv_rebuilt=1
fi

# --- Bytecode for the project's own modules -----------------------------------
# Every Airflow task, every DAG file parse (each in a process of its own, every 30 s) and every test
# worker imports mirrorflow from these sources. Where PYTHONDONTWRITEBYTECODE is set, as it is on some
# machines, Python never caches the compiled modules and compiles them again in each process;
# compiled once here, they are read instead (an edited file is compiled again, in memory, as before).
# (The installed packages are compiled by the install above, as pip does.)
.venv/bin/python -m compileall -q include plugins dags spark_jobs mirrorflow_dev scripts tests benchmarks >/dev/null

# --- Spark driver's class archive ---------------------------------------------
# Every local micro-batch's driver JVM starts sooner with it (include/mirrorflow/spark/driver.py says why; first time: about 30 s).
# A rebuilt venv reinstalled pyspark's jars (new file times), which the JVM checks against the
# archive: an archive of the old jars would be ignored silently, so build it again then.
.venv/bin/python -m mirrorflow_dev.spark prepare ${venv_rebuilt:+--force}

fetched
