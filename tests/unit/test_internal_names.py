"""mirrorflow's own group and topic names: one home (mirrorflow.internal_names), and values that never change.

The names are on real clusters (committed checkpoints, ACLs, topics): a value that
changed would orphan them, so each is pinned here letter for letter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mirrorflow import internal_names as names

REPO = Path(__file__).resolve().parents[2]


def test_every_name_keeps_its_value():
    assert {k: getattr(names, k) for k in dir(names) if k.endswith(("_GROUP", "_TOPIC", "_PREFIX"))} == {
        "INTERNAL_TOPIC_PREFIX": "_mirrorflow",
        "INTERNAL_GROUP_PREFIX": "_mirrorflow.",
        "OFFSETS_TOPIC": "_mirrorflow.offsets",
        "AUDIT_TOPIC": "_mirrorflow.audit",
        "OFFSETS_READER_GROUP": "_mirrorflow.offsets.reader",
        "OFFSETS_TRANSLATE_GROUP": "_mirrorflow.offsets.resolver",
        "POSITION_SCAN_GROUP": "_mirrorflow.scan",
        "AUDIT_READER_GROUP": "_mirrorflow.audit.reader",
        "AUDIT_DRILL_GROUP": "_mirrorflow.audit.drill",
        "SCHEMAS_READER_GROUP": "_mirrorflow.schemas.reader",
        "LAG_READER_GROUP": "_mirrorflow.lag-reader",
        "VERIFY_GROUP": "_mirrorflow.verify",
        "BACKFILL_SINCE_GROUP": "_mirrorflow.backfill-since",
        "WATERMARKS_GROUP": "_mirrorflow-watermarks",
        "COPY_SCAN_GROUP": "_mirrorflow.copy-scan",
        "HISTORY_GROUP": "_mirrorflow.history",
        "TOPIC_CONFIGS_TOPIC": "_mirrorflow.topic-configs",
        "TOPIC_CONFIGS_READER_GROUP": "_mirrorflow.topic-configs.reader",
        "ACL_GRANTS_TOPIC": "_mirrorflow.acl-grants",
        "ACL_GRANTS_READER_GROUP": "_mirrorflow.acl-grants.reader",
    }
    assert names.checkpoint_group("c1.L1") == "_mirrorflow.link.c1.L1"
    assert names.link_reader_group("c1.L1") == "_mirrorflow.reader.c1.L1"
    assert names.archive_reader_group("c1") == "_mirrorflow.archive.c1"
    assert names.is_internal_group("_mirrorflow.link.c1.L1") and not names.is_internal_group("orders-app")


def test_importable_without_pydantic():
    code = "import sys, mirrorflow.internal_names; assert 'pydantic' not in sys.modules, 'pydantic imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={"PYTHONPATH": str(REPO / "include")})


def test_no_module_spells_an_internal_name_inline():
    """A ``"_mirrorflow…"`` string in code outside internal_names is a name without its home."""
    found = []
    for path in sorted((REPO / "include" / "mirrorflow").rglob("*.py")):
        if path.name == "internal_names.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if '"_mirrorflow' in code or "'_mirrorflow" in code:
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
