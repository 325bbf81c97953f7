"""A polling trigger any mirrorflow wait can reuse: "call this check every N seconds until it says done".

Most mirrorflow waits are the same loop: measure something on the clusters
(lag of some links, a consumer group's position), compare it with a goal, and
try again later. Kafka's client is synchronous, so the measurement runs in a
worker thread (``asyncio.to_thread``) and the triggerer's event loop stays free
for every other trigger. A new wait is then only a *check function*:

.. code-block:: python

    def caught_up(ctx: CheckContext, *, group: str, cluster: str) -> CheckResult:
        client = ctx.client(cluster)          # resolved here, in the triggerer
        ...
        return CheckResult(done=..., detail={...}, summary="...")

and either :class:`PollingTrigger` with ``check="package.module.caught_up"`` or a
small subclass that names its check and its keyword arguments (see
:mod:`mirrorflow_airflow.triggers.lag`).

Why this shape:

- **Triggers are serialized into the metadata database.** Their kwargs must be
  plain JSON and must never hold secrets, so checks receive cluster *names*;
  the topology (``MIRROR_TOPOLOGY``) and each cluster's client settings are
  resolved inside the triggerer, at every poll, through
  :class:`~mirrorflow_airflow.hooks.cluster.MirrorClusterHook`. Kwargs whose
  keys look like secrets are refused when the trigger is built.
- **Connections in the triggerer (Airflow 3.3).** The trigger runner process
  reaches connections and variables through the supervisor
  (``ExecutionAPISecretsBackend``). A *synchronous* ``get_connection()`` from
  a worker thread is forwarded to the event loop with
  ``run_coroutine_threadsafe`` (``TriggerCommsDecoder.send``); called on the
  loop thread itself it would need greenback's portal. Checks run in a worker
  thread, so the ordinary synchronous hook is correct there; ``dag.test()``
  runs triggers in-process with a synchronous comms object, which serves the
  same calls from any thread.
- **A deadline, not a duration.** ``deadline`` is a wall-clock epoch: a trigger
  re-created after a triggerer restart keeps the original deadline. On expiry
  the trigger fires ``{"status": "timeout", ...}`` with the last detail, so the
  task can fail with the numbers instead of a bare "timed out".
- **Transient errors are retried** (a broker restarting is normal); after
  ``max_errors`` failed polls in a row the trigger fires
  ``{"status": "error", "error": ...}``.

Events: ``{"status": "done" | "timeout" | "error", "polls": n, **detail}``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient
from mirrorflow.secrets import is_secret_config
from mirrorflow.topology import Topology

log = logging.getLogger(__name__)


@dataclass
class CheckResult:
    """What a check found: whether the wait is over, the numbers (JSON-able), and one line for the log."""

    done: bool
    detail: dict[str, Any] = field(default_factory=dict)
    summary: str = ""


class CheckContext:
    """What a check needs from Airflow, resolved in the process that runs it (triggerer or worker).

    The topology is read from ``MIRROR_TOPOLOGY`` once per context (a context
    lives for one poll), so an edited file applies from the next poll.
    """

    def __init__(self, topology: Topology | None = None, ns: str = "") -> None:
        self._topology = topology
        #: The tree's namespace when one Airflow runs several (docs/naming.md, "Several trees").
        self.ns = topology.namespace if topology is not None else ns
        self._clients: dict[str, ClusterClient] = {}
        #: Clusters whose client settings could not be resolved, with the reason (no secrets in it).
        self.unresolved: dict[str, str] = {}

    @property
    def topology(self) -> Topology:
        if self._topology is None:
            from mirrorflow_airflow.topology import current_topology

            self._topology = current_topology(ns=self.ns)
        return self._topology

    def client(self, cluster: str) -> ClusterClient:
        """Client settings of one cluster, from the topology and its Airflow connection (if it names one)."""
        if cluster not in self._clients:
            from mirrorflow_airflow.hooks.cluster import MirrorClusterHook

            self._clients[cluster] = MirrorClusterHook(self.topology, cluster).client()
        return self._clients[cluster]

    def clients(self, clusters: Iterable[str] | None = None) -> dict[str, ClusterClient]:
        """Every named cluster (default: all) that resolves; the others land in :attr:`unresolved`."""
        out = {}
        for name in sorted(set(clusters) if clusters is not None else self.topology.clusters):
            try:
                out[name] = self.client(name)
            except Exception as exc:  # a missing connection must not hide the other clusters
                self.unresolved[name] = f"has no client settings ({type(exc).__name__}: {exc})"
                log.warning("cluster %s: %s", name, self.unresolved[name])
        return out

    def link_targets(self) -> dict[str, str]:
        """The operator's target switches (Airflow Variable ``mirrorflow_link_targets``), read now."""
        from mirrorflow_airflow.state import link_targets

        return link_targets(self.ns)


def import_check(path: str) -> Callable[..., CheckResult]:
    """The check function at dotted ``path`` (``package.module.function``)."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise MirrorflowError(f"check {path!r} must be a dotted path: package.module.function")
    try:
        func = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise MirrorflowError(f"check {path!r} cannot be imported: {exc}") from None
    if not callable(func):
        raise MirrorflowError(f"check {path!r} is not a function")
    return func


def run_check(path: str, kwargs: Mapping[str, Any] | None = None, context: CheckContext | None = None,
              ns: str = "") -> CheckResult:
    """Run one check now, in this thread (the sensors' poke mode calls this directly)."""
    result = import_check(path)(context or CheckContext(ns=ns), **dict(kwargs or {}))
    if not isinstance(result, CheckResult):
        raise MirrorflowError(f"check {path!r} returned {type(result).__name__}, not a CheckResult")
    return result


def refuse_secrets(value: Any, path: str = "kwargs") -> None:
    """Trigger kwargs are stored in the database: refuse anything keyed like a secret, and non-JSON values."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if is_secret_config(str(key)):
                raise MirrorflowError(f"{path}.{key}: looks like a secret; trigger kwargs are stored in the "
                                      "metadata database, so pass cluster names and resolve settings in the check")
            refuse_secrets(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            refuse_secrets(item, f"{path}[{i}]")
    elif not isinstance(value, (str, int, float, bool, type(None))):
        raise MirrorflowError(f"{path}: {type(value).__name__} is not JSON; trigger kwargs must be plain JSON")


class PollingTrigger(BaseTrigger):
    """Poll ``check`` (a dotted path) with ``check_kwargs`` every ``poll_interval`` seconds until it is done.

    Subclasses usually fix ``check`` and expose typed kwargs; they then override
    :meth:`trigger_kwargs` so :meth:`serialize` re-creates them with the same
    arguments.
    """

    def __init__(self, *, check: str, check_kwargs: Mapping[str, Any] | None = None, poll_interval: float = 30.0,
                 deadline: float | None = None, max_errors: int = 3, tree: str = "") -> None:
        super().__init__()
        if poll_interval <= 0:
            raise MirrorflowError(f"poll_interval must be positive, got {poll_interval}")
        if max_errors < 1:
            raise MirrorflowError(f"max_errors must be at least 1, got {max_errors}")
        self.check = check
        self.check_kwargs = dict(check_kwargs or {})
        refuse_secrets(self.check_kwargs, "check_kwargs")
        json.dumps(self.check_kwargs)  # plain JSON only (refuse_secrets checked the types)
        import_check(check)  # a typo fails when the task defers, not later in the triggerer
        self.poll_interval = float(poll_interval)
        self.deadline = None if deadline is None else float(deadline)
        self.max_errors = int(max_errors)
        #: The namespace of the tree whose topology the check reads (``""``: the only tree).
        self.tree = str(tree)

    def trigger_kwargs(self) -> dict[str, Any]:
        return {"check": self.check, "check_kwargs": self.check_kwargs, **self._polling_kwargs()}

    def _polling_kwargs(self) -> dict[str, Any]:
        return {"poll_interval": self.poll_interval, "deadline": self.deadline, "max_errors": self.max_errors,
                "tree": self.tree}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        cls = type(self)
        return f"{cls.__module__}.{cls.__qualname__}", self.trigger_kwargs()

    def describe(self) -> str:
        return self.check.rpartition(".")[2]

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = errors = 0
        last: dict[str, Any] = {}
        while True:
            polls += 1
            try:
                result = await asyncio.to_thread(run_check, self.check, self.check_kwargs, None, self.tree)
            except Exception as exc:
                errors += 1
                text = f"{type(exc).__name__}: {exc}"
                self.log.warning("%s poll %d failed (%d of %d in a row): %s", self.describe(), polls, errors,
                                 self.max_errors, text)
                if errors >= self.max_errors:
                    yield TriggerEvent({**last, "status": "error", "error": text, "polls": polls})
                    return
            else:
                errors = 0
                last = result.detail
                if result.done:
                    self.log.info("%s poll %d: done. %s", self.describe(), polls, result.summary)
                    yield TriggerEvent({**result.detail, "status": "done", "polls": polls})
                    return
                self.log.info("%s poll %d: not done yet. %s", self.describe(), polls, result.summary)
            now = time.time()
            if self.deadline is not None and now >= self.deadline:
                yield TriggerEvent({**last, "status": "timeout", "polls": polls})
                return
            delay = self.poll_interval if self.deadline is None else min(self.poll_interval, self.deadline - now)
            await asyncio.sleep(delay)  # the poll cadence: the trigger's whole purpose is to wait
