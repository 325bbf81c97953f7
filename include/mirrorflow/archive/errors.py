"""Errors of the archive, each naming the object, key or partition it is about."""

from __future__ import annotations

from mirrorflow.errors import MirrorflowError


class ArchiveError(MirrorflowError):
    """The archive cannot be used as asked (a bad location, an unreadable manifest, a refused range)."""


class ArchiveConflict(ArchiveError):
    """Two archive objects hold the same offset with different contents.

    Re-runs overwrite the same keys with a superset of the same immutable data,
    so two objects may repeat an offset but must agree on it; if they do not,
    the archive was written from two different histories (a recreated topic,
    an unclean leader election) and no record can be trusted without a person.
    """

    def __init__(self, cluster: str, topic: str, partition: int, offset: int, first_key: str, second_key: str) -> None:
        self.cluster, self.topic, self.partition, self.offset = cluster, topic, partition, offset
        self.keys = (first_key, second_key)
        super().__init__(f"archive of {cluster} {topic}[{partition}]: offset {offset} differs between "
                         f"{first_key} and {second_key}")

    def __reduce__(self):
        return (type(self), (self.cluster, self.topic, self.partition, self.offset, *self.keys))
