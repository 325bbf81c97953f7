"""Names mirrorflow gives its own topics and consumer groups.

A module of its own so that code on Spark executors can name them without
importing the topology package (its validated models pull in pydantic, which
every Python worker would pay for at its start).
"""

#: Prefix of every topic (and consumer group) mirrorflow creates for itself.
INTERNAL_TOPIC_PREFIX = "_mirrorflow"

#: Topics that are never selected for mirroring, whatever ``topics`` says.
INTERNAL_TOPIC_NAMES = frozenset({"_schemas"})
INTERNAL_TOPIC_PREFIXES = ("__", INTERNAL_TOPIC_PREFIX)


def is_internal_topic(topic: str) -> bool:
    """Kafka's own topics (``__*``), the schema registry's ``_schemas`` and mirrorflow's ``_mirrorflow*``."""
    return topic in INTERNAL_TOPIC_NAMES or topic.startswith(INTERNAL_TOPIC_PREFIXES)
