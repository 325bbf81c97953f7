"""For links with ``on_gap: restore``: what the archive restores of each partition's retention gap.

Asked once per link, for every partition whose checkpoint lies below what the
source still holds (:mod:`mirrorflow.copy.heal`: the manifests are read once); a gap the archive does not hold
whole, or an archive that cannot be read, stops its partition by name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mirrorflow.copy.heal.archive import Heal, heal_plans, unavailable
from mirrorflow.copy.spec import JobSpec, LinkJob, PartitionError, link_fields
from mirrorflow.journal import journal_warning

log = logging.getLogger(__name__)


def plan_heals(spec: JobSpec, link: LinkJob, gaps: Mapping[tuple[str, int], tuple[int, int]]
               ) -> dict[tuple[str, int], Heal]:
    """What the archive restores of each partition's retention gap (its position and the source's earliest
    offset); empty unless the link heals from it."""
    if link.on_gap != "restore":
        return {}
    try:
        return heal_plans(spec.archive, spec.archived, link.source, gaps)
    except Exception as exc:  # the archive unreachable or unreadable: those partitions stop, by name
        why = f"the archive cannot be read: {type(exc).__name__}: {exc}"
        log.error("%s: %s", link.link_id, why)
        return {key: unavailable(link.source, key[0], key[1], pos, low, why) for key, (pos, low) in gaps.items()}


def unhealed(spec: JobSpec, link: LinkJob, heal: Heal) -> PartitionError:
    """A gap the archive does not hold whole: nothing restored, the partition stops naming what is missing."""
    journal_warning("gap", run_id=spec.run_id, link=link_fields(link), topic=heal.topic, partition=heal.partition,
                    lost_offsets=[heal.position, heal.earliest - 1], lost=heal.earliest - heal.position,
                    on_gap=link.on_gap, action="stopped: the archive does not hold the whole gap; nothing restored",
                    missing=[[a, b - 1] for a, b in heal.missing], archived=[[a, b - 1] for a, b in heal.covered],
                    unavailable=heal.unavailable)
    log.error("%s %s[%d]: %s", link.link_id, heal.topic, heal.partition, heal.why)
    return PartitionError(link.link_id, link.source, link.target, heal.topic, heal.partition, heal.position, heal.why)
