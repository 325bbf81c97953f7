"""Subject translation, the ``_schemas`` record codec, and the per-target plan (no servers needed)."""

from __future__ import annotations

import json

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.schemas.plan import plan_target
from mirrorflow.schemas.records import (
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Key,
    RecordError,
    RegistryState,
    decode_value,
)
from mirrorflow.naming import NameFormat, translate
from mirrorflow.topology.model import Topology

PRIMARY = NameFormat.of("{tenant}-{instance}-{environment}-{topic}",
                           {"tenant": "acme", "instance": "main", "environment": "prod"})
SHORT = NameFormat.of("{tenant}-{environment}-{topic}", {"tenant": "acme", "environment": "prod"})
PLAIN = NameFormat.of("{topic}")


def schema(subject: str, version: int, sid: int, text: str = '{"type":"string"}', *, deleted: bool = False,
           kind: str | None = None, refs: list[dict] | None = None) -> dict:
    value = {"subject": subject, "version": version, "id": sid, "schema": text, "deleted": deleted}
    if kind:
        value["schemaType"] = kind
    if refs:
        value["references"] = refs
    return value


def state(*items: tuple[Key, dict | None]) -> RegistryState:
    return RegistryState(dict(items))


# --------------------------------------------------------------------------- subjects


def test_subjects_translate_between_formats_and_keep_dashes_and_suffixes():
    assert translate("acme-main-prod-orders-eu-value", PRIMARY, SHORT) == "acme-prod-orders-eu-value"
    assert translate("acme-main-prod-orders-value", PRIMARY, PLAIN) == "orders-value"
    assert translate("orders-value", PLAIN, PRIMARY) == "acme-main-prod-orders-value"


def test_a_subject_in_another_format_does_not_parse():
    assert PRIMARY.parse("other-main-prod-orders") is None
    assert PRIMARY.parse("acme-main-prod-") is None  # an empty topic part is no subject
    assert translate("orders-value", PRIMARY, SHORT) is None


@pytest.mark.parametrize("template, values, problem", [
    ("{tenant}-orders", {"tenant": "a"}, "{topic} must occur exactly once"),
    ("{topic}-{topic}", {}, "{topic} must occur exactly once"),
    ("{tenant}-{topic}", {}, "no value for {tenant}"),
    ("{tenant-{topic}", {}, "unbalanced braces"),
])
def test_bad_subject_formats_name_the_problem(template, values, problem):
    with pytest.raises(ValueError, match=problem.replace("{", r"\{").replace("}", r"\}")):
        NameFormat.of(template, values)


def test_topology_schemas_section_is_validated_with_key_paths():
    base = {"clusters": {"c1": {"bootstrap": "h:1"}, "c2": {"bootstrap": "h:2"}},
            "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": ["t"]}
    topo = Topology.parse({**base, "schemas": {"primary": "c1", "clusters": {
        "c2": {"subject_format": "{env}-{topic}", "values": {"env": "prod"}}}}})
    assert topo.schemas.registry("c2").subject_naming().render("x") == "prod-x"
    assert topo.schemas.registry("c1").subject_format == "{topic}"
    assert Topology.parse(topo.to_dict()).schemas == topo.schemas
    with pytest.raises(TopologyError, match=r"schemas.clusters.c2: subject_format: no value for \{env\}"):
        Topology.parse({**base, "schemas": {"primary": "c1", "clusters": {"c2": {"subject_format": "{env}-{topic}"}}}})
    with pytest.raises(TopologyError) as err:
        Topology.parse({**base, "schemas": {"primary": "c9", "clusters": {"c3": {}}}})
    assert set(err.value.paths) == {"schemas.primary", "schemas.clusters.c3"}
    with pytest.raises(TopologyError, match="schemas.clusters.c2: via: rest needs exactly one of url or conn_id"):
        Topology.parse({**base, "schemas": {"primary": "c1", "clusters": {"c2": {"via": "rest"}}}})
    with pytest.raises(TopologyError, match="credentials never go in the topology file"):
        Topology.parse({**base, "schemas": {"primary": "c1", "clusters": {
            "c2": {"via": "rest", "url": "http://u:p@reg:8081"}}}})


# --------------------------------------------------------------------------- records


def test_keys_are_written_byte_for_byte_as_the_registries_write_them():
    assert Key(SCHEMA, "s", 3).to_bytes() == b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}'
    assert Key(CONFIG, None).to_bytes() == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert Key(MODE, "s").to_bytes() == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert Key(DELETE_SUBJECT, "s").to_bytes() == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    for key in (Key(SCHEMA, "s", 3), Key(CONFIG, None), Key(MODE, "s")):
        assert Key.from_bytes(key.to_bytes()) == key
    # A key spelled with spaces (Karapace before it canonicalised) reads as the same key.
    assert Key.from_bytes(b'{"keytype": "SCHEMA", "subject": "s", "version": 3, "magic": 1}') == Key(SCHEMA, "s", 3)


@pytest.mark.parametrize("raw, problem", [
    (b"not json", "key is not JSON"),
    (b'{"subject":"s"}', "no keytype"),
    (b'{"keytype":"SCHEMA","subject":"s","magic":1}', "no valid version"),
    (b'{"keytype":"SCHEMA","version":1,"magic":1}', "no subject"),
])
def test_malformed_keys_are_refused_with_the_reason(raw, problem):
    with pytest.raises(RecordError, match=problem):
        Key.from_bytes(raw)


def test_replay_keeps_the_latest_value_per_key_and_tombstones():
    k = Key(SCHEMA, "s", 1)
    records = [(k.to_bytes(), json.dumps(schema("s", 1, 1)).encode()),
               (b'{"keytype":"NOOP","magic":0}', None),
               (k.to_bytes(), json.dumps(schema("s", 1, 1, deleted=True)).encode()),
               (Key(CONFIG, "s").to_bytes(), b'{"compatibilityLevel":"FULL"}'),
               (k.to_bytes(), None)]
    st = RegistryState.replay(records)
    assert st.entries == {k: None, Key(CONFIG, "s"): {"compatibilityLevel": "FULL"}}
    with pytest.raises(RecordError, match="no valid 'id'"):
        decode_value(k, b'{"schema":"x"}')


# --------------------------------------------------------------------------- plan


def test_plan_translates_subjects_and_references_and_orders_by_id():
    ref = "acme-main-prod-address"
    primary = state(
        (Key(SCHEMA, "acme-main-prod-orders-value", 1),
         schema("acme-main-prod-orders-value", 1, 7, "syntax = \"proto3\";", kind="PROTOBUF",
                refs=[{"name": "a.proto", "subject": ref, "version": 1}])),
        (Key(SCHEMA, ref, 1), schema(ref, 1, 5, "syntax = \"proto3\";", kind="PROTOBUF")),
        (Key(CONFIG, "acme-main-prod-orders-value"), {"compatibilityLevel": "FULL"}),
        (Key(CONFIG, None), {"compatibilityLevel": "BACKWARD"}),
        (Key(SCHEMA, "stranger", 1), schema("stranger", 1, 9)),
    )
    plan = plan_target("c2", primary, RegistryState(), PRIMARY, SHORT)
    assert plan.unparsable == ["stranger"]
    assert not plan.conflicts
    assert [(w.key.keytype, w.key.subject, w.schema_id) for w in plan.writes] == [
        (SCHEMA, "acme-prod-address", 5), (SCHEMA, "acme-prod-orders-value", 7),
        (CONFIG, None, None), (CONFIG, "acme-prod-orders-value", None)]
    orders = plan.writes[1].value
    assert orders["subject"] == "acme-prod-orders-value"
    assert orders["references"] == [{"name": "a.proto", "subject": "acme-prod-address", "version": 1}]
    assert [w.kind for w in plan.writes] == ["schema", "schema", "config", "config"]


def test_a_target_in_sync_needs_no_write_even_if_it_spells_the_schema_differently():
    primary = state((Key(SCHEMA, "s", 1), schema("s", 1, 3, '{"type": "record", "name": "R", "fields": []}')))
    target = state((Key(SCHEMA, "s", 1), schema("s", 1, 3, '{"name":"R","type":"record","fields":[]}')))
    assert plan_target("c2", primary, target, PLAIN, PLAIN).writes == []


def test_conflicts_stop_only_their_subject_and_its_dependents():
    primary = state(
        (Key(SCHEMA, "a", 1), schema("a", 1, 1, '"string"')),
        (Key(SCHEMA, "b", 1), schema("b", 1, 2, '"int"')),
        (Key(SCHEMA, "c", 1), schema("c", 1, 3, '"long"')),
        (Key(SCHEMA, "d", 1), schema("d", 1, 4, '"x"', refs=[{"name": "b", "subject": "b", "version": 1}])),
    )
    target = state(
        (Key(SCHEMA, "a", 1), schema("a", 1, 1, '"bytes"')),   # same subject+version, different schema
        (Key(SCHEMA, "other", 1), schema("other", 1, 2, '"float"')),  # id 2 taken by a different schema
    )
    plan = plan_target("c2", primary, target, PLAIN, PLAIN)
    assert [(c.subject, c.version, c.schema_id) for c in plan.conflicts] == [("a", 1, 1), ("b", 1, 2), ("d", 1, 4)]
    assert "different schema for this version" in plan.conflicts[0].reason
    assert "different schema under id 2" in plan.conflicts[1].reason
    assert "references subject 'b', which stopped on a conflict" in plan.conflicts[2].reason
    assert str(plan.conflicts[0]).startswith("cluster c2: subject 'a' version 1 id 1:")
    assert [w.key.subject for w in plan.writes] == ["c"]


def test_deletes_travel_soft_hard_and_lost_tombstones():
    primary = state(
        (Key(SCHEMA, "s", 1), schema("s", 1, 1, deleted=True)),   # soft-deleted on the primary
        (Key(SCHEMA, "s", 2), None),                              # hard-deleted, tombstone still there
        (Key(MODE, "s"), None),
    )
    target = state(
        (Key(SCHEMA, "s", 1), schema("s", 1, 1)),
        (Key(SCHEMA, "s", 2), schema("s", 2, 2, '"int"', deleted=True)),
        (Key(SCHEMA, "s", 3), schema("s", 3, 3, '"long"', deleted=True)),  # tombstone compacted away on the primary
        (Key(SCHEMA, "mine", 1), schema("mine", 1, 4, '"float"')),         # target-only, live: left alone
        (Key(SCHEMA, "gone", 1), schema("gone", 1, 5, '"x"', deleted=True)),  # unknown to the primary: left alone
        (Key(MODE, "s"), {"mode": "READONLY"}),
    )
    plan = plan_target("c2", primary, target, PLAIN, PLAIN)
    got = {(w.key.keytype, w.key.version): (w.kind, w.value) for w in plan.writes}
    assert got[(SCHEMA, 1)][0] == "delete" and got[(SCHEMA, 1)][1]["deleted"] is True
    assert got[(SCHEMA, 2)] == ("delete", None)
    assert got[(SCHEMA, 3)] == ("delete", None)
    assert got[(MODE, None)] == ("mode", None)
    assert len(plan.writes) == 4


def test_rest_targets_get_no_subject_delete_records():
    primary = state((Key(SCHEMA, "s", 1), schema("s", 1, 1, deleted=True)),
                    (Key(DELETE_SUBJECT, "s"), {"subject": "s", "version": 1}))
    plan = plan_target("c2", primary, RegistryState(), PLAIN, PLAIN, keytypes={SCHEMA, CONFIG, MODE})
    assert [w.key.keytype for w in plan.writes] == [SCHEMA]


def test_a_storage_topic_that_topics_would_mirror_is_refused():
    base = {"clusters": {"c1": {"bootstrap": "h:1"}, "c2": {"bootstrap": "h:2"}},
            "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": ["registry-.*"]}
    with pytest.raises(TopologyError, match="schemas.clusters.c2.topic: the registry's storage topic 'registry-store'"):
        Topology.parse({**base, "schemas": {"primary": "c1", "clusters": {"c2": {"topic": "registry-store"}}}})
    Topology.parse({**base, "schemas": {"primary": "c1", "clusters": {"c2": {"topic": "_schemas"}}}})
