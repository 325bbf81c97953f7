"""A permission the broker refused, said as an operator reads ACLs: who, which operation, on what, doing what.

Kafka answers a missing ACL with a bare ``TOPIC_AUTHORIZATION_FAILED`` (or
``GROUP_``, ``TRANSACTIONAL_ID_``, ``CLUSTER_``): it names neither the principal
nor the operation, and often not the resource. The code that made the call knows
all three, so it states what it needed (:class:`Need`) and :func:`refusal` turns
the error into one sentence that maps onto one line of docs/security.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError

from mirrorflow.errors import ErrorFacts, KafkaOperationError
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.principal import principal_of

#: Kafka's authorization errors, by the resource type each is about.
AUTHORIZATION_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
}


def is_refusal(code: Any) -> bool:
    return code in AUTHORIZATION_CODES


#: The one name of Kafka's CLUSTER resource, on which cluster-wide operations are granted.
CLUSTER_RESOURCE = "kafka-cluster"


@dataclass(frozen=True)
class Need:
    """One permission a call needs: ``operation`` (Kafka's name) on a resource of ``resource_type``."""

    resource_type: str
    name: str
    operation: str


class NotAuthorized(KafkaOperationError):
    """The cluster refused the principal an operation on a resource; the facts are attributes too.

    A :class:`KafkaOperationError`, so that every handler of a failed Kafka call
    handles this one, with the sentence that names the missing ACL.
    """

    def __init__(self, cluster: str, principal: str | None, need: Need, doing: str, error: Any) -> None:
        super().__init__(cluster, doing, error)
        self.principal, self.need, self.doing = principal, need, doing
        who = principal or "mirrorflow's principal"
        self.args = (f"cluster {cluster} refused {who} {need.operation} on {need.resource_type} {need.name}: "
                     f"{doing} ({self.code_name}; docs/security.md lists the ACLs)",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):
        # KafkaError objects do not always pickle: keep the facts
        return (NotAuthorized, (self.cluster, self.principal, self.need, self.doing,
                                ErrorFacts(self.detail, self.code, self.code_name, self.retriable)))


def refusal(cluster: str, settings: Mapping[str, Any], error: Any, doing: str, *needs: Need) -> NotAuthorized | None:
    """``error`` as a :class:`NotAuthorized` when it is an authorization error, else ``None``.

    Of ``needs``, the one whose resource type the error is about is named; an
    error about a type the caller did not expect still names the type.
    """
    code = error.code() if callable(getattr(error, "code", None)) else None
    kind = AUTHORIZATION_CODES.get(code)
    if kind is None:
        return None
    need = next((n for n in needs if n.resource_type == kind), Need(kind, "(the one this call names)", "access"))
    return NotAuthorized(cluster, principal_of(settings), need, doing, error)


def call_failed(client: ClusterClient, doing: str, error: Any, *needs: Need) -> KafkaOperationError:
    """The error of a failed call on ``client``: a :class:`NotAuthorized` for a refused permission."""
    return refusal(client.name, client.settings, error, doing, *needs) or KafkaOperationError(client.name, doing,
                                                                                               error)
