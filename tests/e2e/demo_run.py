"""What the two demo tests share: free ports, the demo's isolated environment, its final table, and
whether its processes and ports outlived ``stop``."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def final_table(stdout: str) -> dict[str, dict[str, str]]:
    """The demo's per-cluster table (``|``-separated, a header then a rule), as {cluster: {column: cell}}."""
    lines = stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("cluster ") and "|" in line)
    header = [cell.strip() for cell in lines[start].split("|")]
    table = {}
    for line in lines[start + 2:]:
        if "|" not in line:
            break
        cells = dict(zip(header, (cell.strip() for cell in line.split("|"))))
        table[cells["cluster"]] = cells
    return table


def demo_env(run_dir: Path, topology: Path, messages: int, *, ui: int, s3: int, spark: int, worker_logs: int,
             trigger_logs: int, **extra: str) -> dict[str, str]:
    """The demo's environment, isolated: its own run dir, topology and ports, none of the test session's Airflow."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith("AIRFLOW") or k == "MIRROR_TOPOLOGY")}
    env.update({
        "MIRRORFLOW_DEMO_RUN_DIR": str(run_dir),
        "MIRRORFLOW_DEMO_TOPOLOGY": str(topology),
        "MIRRORFLOW_DEMO_UI_PORT": str(ui),
        "MIRRORFLOW_DEMO_PASSWORD": "e2e-only-password",
        "MIRRORFLOW_DEMO_MESSAGES": str(messages),
        "MIRRORFLOW_DEMO_S3_PORT": str(s3),
        "MIRRORFLOW_DEMO_SPARK_CONNECT_PORT": str(spark),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker_logs),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_logs),
        # The DAG files are parsed when the demo starts and not again every 30 s (Airflow's default): the
        # tests change neither them nor the topology, and each parse of the twelve files costs a process each.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        **extra,
    })
    return env


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (an ended process its new parent has not reaped yet)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
