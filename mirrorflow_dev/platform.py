"""The servers of platform mode that the demo does not have: PostgreSQL, Redis, a Spark standalone cluster.

``make platform`` (scripts/platform_mode.py) runs Airflow the way a platform team
does: PostgreSQL as its metadata database, Redis as the Celery broker, each
Airflow component a process of its own, and Spark as a standalone master and
worker with the Connect server on them. Everything here is a Debian package or
comes with pyspark, binds loopback only, keeps its data and log in a run
directory, and runs detached in a session of its own, so it outlives the
command that started it; :class:`Detached` finds it again by its pid file,
checked against the process's command line (a recycled pid is not mistaken
for it).

Secrets (the database and Redis passwords) go into 0600 files of the run
directory or the environment, never onto a command line.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mirrorflow_dev.process import (
    HOST,
    group_alive,
    pid_alive,
    port_accepts,
    port_free,
    stop_group,
    wait_until,
    write_secret_file,
)


class PlatformError(RuntimeError):
    """A platform server could not be found, started or stopped (the message names it and its log)."""


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


# --------------------------------------------------------------------------- a detached process


@dataclass
class Detached:
    """One server process started in a session of its own; its pid file and log live in ``run_dir``.

    ``marker`` is a string of its command line that proves a pid is still this
    server's (several, separated by ``|``, when the server retitles itself: the
    first before, the next after). ``stop`` signals its whole process group (an Airflow component's
    forked children, a Spark worker's executors) from TERM up to KILL.
    """

    name: str
    command: Sequence[str]
    run_dir: Path
    marker: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """Its pid if it runs (the pid file, checked against the process's command line), else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError):
            return None
        if self._proc is not None and self._proc.pid == pid:  # ours, maybe not exec'd yet: the handle knows
            return pid if self._proc.poll() is None else None
        ours = any(marker.encode() in cmdline for marker in self.marker.split("|"))
        return pid if ours and pid_alive(pid) else None

    def start(self) -> int:
        """Start it unless it runs; its pid."""
        running = self.pid()
        if running is not None:
            return running
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(list(self.command), env=self.env or None, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                          cwd=self.cwd or self.run_dir)
        self.pid_file.write_text(f"{self._proc.pid}\n")
        return self._proc.pid

    def running(self) -> bool:
        return self.pid() is not None

    def wait_started(self, what: str, ready, timeout: float, interval: float = 0.5) -> None:
        """Wait until ``ready()``; a server that exits first fails naming it, with its log's last lines."""
        wait_until(what, lambda: ready() or not self.running(), timeout, interval=interval)
        if not self.running():
            raise PlatformError(f"{what}: the {self.name} exited during start-up; last lines of {self.log_path}:\n"
                                f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)

    def stop(self, grace: float = 30.0) -> bool:
        """TERM its process group, then KILL what is left; True once nothing of it runs."""
        pid = self.pid()
        if pid is not None:
            stop_group(pid, ((signal.SIGTERM, grace), (signal.SIGKILL, 5)),
                       alive=lambda: group_alive(pid, zombies=False), interval=0.2)
            if group_alive(pid, zombies=False):
                return False
        self.pid_file.unlink(missing_ok=True)
        return True


# --------------------------------------------------------------------------- PostgreSQL


def postgres_bin() -> Path:
    """The directory of PostgreSQL's server programs: ``MIRRORFLOW_PG_BIN``, else Debian's newest."""
    configured = os.environ.get("MIRRORFLOW_PG_BIN")
    candidates = [Path(configured)] if configured else sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    raise PlatformError("PostgreSQL's server programs (initdb, pg_ctl) were not found under /usr/lib/postgresql; "
                        "install Debian's postgresql package (bootstrap.sh does) or set MIRRORFLOW_PG_BIN")


@dataclass
class LocalPostgres:
    """A PostgreSQL cluster of the run directory on ``127.0.0.1:<port>``: one superuser with a password.

    PostgreSQL refuses to run as root; as root, its programs run as the system
    user ``postgres`` (Debian's package creates it), which then owns the data.
    """

    run_dir: Path
    port: int
    user: str
    password: str
    database: str = "airflow"

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.user}:{self.password}@{HOST}:{self.port}/{self.database}"

    def __repr__(self) -> str:
        return f"LocalPostgres({self.run_dir}, port={self.port}, user={self.user}, password=***)"

    def _as_owner(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*self._as_owner(), *args], capture_output=True, text=True, env=env,
                              cwd="/")  # cwd: the postgres user may not enter the caller's directory

    def running(self) -> bool:
        out = self._run(str(postgres_bin() / "pg_ctl"), "status", "-D", str(self.data_dir))
        return out.returncode == 0

    def start(self, timeout: float = 60.0) -> None:
        """Create the cluster on the first start, start it, and make sure the database exists."""
        bindir = postgres_bin()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        owner = "postgres" if os.geteuid() == 0 else None
        if owner:
            user = pwd.getpwnam(owner)
            os.chown(self.run_dir, user.pw_uid, user.pw_gid)
            if self._run("test", "-w", str(self.run_dir)).returncode != 0:
                raise PlatformError(f"PostgreSQL runs as the user postgres here (root may not run it), and postgres "
                                    f"cannot reach {self.run_dir}: a directory above it is private to root; choose "
                                    f"a run dir under a directory others may enter (MIRRORFLOW_PLATFORM_RUN_DIR)")
        if not (self.data_dir / "PG_VERSION").exists():
            pwfile = self.run_dir / "initdb.pw"
            write_secret_file(pwfile, self.password + "\n", owner)
            try:
                out = self._run(str(bindir / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                                f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8", "--no-instructions")
            finally:
                pwfile.unlink(missing_ok=True)
            if out.returncode != 0:
                raise PlatformError(f"initdb of {self.data_dir} failed: {out.stderr.strip() or out.stdout.strip()}")
        if self.running():
            return
        if not port_free(self.port):
            raise PlatformError(f"cannot start PostgreSQL on {HOST}:{self.port}: the port is in use "
                                "(set MIRRORFLOW_PLATFORM_PG_PORT to another port)")
        options = f"-p {self.port} -c listen_addresses={HOST} -k {self.run_dir}"
        out = self._run(str(bindir / "pg_ctl"), "start", "-D", str(self.data_dir), "-l", str(self.log_path),
                        "-o", options, "-w", "-t", str(int(timeout)))
        if out.returncode != 0:
            raise PlatformError(f"PostgreSQL did not start on {HOST}:{self.port}: {out.stdout.strip()} "
                                f"{out.stderr.strip()}; last lines of {self.log_path}:\n{_tail(self.log_path)}")
        self._ensure_database()

    def _ensure_database(self) -> None:
        import psycopg2

        conn = psycopg2.connect(host=HOST, port=self.port, user=self.user, password=self.password, dbname="postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            conn.close()

    def stop(self) -> bool:
        """A fast shutdown (open sessions are ended); True once it has stopped."""
        if not (self.data_dir / "PG_VERSION").exists() or not self.running():
            return True
        out = self._run(str(postgres_bin() / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast", "-w")
        return out.returncode == 0 or not self.running()


# --------------------------------------------------------------------------- Redis


def redis_server() -> str:
    found = os.environ.get("MIRRORFLOW_REDIS_SERVER") or shutil.which("redis-server")
    if not found:
        raise PlatformError("redis-server was not found; install Debian's redis-server package (bootstrap.sh does) "
                            "or set MIRRORFLOW_REDIS_SERVER")
    return found


@dataclass
class LocalRedis:
    """Redis on ``127.0.0.1:<port>`` for Celery: a password (in its 0600 config file), no persistence.

    A task queued in Redis that a restart loses is queued again by the scheduler
    (its task instance stays queued, and Airflow re-sends stale queued tasks).
    """

    run_dir: Path
    port: int
    password: str

    def __repr__(self) -> str:
        return f"LocalRedis({self.run_dir}, port={self.port}, password=***)"

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{HOST}:{self.port}/0"

    @property
    def config(self) -> Path:
        return self.run_dir / "redis.conf"

    def process(self) -> Detached:
        # Redis retitles itself "redis-server 127.0.0.1:<port>" once up: the name is what both titles share.
        return Detached("redis", [redis_server(), str(self.config)], self.run_dir, marker="redis-server")

    def start(self, timeout: float = 30.0) -> None:
        process = self.process()
        if process.running():
            return
        if not port_free(self.port):
            raise PlatformError(f"cannot start Redis on {HOST}:{self.port}: the port is in use "
                                "(set MIRRORFLOW_PLATFORM_REDIS_PORT to another port)")
        write_secret_file(self.config, "\n".join([
            f"bind {HOST}", f"port {self.port}", f"dir {self.run_dir}", f"requirepass {self.password}",
            'save ""', "appendonly no", "daemonize no", "protected-mode yes", "",
        ]))
        process.start()
        process.wait_started(f"Redis on {HOST}:{self.port}", lambda: port_accepts(self.port), timeout, interval=0.2)

    def stop(self) -> bool:
        return self.process().stop(grace=10)


# --------------------------------------------------------------------------- Spark standalone


@dataclass
class SparkStandalone:
    """A Spark standalone master and one worker on loopback, from pyspark's own distribution.

    The Connect server (:class:`mirrorflow_dev.spark.LocalConnectServer` with this
    master) is the application that uses them; its executors run on the worker,
    with this interpreter's Python workers.
    """

    run_dir: Path
    port: int
    master_ui_port: int
    worker_ui_port: int
    cores: int
    memory: str = "4g"
    python: str = ""

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _spark_class(self) -> str:
        import pyspark

        return str(Path(pyspark.__file__).parent / "bin" / "spark-class")

    def _env(self) -> dict[str, str]:
        return {**os.environ, "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(self.run_dir),
                "SPARK_WORKER_DIR": str(self.run_dir / "work"), "PYSPARK_PYTHON": self.python or "python3"}

    def master(self) -> Detached:
        return Detached("spark-master", [self._spark_class(), "org.apache.spark.deploy.master.Master", "--host", HOST,
                                         "--port", str(self.port), "--webui-port", str(self.master_ui_port)],
                        self.run_dir, marker="org.apache.spark.deploy.master.Master", env=self._env())

    def worker(self) -> Detached:
        return Detached("spark-worker", [self._spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                                         "--webui-port", str(self.worker_ui_port), "--cores", str(self.cores),
                                         "--memory", self.memory, "--work-dir", str(self.run_dir / "work"),
                                         self.master_url],
                        self.run_dir, marker="org.apache.spark.deploy.worker.Worker", env=self._env())

    def alive_workers(self) -> int:
        """How many workers the master counts as alive (its UI's JSON); 0 if it does not answer."""
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.master_ui_port}/json/", timeout=3) as resp:
                return int(json.load(resp).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def start(self, timeout: float = 120.0) -> None:
        master, worker = self.master(), self.worker()
        if not master.running():
            if not port_free(self.port):
                raise PlatformError(f"cannot start the Spark master on {HOST}:{self.port}: the port is in use "
                                    "(set MIRRORFLOW_PLATFORM_SPARK_PORT to another port)")
            master.start()
        master.wait_started(f"the Spark master on {self.master_url}", lambda: port_accepts(self.port), timeout)
        worker.start()
        worker.wait_started("the Spark worker to register with the master", self.alive_workers, timeout)

    def stop(self) -> bool:
        worker_stopped = self.worker().stop(grace=20)
        return self.master().stop(grace=20) and worker_stopped


# --------------------------------------------------------------------------- an isolated platform


#: The demo topology's bootstrap ports, in cluster order (c1..c4).
DEMO_PORTS = ("19092", "19093", "19094", "19095")


def isolated_platform(run_dir: Path, topology_text: str, schedule: str, **extra: str) -> tuple[dict[str, str],
                                                                                                dict[str, str]]:
    """The environment of a ``scripts/platform_mode.py`` of its own: run dir, free ports, its topology.

    ``topology_text`` is the demo's topology (or one like it); its four cluster
    ports are replaced by free ones and it is written next to ``run_dir``.
    Returns the environment (without the caller's Airflow settings) and the
    clusters' bootstrap addresses. Used by the platform tests and the
    scheduler latency benchmark, which run beside whatever else runs here.
    """
    from mirrorflow_dev.process import free_port

    names = ("k1", "k2", "k3", "k4", "ui", "s3", "connect", "pg", "redis", "spark", "spark_ui", "worker_ui", "logs",
             "trigger_logs", "health")
    ports = {name: free_port() for name in names}
    bootstraps = {}
    for index, default in enumerate(DEMO_PORTS, 1):
        topology_text = topology_text.replace(default, str(ports[f"k{index}"]))
        bootstraps[f"c{index}"] = f"{HOST}:{ports[f'k{index}']}"
    run_dir.mkdir(parents=True, exist_ok=True)
    topology = run_dir.parent / f"{run_dir.name}-topology.yaml"
    topology.write_text(topology_text)
    env = {k: v for k, v in os.environ.items() if not (k.startswith("AIRFLOW") or k == "MIRROR_TOPOLOGY")}
    env.update({
        "MIRRORFLOW_PLATFORM_RUN_DIR": str(run_dir),
        "MIRRORFLOW_PLATFORM_TOPOLOGY": str(topology),
        "MIRRORFLOW_PLATFORM_SCHEDULE": schedule,
        "MIRRORFLOW_PLATFORM_UI_PORT": str(ports["ui"]),
        "MIRRORFLOW_PLATFORM_S3_PORT": str(ports["s3"]),
        "MIRRORFLOW_PLATFORM_SPARK_CONNECT_PORT": str(ports["connect"]),
        "MIRRORFLOW_PLATFORM_PG_PORT": str(ports["pg"]),
        "MIRRORFLOW_PLATFORM_REDIS_PORT": str(ports["redis"]),
        "MIRRORFLOW_PLATFORM_SPARK_PORT": str(ports["spark"]),
        "MIRRORFLOW_PLATFORM_SPARK_MASTER_UI_PORT": str(ports["spark_ui"]),
        "MIRRORFLOW_PLATFORM_SPARK_WORKER_UI_PORT": str(ports["worker_ui"]),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(ports["logs"]),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(ports["trigger_logs"]),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(ports["health"]),
        **extra,
    })
    return env, bootstraps


def metadata_query(env: dict[str, str], sql: str, *params: object) -> list[tuple]:
    """``sql``'s rows from the metadata database of the platform that ``env`` (:func:`isolated_platform`) started."""
    import json

    import psycopg2

    run_dir = Path(env["MIRRORFLOW_PLATFORM_RUN_DIR"])
    secret = json.loads((run_dir / "secrets.json").read_text())["postgres"]
    conn = psycopg2.connect(host=HOST, port=int(env["MIRRORFLOW_PLATFORM_PG_PORT"]), user="airflow",
                            password=secret, dbname="airflow")
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params or None)
            return cur.fetchall()
    finally:
        conn.close()
