"""Peak memory of a Spark job's processes, sampled from the outside.

In ``local[*]`` mode the driver and the executors share one JVM; the Python side
is the driver script (``mirror_level.py``) and the PySpark workers that run the
copy tasks (forked from ``pyspark.daemon``). The sampler walks the process tree
of ``spark-submit`` every ``interval`` seconds and keeps, per role, the highest
resident set size seen (for the workers, the highest *sum* over the workers
alive at one moment). Sampling can miss a peak shorter than the interval; the
numbers are a floor, good to a few MB for a job that runs for seconds.
"""

from __future__ import annotations

import threading

import psutil

MB = 2**20


def role(proc: psutil.Process) -> str | None:
    try:
        name, cmdline = proc.name(), " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    if name == "java" or cmdline.startswith("java ") or "/java " in cmdline:
        return "jvm"
    if "python" in name or "python" in cmdline.split(" ", 1)[0]:
        if "pyspark.daemon" in cmdline or "pyspark/daemon" in cmdline or "pyspark.worker" in cmdline:
            return "python_workers"
        if "mirror_" in cmdline:
            return "python_driver"
        return "python_workers"  # forked workers keep the daemon's command line, or none at all
    return None


class TreeSampler:
    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak: dict[str, int] = {"jvm": 0, "python_driver": 0, "python_workers": 0, "total": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def _sample(self) -> None:
        now: dict[str, int] = {"jvm": 0, "python_driver": 0, "python_workers": 0}
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            kind = role(proc)
            if kind is None:
                continue
            try:
                now[kind] += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        for kind, value in now.items():
            self.peak[kind] = max(self.peak[kind], value)
        self.peak["total"] = max(self.peak["total"], sum(now.values()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self) -> dict[str, float]:
        """Peak resident memory per role, in MiB."""
        self._stop.set()
        self._thread.join(5)
        return {f"{kind}_mib": round(value / MB, 1) for kind, value in self.peak.items()}
