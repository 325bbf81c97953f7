"""The exception types of mirrorflow.

Every error mirrorflow raises on purpose derives from :class:`MirrorflowError`, so
a task or a shell can tell "mirrorflow refused, with a reason" from a crash.
Each type carries the facts an operator needs (which key, which cluster, which
value) as attributes as well as in its message, so callers can log them as
structured fields instead of parsing text.

This module is stdlib-only: it is imported by everything, including Spark
executors.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any


class MirrorflowError(Exception):
    """Base of every error mirrorflow raises deliberately."""


# --------------------------------------------------------------------------- topology


class TopologyError(MirrorflowError):
    """The topology file (or a topology built in code) is not valid.

    Carries one or more problems, each a ``(path, problem)`` pair where ``path``
    is the key path in the file (``clusters.c1.bootstrap``,
    ``tree.children[1].children[0]``, ``topics[2]``) or, for file-level
    problems, the file name or environment variable. All problems found in one
    pass are reported together so a user fixes the file once, not once per error.

    Deliberately *not* a ``ValueError``: pydantic would swallow a ``ValueError``
    raised inside a validator and re-wrap it as its own error dump.
    """

    def __init__(self, problems: Iterable[tuple[str, str]] | str, problem: str | None = None, *,
                 source: str | None = None) -> None:
        if isinstance(problems, str):
            if problem is None:
                raise TypeError("TopologyError(path, problem): the problem text is missing")
            items = [(problems, problem)]
        else:
            items = [(str(p), str(m)) for p, m in problems]
        if not items:
            raise TypeError("TopologyError needs at least one problem")
        self.problems: tuple[tuple[str, str], ...] = tuple(items)
        self.source = source
        super().__init__(self._render())

    @property
    def path(self) -> str:
        """Key path of the first problem."""
        return self.problems[0][0]

    @property
    def problem(self) -> str:
        """Text of the first problem."""
        return self.problems[0][1]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.problems)

    def with_source(self, source: str) -> TopologyError:
        """The same problems, attributed to a file (used by the loaders)."""
        return TopologyError(self.problems, source=source)

    def _render(self) -> str:
        where = f"invalid topology {self.source}" if self.source else "invalid topology"
        if len(self.problems) == 1:
            path, problem = self.problems[0]
            return f"{where}: {path}: {problem}"
        lines = [f"{where}: {len(self.problems)} problems"]
        lines += [f"  - {path}: {problem}" for path, problem in self.problems]
        return "\n".join(lines)

    def __reduce__(self):  # picklable across processes (Spark, Airflow task runners)
        return (_rebuild_topology_error, (self.problems, self.source))


def _rebuild_topology_error(problems, source):
    return TopologyError(problems, source=source)


class NotInTopologyError(MirrorflowError, LookupError):
    """A name (cluster, link) that the topology does not define."""

    what = "name"

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = tuple(known)
        super().__init__(f"{self.what} {name!r} is not in the topology (known: {', '.join(self.known)})")

    def __str__(self) -> str:  # LookupError would otherwise repr() the message
        return str(self.args[0])

    def __reduce__(self):
        return (type(self), (self.name, self.known))


class UnknownClusterError(NotInTopologyError):
    """A cluster name that the topology does not define."""

    what = "cluster"

    @property
    def cluster(self) -> str:
        return self.name


class UnknownLinkError(NotInTopologyError):
    """A link id (see ``Distributor.link_id``) that the topology does not define."""

    what = "link"


# --------------------------------------------------------------------------- copy flags


class CopyFlagsError(MirrorflowError, ValueError):
    """A copy-flags value cannot be used (base of the copy-flags errors)."""


class MalformedCopyFlags(CopyFlagsError):
    """A ``mirror.copy.flags`` header that mirrorflow did not write.

    ``raw`` holds the offending header value(s) exactly as read (bytes or
    ``None``), ``reason`` says what is wrong with them.
    """

    def __init__(self, raw: Any, reason: str) -> None:
        self.raw = raw
        self.reason = reason
        super().__init__(f"malformed copy flags header {raw!r}: {reason}")

    def __reduce__(self):
        return (MalformedCopyFlags, (self.raw, self.reason))


# --------------------------------------------------------------------------- Kafka


class KafkaOperationError(MirrorflowError):
    """A Kafka call failed; says on which cluster, doing what, with which error code.

    ``error`` is whatever confluent-kafka reported (usually a ``KafkaError``); its
    code, name and retriability are copied into plain attributes so this module
    needs no confluent-kafka import.
    """

    def __init__(self, cluster: str, operation: str, error: Any) -> None:
        self.cluster = cluster
        self.operation = operation
        self.error = error
        self.code = _call(error, "code")
        self.code_name = _call(error, "name")
        self.retriable = bool(_call(error, "retriable") or False)
        self.detail = _call(error, "str") or str(error)
        code = f" [{self.code_name}]" if self.code_name else ""
        super().__init__(f"cluster {cluster}: {operation} failed{code}: {self.detail}")

    def __reduce__(self):
        # KafkaError objects do not always pickle; keep the facts, not the object
        return (_rebuild_kafka_error, (self.cluster, self.operation, self.detail, self.code, self.code_name,
                                       self.retriable))


class ErrorFacts:
    """What a pickled KafkaOperationError (or a subclass) keeps of the original KafkaError."""

    def __init__(self, detail: str, code: Any, code_name: Any, retriable: bool) -> None:
        self._facts = (detail, code, code_name, retriable)

    def str(self) -> str:
        return self._facts[0]

    def code(self) -> Any:
        return self._facts[1]

    def name(self) -> Any:
        return self._facts[2]

    def retriable(self) -> bool:
        return self._facts[3]

    # ``str`` above is the KafkaError accessor name and shadows the builtin inside this class body
    def __str__(self) -> builtins.str:
        return self._facts[0]


def _rebuild_kafka_error(cluster, operation, detail, code, code_name, retriable):
    return KafkaOperationError(cluster, operation, ErrorFacts(detail, code, code_name, retriable))


class OffsetGone(KafkaOperationError):
    """The records at a bounded read's position are no longer on the cluster; the read stopped there.

    Retention or ``delete_records`` moved the partition's log start past the
    position, or the log was truncated below it, and Kafka answered the fetch
    with OFFSET_OUT_OF_RANGE. :mod:`mirrorflow.kafka.ranges` never lets a
    consumer jump to another offset then (``auto.offset.reset=error``): what
    was between is said, never skipped in silence.
    """

    def __init__(self, cluster: str, operation: str, error: Any, topic: str, partition: int, offset: int) -> None:
        super().__init__(cluster, operation, error)
        self.topic, self.partition, self.offset = topic, partition, offset
        self.args = (f"cluster {cluster}: offset {offset} of {topic}[{partition}] is no longer on the cluster (its "
                     f"log start moved past it, or the log was truncated below it): {operation} stopped there, "
                     f"nothing skipped ({self.detail})",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):
        return (OffsetGone, (self.cluster, self.operation, ErrorFacts(self.detail, self.code, self.code_name,
                                                                      self.retriable),
                             self.topic, self.partition, self.offset))


class ReadStalled(KafkaOperationError):
    """A bounded read got neither a record nor a partition's end for its timeout; names where it stood."""

    def __init__(self, cluster: str, operation: str, error: Any, topic: str, partition: int, offset: int) -> None:
        super().__init__(cluster, operation, error)
        self.topic, self.partition, self.offset = topic, partition, offset

    def __reduce__(self):
        return (ReadStalled, (self.cluster, self.operation, ErrorFacts(self.detail, self.code, self.code_name,
                                                                       self.retriable),
                              self.topic, self.partition, self.offset))


class UnreadableRecord(MirrorflowError, ValueError):
    """A consumed record the Kafka client cannot read: a header key that is not valid UTF-8.

    Kafka's protocol carries header keys as bytes; confluent-kafka decodes them
    and fails without naming the record. :func:`mirrorflow.kafka.records.read_headers`
    raises this instead, naming the record (and the cluster, where its caller knows it).
    """

    def __init__(self, topic: str, partition: int, offset: int, cluster: str | None = None) -> None:
        self.topic, self.partition, self.offset, self.cluster = topic, partition, offset, cluster
        where = f"cluster {cluster}: " if cluster else ""
        super().__init__(f"{where}the record at {topic}[{partition}] offset {offset} has a header key that is not "
                         f"valid UTF-8, which the Kafka client cannot read")

    def __reduce__(self):
        return type(self), (self.topic, self.partition, self.offset, self.cluster)


class ClusterUnreachable(MirrorflowError):
    """A cluster did not answer at its bootstrap address."""

    def __init__(self, cluster: str, bootstrap: str, detail: str) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self.detail = detail
        super().__init__(f"cluster {cluster} ({bootstrap}) is unreachable: {detail}")

    def __reduce__(self):
        return (ClusterUnreachable, (self.cluster, self.bootstrap, self.detail))


class ClusterLoginFailed(ClusterUnreachable):
    """A cluster answered but would not let this client in: credentials, certificates or protocol.

    A :class:`ClusterUnreachable` so that every place that sets an unreachable
    cluster aside does so for this one too, with the cause in its reason.
    """

    def __init__(self, cluster: str, bootstrap: str, detail: str) -> None:
        super().__init__(cluster, bootstrap, detail)
        self.args = (f"cluster {cluster} ({bootstrap}) refused the connection: {detail}",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):
        return (ClusterLoginFailed, (self.cluster, self.bootstrap, self.detail))


def _call(obj: Any, name: str) -> Any:
    attr = getattr(obj, name, None)
    if callable(attr):
        try:
            return attr()
        except Exception:  # a foreign error object: never fail while building an error
            return None
    return None
