"""A Spark Connect session for mirrorflow's jobs, kept warm across micro-batches.

A Connect server keeps each session's Python workers between jobs
(``spark.python.worker.reuse``), but a new session gets new workers, and a
fresh session's first job is much slower than a known session's
(docs/benchmarks.md). Each micro-batch is a new client process (an Airflow task),
so mirrorflow names its session itself: a session id derived from the server's
address and a name, the same for every run. If the server has closed that
session (idle timeout, or by hand) and refuses the id, one fresh random id is
used for this run, and the next run tries the stable one again.

Nothing here imports Airflow; the Airflow operator resolves the ``sc://`` URL
from a ``spark_connect`` connection (token and TLS included) and calls
:func:`session`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any
from urllib.parse import urlsplit

from mirrorflow.errors import MirrorflowError

log = logging.getLogger(__name__)

#: Namespace of mirrorflow's stable session ids (uuid5 of the server's address and the name).
_NAMESPACE = uuid.UUID("6c1f0b8e-3f7a-4a52-9d0e-6d6972726f72")
DEFAULT_NAME = "mirrorflow"
#: Spark Connect's port when the URL names none.
DEFAULT_PORT = 15002


def _split(url: str) -> tuple[str, list[str]]:
    """``sc://host:port/;a=b;c=d`` -> (``sc://host:port``, [``a=b``, ``c=d``])."""
    if not url.startswith("sc://"):
        raise ValueError(f"not a Spark Connect URL (sc://host:port): {url!r}")
    base, _, params = url.partition(";")
    return base.rstrip("/"), [p for p in params.split(";") if p]


def session_id(url: str, name: str = DEFAULT_NAME) -> str:
    """The stable session id for ``name`` on the server at ``url`` (credentials in the URL do not count)."""
    base, _ = _split(url)
    return str(uuid.uuid5(_NAMESPACE, f"{base}|{name}"))


def with_session(url: str, sid: str) -> str:
    """``url`` with its ``session_id`` parameter set to ``sid`` (any other parameter kept)."""
    base, params = _split(url)
    params = [p for p in params if not p.startswith("session_id=")] + [f"session_id={sid}"]
    return f"{base}/;{';'.join(params)}"


def redact(url: str) -> str:
    """``url`` fit for a log line: the token's value hidden."""
    base, params = _split(url)
    shown = [p.split("=", 1)[0] + "=***" if p.lower().startswith("token=") else p for p in params]
    return f"{base}/;{';'.join(shown)}" if shown else base


def check_reachable(url: str, timeout: float = 5.0) -> None:
    """Fail at once, naming the server, if nothing listens at ``url``'s address.

    The Connect client retries an unreachable server with a growing back-off for
    minutes before it gives up; a task should say within seconds that the server
    is down.
    """
    parts = urlsplit(_split(url)[0])
    host, port = parts.hostname or "localhost", parts.port or DEFAULT_PORT
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise MirrorflowError(f"the Spark Connect server {redact(url)} does not answer ({exc}): start it, or "
                              f"point the Spark connection at a running one") from None


#: What a Connect client says when the server under it went away mid-job: its session is gone
#: (the server restarted) or the channel broke (it stopped or was killed).
_SERVER_LOST = ("SESSION_NOT_FOUND", "NO_ACTIVE_SESSION", "StatusCode.UNAVAILABLE", "Connection refused",
                "Socket closed", "failed to connect to all addresses", "Connection reset by peer")


def server_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the Connect server stopped or restarted under the job (not that the job failed)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(mark in text for mark in _SERVER_LOST)


def job_failure(job: str, url: str, conn_id: str, exc: BaseException) -> MirrorflowError:
    """The error a job that did not end on the Connect server at ``url`` fails with, naming the server.

    When the server went away under the job, say so: that is an operator's
    matter, not the data's, and the ranges the job had committed stay committed
    (the next run goes on from its checkpoints and aborts what was left open).
    """
    where = f"{job} on the Spark Connect server {redact(url)} (connection {conn_id})"
    if server_lost(exc):
        return MirrorflowError(f"{where}: the server stopped or restarted during the job; what it had committed "
                               f"stays committed and the next run goes on from there ({type(exc).__name__}: "
                               f"{str(exc)[:300]})")
    return MirrorflowError(f"{where}: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def session(url: str, name: str = DEFAULT_NAME) -> Iterator[Any]:
    """A Spark Connect session on ``url`` under mirrorflow's stable id for ``name`` (see the module doc).

    On leaving, the client's connection is closed but the server's session is not
    released: releasing it would end its warm Python workers, and the server would
    refuse the id from then on. The process is left as it was: a later classic
    SparkContext or ``spark-submit`` from it still works.
    """
    from pyspark.errors import PySparkException

    # The Connect client's own builder: ``pyspark.sql.SparkSession.builder.remote`` would also mark
    # this whole process as a Connect client (SPARK_CONNECT_MODE_ENABLED in os.environ), after
    # which neither this process nor a spark-submit it starts could create a SparkContext.
    from pyspark.sql.connect.session import SparkSession

    check_reachable(url)
    sid = session_id(url, name)
    spark = SparkSession.builder.remote(with_session(url, sid)).create()
    try:
        spark.conf.get("spark.master", None)  # the first call that reaches the server
    except PySparkException as exc:
        if "SESSION_CLOSED" not in str(exc):
            _close(spark)
            raise
        _close(spark)
        fresh = str(uuid.uuid4())
        log.warning("Spark Connect server %s refuses mirrorflow's session %s (closed); this run uses a new "
                    "session %s, whose Python workers start cold", redact(url), sid, fresh)
        spark = SparkSession.builder.remote(with_session(url, fresh)).create()
    try:
        yield spark
    finally:
        _close(spark)


@contextlib.contextmanager
def opening(url: str, name: str = DEFAULT_NAME, then: Callable[[Any], None] | None = None) -> Iterator[Future[Any]]:
    """:func:`session`, opened in a helper thread: the caller plans while it opens; the session as a future.

    A Connect client's start is mostly pyspark's import (about half a second), and
    a level run's plan is mostly waiting on brokers; side by side they overlap.
    ``then`` runs on the session once it is open (tagging it, say). On leaving, the
    opening is waited for and the session closed as :func:`session` closes it; an
    error in opening is raised by the future's ``result()``.
    """
    stack = contextlib.ExitStack()
    opened: Future[Any] = Future()

    def open_() -> None:
        try:
            spark = stack.enter_context(session(url, name))
            if then is not None:
                then(spark)
        except BaseException as exc:  # handed to whoever asks for the session
            opened.set_exception(exc)
        else:
            opened.set_result(spark)

    helper = threading.Thread(target=open_, name="mirrorflow-spark-connect-open", daemon=True)
    helper.start()
    try:
        yield opened
    finally:
        helper.join()
        stack.close()


def _close(spark: Any) -> None:
    """Close the client's connection and keep the session on the server."""
    spark.release_session_on_close = False
    spark.stop()
