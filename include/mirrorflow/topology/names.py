"""How one cluster names what is mirrored (topology key ``clusters.<c>.names``): topics and consumer groups.

Optional; without it a cluster stores every topic and group under its logical
name, as before. With it, each kind is a format over the logical name, or a plain
prefix as the simple case::

    clusters:
      c1:
        bootstrap: "broker1:9092"
        names:
          topics: "{tenant}-{instance}-{environment}-{topic}"
          groups: "{tenant}-{instance}-{environment}-{group}"
          values: {tenant: acme, instance: main, environment: prod}
      c2:
        bootstrap: "broker2:9092"
        names: {topic_prefix: "acme-prod-", group_prefix: "acme-prod-"}

``topics:`` patterns of the topology match logical names. The cluster's schema
subjects follow its topic names unless ``schemas.clusters.<c>.subject_format``
says otherwise (:mod:`mirrorflow.naming` holds the format rules; docs/naming.md
the whole story).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from mirrorflow.naming import GROUP, TOPIC, NameFormat, format_problems, topic_name_problems
from mirrorflow.topology.base import Model


class ClusterNames(Model):
    """One cluster's formats for topic and group names (identity unless set)."""

    topics: StrictStr | None = None
    topic_prefix: StrictStr | None = None
    groups: StrictStr | None = None
    group_prefix: StrictStr | None = None
    values: dict[StrictStr, StrictStr] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _formats(self) -> ClusterNames:
        for kind, logical, fmt, prefix in (("topics", TOPIC, self.topics, self.topic_prefix),
                                          ("groups", GROUP, self.groups, self.group_prefix)):
            if fmt is not None and prefix is not None:
                raise PydanticCustomError("names_both", "give {kind} or {kind_prefix}, not both",
                                          {"kind": kind, "kind_prefix": f"{kind[:-1]}_prefix"})
            if prefix is not None and ("{" in prefix or "}" in prefix):
                raise PydanticCustomError("names_prefix", "{key} is a plain prefix: no placeholders, got {value!r}",
                                          {"key": f"{kind[:-1]}_prefix", "value": prefix})
            if fmt is not None:
                problems = format_problems(fmt, self.values, logical)
                if problems:
                    raise PydanticCustomError("names_format", "{kind}: {problems}",
                                              {"kind": kind, "problems": "; ".join(problems)})
        bad = topic_name_problems(self.topic_naming())
        if bad:
            raise PydanticCustomError("names_topic_chars", "{key}: {problems}",
                                      {"key": "topics" if self.topics is not None else "topic_prefix",
                                       "problems": "; ".join(bad)})
        return self

    def _naming(self, fmt: str | None, prefix: str | None, logical: str) -> NameFormat:
        if fmt is not None:
            return NameFormat.of(fmt, self.values, logical)
        if prefix is not None:
            return NameFormat(prefix + "{" + logical + "}", prefix, "")
        return NameFormat.identity(logical)

    def topic_naming(self) -> NameFormat:
        return self._naming(self.topics, self.topic_prefix, TOPIC)

    def group_naming(self) -> NameFormat:
        return self._naming(self.groups, self.group_prefix, GROUP)

    @property
    def renames(self) -> bool:
        """Whether this cluster stores anything under a name other than the logical one."""
        return not (self.topic_naming().is_identity and self.group_naming().is_identity)

    def filled(self) -> dict[str, str]:
        """What the cluster stores topics and groups under, values filled in: what a live cluster is held to."""
        return {kind: fmt.render("{" + logical + "}") for kind, logical, fmt in
                (("topics", TOPIC, self.topic_naming()), ("groups", GROUP, self.group_naming()))}


def renamed_live(recorded: Mapping[str, Mapping[str, str]], now: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Each cluster whose names differ from what the level runs recorded for it, explained (empty: none).

    A changed format on a live cluster is not something a run can follow: it would make
    empty topics under the new names and copy only what is new into them, leaving the
    history under the old ones. So it is refused until the operator puts the key back, or
    takes the cluster out and onboards it again under the new names (docs/naming.md).
    """
    problems = []
    for cluster, formats in sorted(now.items()):
        before = recorded.get(cluster)
        if not before:
            continue  # a cluster no run has named yet
        changed = [f"{kind} from {before.get(kind)!r} to {formats[kind]!r}" for kind in ("topics", "groups")
                   if before.get(kind) != formats[kind]]
        if changed:
            problems.append(
                f"clusters.{cluster}.names changed on a live cluster: {'; '.join(changed)} (the level runs "
                f"recorded the first). A run does not follow it: it would copy only new records into empty topics "
                f"under the new names and leave the history under the old ones. Put the key back, or take {cluster} "
                f"out (mirror_decommission_cluster) and onboard it again with the new names (mirror_onboard_cluster, "
                f"field names): its backfill copies the history under them, and the old topics stay as they are "
                f"(docs/naming.md, 'Changing a live cluster's names')")
    return problems
