"""The format version of every piece of state mirrorflow keeps, and the one way a version is checked.

State outlives the code that wrote it, across upgrades: checkpoints, positions,
the audit's store and config and grant memory stay on the clusters, the archive
in S3, and the run state in Airflow's Variables. A reader meets one of three cases:

- **the format it writes**: it reads it;
- **an older format** it knows: it reads it, or migrates it once and says so in
  the log by name (:func:`migrated`), never silently;
- **a newer format**: it stops with :class:`NewerFormat`, which names the state,
  where it is, the version found and the newest it reads. A reader that guessed
  instead could drop fields it does not know (a checkpoint's floors) or mistake
  a newer owner for itself (a grant), and lose or repeat data.

:data:`FORMATS` is the table: each kept thing's current version and where it is.
Four kinds carry no number, on purpose. The copy headers (``mirror.copy.flags``,
``mirror.origin``) are a contract: a new format is a new header name. The cut
mark on a group's commit only tells the next translation where it may start
scanning, so an unknown mark costs a longer scan, never a wrong offset. The
archive's progress files are checked for their exact shape, so anything else
stops the archive by name. A run's plans in XCom live for that run only.
CHANGELOG.md says, per release, which of them changed. A format change without a
migration fails the upgrade tests: tests/integration/test_formats.py reads back
what the first release wrote, and tests/dags/test_upgrade.py runs the first
release, then this code, on the same clusters and Airflow database.
Stdlib only: the copy path checks formats on Spark executors too.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from mirrorflow.errors import MirrorflowError

log = logging.getLogger("mirrorflow.formats")


@dataclass(frozen=True)
class Format:
    """One kind of kept state: its current version and where it lives (for messages and the docs)."""

    name: str
    version: int
    where: str


#: Every kind of state mirrorflow keeps outside a run, by name, at the version this code writes.
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("checkpoint", 1, "the commit metadata of group _mirrorflow.link.<link> on each target"),
    Format("positions", 1, "topic _mirrorflow.offsets on each cluster"),
    Format("audit", 1, "topic _mirrorflow.audit on each cluster"),
    Format("topic-configs", 1, "topic _mirrorflow.topic-configs on each follower"),
    Format("acl-grants", 1, "topic _mirrorflow.acl-grants on each follower"),
    Format("archive", 1, "the archive's manifests and Parquet objects in S3"),
    Format("airflow-state", 1, "the mirrorflow_* Variables of an Airflow (marked by mirrorflow_state_format)"),
)}


class NewerFormat(MirrorflowError):
    """State written by a newer mirrorflow: this one refuses to read it rather than guess."""

    def __init__(self, name: str, found: object, where: str) -> None:
        self.name, self.found, self.where = name, found, where
        reads = FORMATS[name].version if name in FORMATS else "?"
        super().__init__(f"{name} at {where} is format {found}; this mirrorflow reads {name} up to format {reads}. "
                         "It was written by a newer mirrorflow: run that version (a downgrade over newer state is "
                         "refused, docs/install.md), and nothing here was changed")

    def __reduce__(self):  # raised on Spark executors, unpickled on the driver
        return (NewerFormat, (self.name, self.found, self.where))


def check(name: str, found: object, where: str) -> int:
    """``found`` when this mirrorflow reads it (the current format or an older one), else :class:`NewerFormat`.

    A version that is not an integer is never coerced: no mirrorflow wrote it as this one's.
    """
    if not isinstance(found, int) or isinstance(found, bool):
        raise NewerFormat(name, repr(found), where)
    if found > FORMATS[name].version:
        raise NewerFormat(name, found, where)
    return found


def check_record(name: str, record: dict, where: str, missing: int = 0) -> int:
    """The format of a JSON record (its ``"v"``; ``missing`` for a record written before it had one), checked."""
    return check(name, record.get("v", missing), where)


def migrated(name: str, old: int, where: str, what: str) -> None:
    """Say, once and by name, that ``where``'s ``name`` was read in format ``old`` and rewritten in the current one."""
    log.warning(json.dumps({"event": "format_migrated", "state": name, "from": old, "to": FORMATS[name].version,
                            "where": where, "what": what}, separators=(",", ":")))
