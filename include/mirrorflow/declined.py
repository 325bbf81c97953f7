"""What mirrorflow declined to do on its own, and why: one record, reported every run.

mirrorflow changes clusters without a person (topic configs, ACLs). Its rule is
that nothing it does on its own deletes data, widens access, removes access for
everyone or acts on a stale decision unless the topology asks for it in so many
words (docs/safety.md). When a sync meets such a change it does not make it; it
makes a :class:`Declined` instead, and the same record reaches every place a
person looks: a WARNING in the task log (every run, not once), the level run's
result (``links[].declined``), the Mirror page's problems and the ``declined``
alert kind. ``allow`` names the topology key that would let it through, or is
empty when nothing may (a wildcard principal never travels).

Pure; the syncs build these, the copy's report carries them as dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

#: Which automatic action declined: the topic-config sync or the ACL sync.
Area = Literal["topic_configs", "acl_sync"]


@dataclass(frozen=True)
class Declined:
    """One change a sync would have made and did not."""

    area: Area
    #: The cluster the change was for.
    cluster: str
    #: What it is about: a topic (``orders``), a key of a topic (``orders retention.ms``), an ACL binding.
    subject: str
    #: The change, as it would have been made (``set retention.ms=86400000``, ``create <binding>``).
    action: str
    #: Why it was not made, in a sentence.
    reason: str
    #: The topology key that would allow it; empty: nothing does.
    allow: str = ""

    def explain(self) -> str:
        allow = f"; the topology allows it with {self.allow}" if self.allow else ""
        return f"{self.area} declined on {self.cluster}: {self.action} ({self.subject}): {self.reason}{allow}"

    def key(self) -> str:
        """Stable while the same change keeps being declined (an alert's identity)."""
        return f"{self.area}:{self.cluster}:{self.subject}"

    def to_dict(self) -> dict[str, str]:
        return {**asdict(self), "message": self.explain()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Declined:
        return cls(area=data["area"], cluster=str(data["cluster"]), subject=str(data["subject"]),
                   action=str(data["action"]), reason=str(data["reason"]), allow=str(data.get("allow") or ""))
