"""Names mirrorflow gives its own topics and consumer groups.

A module of its own so that code on Spark executors can name them without
importing the topology package (its validated models pull in pydantic, about
0.3 s of every Python worker's start).
"""

#: Prefix of every topic (and consumer group) mirrorflow creates for itself.
INTERNAL_TOPIC_PREFIX = "_mirrorflow"
