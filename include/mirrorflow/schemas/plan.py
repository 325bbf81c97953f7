"""What one target registry needs so that it serves the primary's state: writes, or conflicts.

The plan compares the primary's records, with subjects translated into the
target's naming, to the target's records, subject by subject:

* nothing differs: nothing is written (a rerun changes nothing);
* the target lacks records or holds older ones: they are written;
* the target holds a *different* schema under the same id, or under the same
  translated subject and version: that subject is a conflict. None of its
  records are written, so the target keeps exactly what it had for it; the
  other subjects go on. A subject whose references lead to a stopped subject
  stops too, since the target could not resolve the reference.

Hard deletes whose tombstone the primary no longer holds (compacted away, or
invisible through REST) are still carried: a version the target holds as
soft-deleted, of a subject the primary still has, that the primary no longer
has at all, is removed from the target. Subjects the primary does not know are
never touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.naming import NameFormat
from mirrorflow.schemas.records import (
    CONFIG,
    MODE,
    SCHEMA,
    Key,
    RegistryState,
    Value,
    content,
    same_value,
)

#: Order of writes: schemas first (by id, so a referenced schema precedes its users), then the rest.
_KIND_ORDER = {SCHEMA: 0, "DELETE_SUBJECT": 1, "CLEAR_SUBJECT": 2, CONFIG: 3, MODE: 4}


@dataclass(frozen=True)
class Write:
    """One record to make true on the target."""

    key: Key                   # in the target's naming
    value: Value               # None: tombstone (hard delete, removed config or mode)
    primary_subject: str | None
    previous: Value            # what the target held (the REST store needs it to pick the call)

    @property
    def kind(self) -> str:
        """Audit kind: schema, config, mode or delete."""
        if self.key.keytype == SCHEMA:
            return "delete" if self.value is None or self.value.get("deleted") else "schema"
        if self.key.keytype in (CONFIG, MODE):
            return self.key.keytype.lower()
        return "delete"

    @property
    def schema_id(self) -> int | None:
        source = self.value if self.value is not None else self.previous
        return source.get("id") if source is not None and self.key.keytype == SCHEMA else None

    def sort_key(self) -> tuple[Any, ...]:
        return (_KIND_ORDER.get(self.key.keytype, 9), self.schema_id or 0, self.key.subject or "",
                self.key.version or 0)


@dataclass(frozen=True)
class Conflict:
    """A subject that was not synced to a cluster, and why; nothing was written for it there."""

    cluster: str
    subject: str               # the target's subject name
    primary_subject: str
    version: int | None
    schema_id: int | None
    reason: str

    def __str__(self) -> str:
        where = f"cluster {self.cluster}: subject {self.subject!r}"
        if self.version is not None:
            where += f" version {self.version}"
        if self.schema_id is not None:
            where += f" id {self.schema_id}"
        return f"{where}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "subject": self.subject, "primary_subject": self.primary_subject,
                "version": self.version, "id": self.schema_id, "reason": self.reason}


@dataclass
class TargetPlan:
    cluster: str
    writes: list[Write] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    #: Primary subjects that do not parse with the primary's format: reported, left alone.
    unparsable: list[str] = field(default_factory=list)
    subjects: int = 0


def _translate_value(value: Value, subject: str | None, refs: dict[str, str]) -> Value:
    if value is None:
        return None
    out = dict(value)
    if "subject" in out:
        out["subject"] = subject
    if out.get("references"):
        out["references"] = [{**r, "subject": refs[r["subject"]]} for r in out["references"]]
    return out


def plan_target(cluster: str, primary: RegistryState, target: RegistryState, source: NameFormat,
                dest: NameFormat, keytypes: Iterable[str] | None = None) -> TargetPlan:
    """The writes that bring ``target`` to the primary's state, and the subjects that conflict.

    ``keytypes`` limits the records to those the target's store can hold (REST
    has no subject-delete records: its deletes are per version).
    """
    kinds = frozenset(keytypes) if keytypes is not None else None
    plan = TargetPlan(cluster)
    names: dict[str, str] = {}
    for name in primary.subjects():
        topic = source.parse(name)
        if topic is None:
            plan.unparsable.append(name)
        else:
            names[name] = dest.render(topic)
    ids = target.by_id()
    per_subject: dict[str | None, list[Write]] = {}
    stopped: dict[str, Conflict] = {}

    def stop(subject: str, key: Key | None, schema_id: int | None, reason: str) -> None:
        stopped.setdefault(subject, Conflict(cluster, names[subject], subject, key.version if key else None,
                                             schema_id, reason))

    for subject in [None, *names]:
        new_subject = None if subject is None else names[subject]
        writes: list[Write] = []
        for key in primary.keys_of(subject):
            if kinds is not None and key.keytype not in kinds:
                continue
            value = primary.get(key)
            refs = {}
            for ref in (value or {}).get("references") or ():
                if ref["subject"] not in names:
                    # only a subject's schema carries references: the global (None) pass holds config and mode
                    assert subject is not None and value is not None
                    stop(subject, key, value["id"],
                         f"references subject {ref['subject']!r}, which is not in the primary's subject format")
                    break
                refs[ref["subject"]] = names[ref["subject"]]
            if subject in stopped:
                break
            new_key = Key(key.keytype, new_subject, key.version)
            want = _translate_value(value, new_subject, refs)
            have = target.get(new_key)
            if key.keytype == SCHEMA and want is not None:
                if have is not None and (have["id"] != want["id"] or content(have) != content(want)):
                    assert subject is not None  # a SCHEMA key always names its subject (Key.from_bytes, RestStore)
                    stop(subject, key, want["id"],
                         f"the target holds a different schema for this version (id {have['id']}); "
                         "not overwritten")
                    break
                holder = ids.get(want["id"])
                if holder is not None and content(holder) != content(want):
                    assert subject is not None  # as above
                    stop(subject, key, want["id"],
                         f"the target holds a different schema under id {want['id']} (subject "
                         f"{holder.get('subject')!r} version {holder.get('version')}); not overwritten")
                    break
            if not same_value(key.keytype, want, have):
                writes.append(Write(new_key, want, subject, have))
        if subject not in stopped:
            per_subject[subject] = writes
    _carry_lost_hard_deletes(primary, target, source, dest, names, per_subject)
    _stop_dependents(primary, names, stopped, per_subject, cluster)
    plan.conflicts = sorted(stopped.values(), key=lambda c: c.subject)
    plan.writes = sorted((w for ws in per_subject.values() for w in ws), key=Write.sort_key)
    plan.subjects = len(names)
    return plan


def _carry_lost_hard_deletes(primary: RegistryState, target: RegistryState, source: NameFormat,
                             dest: NameFormat, names: dict[str, str],
                             per_subject: dict[str | None, list[Write]]) -> None:
    for key, have in target.entries.items():
        if key.keytype != SCHEMA or have is None or not have.get("deleted"):
            continue
        topic = dest.parse(key.subject or "")
        if topic is None:
            continue
        subject = source.render(topic)
        if Key(SCHEMA, subject, key.version) in primary:
            continue
        if subject not in per_subject:
            continue  # unknown to the primary (maybe the target's own), or stopped on a conflict: left as it is
        per_subject[subject].append(Write(key, None, subject, have))


def _stop_dependents(primary: RegistryState, names: dict[str, str], stopped: dict[str, Conflict],
                     per_subject: dict[str | None, list[Write]], cluster: str) -> None:
    """A subject referencing a stopped subject stops too (repeated until nothing more stops)."""
    changed = True
    while changed:
        changed = False
        for subject in list(per_subject):
            if subject is None or subject not in names:
                continue
            for key in primary.keys_of(subject):
                value = primary.get(key)
                bad = next((r["subject"] for r in _refs(value) if r["subject"] in stopped), None)
                if bad is not None:
                    assert value is not None  # a reference was found in it
                    stopped[subject] = Conflict(cluster, names[subject], subject, key.version, value["id"],
                                                f"references subject {names[bad]!r}, which stopped on a conflict")
                    del per_subject[subject]
                    changed = True
                    break


def _refs(value: Value) -> Iterable[dict[str, Any]]:
    return (value or {}).get("references") or ()
