"""Sensors that wait until replication lag, or a consumer group's lag, is within a bound.

Typical uses: hold a failover until the links into the new cluster caught up;
gate a downstream batch on its input being mirrored; wait for a group to drain
before moving it.

Both sensors are deferrable by default (:class:`~mirrorflow_airflow.sensors.base.PollingSensor`):
they check once in the worker (no deferral when the bound already holds, and
configuration mistakes such as an unknown link id fail at once), then hand the
wait to the triggerer (:mod:`mirrorflow_airflow.triggers.lag`), which runs the
very same check. With ``deferrable=False`` they poke like any sensor
(``mode="poke"`` or ``"reschedule"``). Either way a timeout fails the task with
the lag table of the last measurement, so the log says what was still behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirrorflow_airflow.sensors.base import PollingSensor
from mirrorflow_airflow.triggers.base import PollingTrigger
from mirrorflow_airflow.triggers.lag import ConsumerGroupLagTrigger, ReplicationLagTrigger


class ReplicationLagSensor(PollingSensor):
    """Wait until links are within ``max_records`` uncopied records and ``max_seconds`` of age.

    :param links: link ids (``c1.L3``); ``None`` for every link of every level.
    :param topics: topic names or regexes narrowing the topology's topics; ``None`` for all.
    :param max_records: most records a link-partition may still have to copy (0: fully caught up).
    :param max_seconds: oldest age a not-yet-copied message may have; ``None``: not checked.
    :param deferrable: wait in the triggerer (default) instead of a worker slot.
    """

    check = ReplicationLagTrigger.CHECK
    template_fields: Sequence[str] = ("links", "topics")

    def __init__(self, *, links: list[str] | None = None, topics: list[str] | None = None, max_records: int = 0,
                 max_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.links, self.topics = links, topics
        self.max_records, self.max_seconds = max_records, max_seconds

    def check_kwargs(self) -> dict[str, Any]:
        return {"links": None if self.links is None else list(self.links),
                "topics": None if self.topics is None else list(self.topics),
                "max_records": self.max_records, "max_seconds": self.max_seconds, "timeout": self.check_timeout}

    def make_trigger(self, deadline: float) -> PollingTrigger:
        return ReplicationLagTrigger(**self.check_kwargs(), tree=self.tree, poll_interval=self.poke_interval,
                                     deadline=deadline,
                                     max_errors=self.max_errors)

    def what(self) -> str:
        return f"replication lag of {', '.join(self.links) if self.links else 'every link'}"


class ConsumerGroupLagSensor(PollingSensor):
    """Wait until consumer groups on one cluster are within ``max_records`` (and ``max_seconds``).

    :param cluster: the cluster (topology name) where the groups consume.
    :param groups: group names or regexes (full match); each must match a group with committed offsets.
    :param max_records: most records a group may still have to consume per partition.
    :param max_seconds: oldest age of an unconsumed message; ``None``: not checked.
    """

    check = ConsumerGroupLagTrigger.CHECK
    template_fields: Sequence[str] = ("cluster", "groups")

    def __init__(self, *, cluster: str, groups: list[str], max_records: int = 0, max_seconds: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.groups = cluster, groups
        self.max_records, self.max_seconds = max_records, max_seconds

    def check_kwargs(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "groups": list(self.groups), "max_records": self.max_records,
                "max_seconds": self.max_seconds, "timeout": self.check_timeout}

    def make_trigger(self, deadline: float) -> PollingTrigger:
        return ConsumerGroupLagTrigger(**self.check_kwargs(), tree=self.tree, poll_interval=self.poke_interval,
                                       deadline=deadline,
                                       max_errors=self.max_errors)

    def what(self) -> str:
        return f"lag of groups {', '.join(self.groups)} on {self.cluster}"
