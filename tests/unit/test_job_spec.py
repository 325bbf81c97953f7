"""The level job's spec (JSON in MIRRORFLOW_JOB), its topic rule and its result, without Kafka or Spark."""

from __future__ import annotations

import json

import pytest

from mirrorflow.copy.spec import JOB_ENV, JobResult, JobSpec, LinkJob, LinkReport, PartitionError
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology.model import TopicSelector

SECRET = "hunter2-very-secret"


def spec(**overrides) -> JobSpec:
    data = dict(
        level=3,
        run_id="scheduled__2024-03-10T12:00:00+00:00",
        topics=("orders", "payments\\..*"),
        links=(
            LinkJob("c1.L3", 3, "c1", "c4", max_bytes_per_second=5000, max_records_per_run=100,
                    max_bytes_per_run=65536, txn_records=2000),
            LinkJob("c2.L3", 3, "c2", "c4", exactly_once=False),
        ),
        clusters={
            "c1": {"bootstrap.servers": "h1:9092", "security.protocol": "SASL_SSL", "sasl.username": "mirror",
                   "sasl.password": SECRET},
            "c2": {"bootstrap.servers": "h2:9092"},
            "c4": {"bootstrap.servers": "h4:9092", "ssl.key.password": SECRET, "enable.idempotence": True,
                   "linger.ms": 5},
        },
        slots=6,
        align_configs=True,
        copy_threads=3,
        topic_configs={"default_owner": "c1", "owners": [["payments\\..*", "c2"]], "exclude": ["segment.ms"],
                       "on_local_change": "keep_target"},
        acl_sync={"owner": "c1", "topics": ["orders"], "groups": [], "principals": {"c4": {"User:a": "User:b"}},
                  "write": "read"},
    )
    data.update(overrides)
    return JobSpec(**data)


# --------------------------------------------------------------------------- JSON round trip


def test_json_round_trip():
    original = spec()
    text = original.to_json()
    assert isinstance(json.loads(text), dict)
    again = JobSpec.from_json(text)
    assert again == original
    assert isinstance(again.topics, tuple) and isinstance(again.links, tuple)
    assert all(isinstance(link, LinkJob) for link in again.links)
    assert again.clusters["c4"]["enable.idempotence"] is True and again.clusters["c4"]["linger.ms"] == 5


def test_a_renaming_clusters_names_travel_with_the_spec_and_its_client_translates():
    from mirrorflow.naming import NameFormat

    acme = NameFormat.of("{tenant}-{topic}", {"tenant": "acme"})
    again = JobSpec.from_json(spec(names={"c4": acme.to_dict()}).to_json())
    assert again.names == {"c4": acme.to_dict()}
    c4, c1 = again.client("c4"), again.client("c1")
    assert (c4.physical("orders"), c4.logical("acme-orders"), c4.logical("orders")) == ("acme-orders", "orders", None)
    assert (c1.physical("orders"), c1.logical("orders")) == ("orders", "orders")  # not renamed: the identity
    assert c4.physical("_mirrorflow.topic-configs") == "_mirrorflow.topic-configs"  # mirrorflow's own: kept
    with pytest.raises(MirrorflowError, match="names"):
        JobSpec.from_dict({**json.loads(spec().to_json()), "names": {"c4": {"template": "{topic}"}}})


def test_json_round_trip_with_defaults():
    original = spec(slots=None, align_configs=False, links=())
    assert JobSpec.from_json(original.to_json()) == original


def test_from_json_defaults_optional_keys():
    data = json.loads(spec().to_json())
    del data["slots"], data["align_configs"], data["copy_threads"]
    again = JobSpec.from_json(json.dumps(data))
    assert again.slots is None and again.align_configs is False and again.copy_threads == 4


def test_from_env_reads_the_variable():
    original = spec()
    assert JobSpec.from_env({JOB_ENV: original.to_json(), "OTHER": "x"}) == original


def test_from_env_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv(JOB_ENV, spec().to_json())
    assert JobSpec.from_env() == spec()
    monkeypatch.delenv(JOB_ENV)
    with pytest.raises(MirrorflowError, match=JOB_ENV):
        JobSpec.from_env()


# --------------------------------------------------------------------------- secrets stay hidden


def test_repr_hides_cluster_settings():
    s = spec()
    for text in (repr(s), str(s), f"{s}", repr([s]), repr({"spec": s})):
        assert SECRET not in text
        assert "h1:9092" not in text and "sasl" not in text
        assert "3 hidden" in text
    assert "c1.L3->c4" in repr(s) and "c2.L3->c4" in repr(s)


def test_repr_of_the_round_tripped_spec_hides_settings_too():
    assert SECRET not in repr(JobSpec.from_env({JOB_ENV: spec().to_json()}))


# --------------------------------------------------------------------------- from_env errors


@pytest.mark.parametrize("environ", [{}, {JOB_ENV: ""}, {"MIRRORFLOW_JOBS": "{}"}])
def test_from_env_unset(environ):
    with pytest.raises(MirrorflowError) as info:
        JobSpec.from_env(environ)
    assert str(info.value).startswith(f"{JOB_ENV} is not set")


def _without(key):
    data = json.loads(spec().to_json())
    del data[key]
    return json.dumps(data)


def _with(**changes):
    data = json.loads(spec().to_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize("text", [
    pytest.param("[]", id="a list"),
    pytest.param("null", id="null"),
    pytest.param("{}", id="empty object"),
    pytest.param(_without("level"), id="no level"),
    pytest.param(_without("clusters"), id="no clusters"),
    pytest.param(_with(level="three"), id="level not a number"),
    pytest.param(_with(links=[{"link_id": "c1.L3"}]), id="link missing fields"),
    pytest.param(_with(links=[{"link_id": "c1.L3", "level": 3, "source": "c1", "target": "c4", "bogus": 1}]),
                 id="link unknown field"),
    pytest.param(_with(clusters={"c1": 5}), id="cluster settings not a mapping"),
    pytest.param(_with(topics=5), id="topics a number"),
])
def test_from_env_malformed_names_the_variable(text):
    with pytest.raises(MirrorflowError) as info:
        JobSpec.from_env({JOB_ENV: text})
    assert str(info.value).startswith(f"{JOB_ENV}: not a valid mirrorflow job spec")


@pytest.mark.parametrize("text", [
    pytest.param("not json", id="not JSON"),
    pytest.param("{'level': 3}", id="python repr, not JSON"),
    pytest.param(spec().to_json()[:-5], id="truncated JSON"),
    pytest.param(_with(clusters=["c1"]), id="clusters a list"),
])
def test_from_env_malformed_json_names_the_variable(text):
    # BUG (job.JobSpec.from_json): json.loads runs outside the try, so text that is not JSON raises a bare
    # JSONDecodeError ("Expecting value: line 1 column 1 (char 0)") that never mentions MIRRORFLOW_JOB; and
    # ``clusters`` given as a list raises a bare AttributeError ('list' object has no attribute 'items'),
    # which the except clause (KeyError, TypeError, ValueError) does not catch.
    try:
        JobSpec.from_env({JOB_ENV: text})
    except MirrorflowError as exc:
        assert JOB_ENV in str(exc)
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"malformed {JOB_ENV} ({text[:40]!r}) raised {type(exc).__name__}: {exc} instead of a "
                    f"MirrorflowError naming {JOB_ENV} (bug in JobSpec.from_json)")
    else:
        pytest.fail(f"malformed {JOB_ENV} ({text[:40]!r}) was accepted")


@pytest.mark.parametrize("text, what", [
    pytest.param(_with(topics="orders"), "topics given as one string", id="topics a string"),
    pytest.param(_with(slots="many"), "slots not an integer", id="slots a string"),
    pytest.param(_with(copy_threads=0), "copy_threads zero", id="copy_threads zero"),
    pytest.param(_with(copy_threads=True), "copy_threads a boolean", id="copy_threads a boolean"),
    pytest.param(_with(topic_configs={"default_owner": "c1", "on_local_change": "win"}), "an unknown policy",
                 id="topic_configs policy"),
    pytest.param(_with(topic_configs="c1"), "topic_configs a string", id="topic_configs a string"),
    pytest.param(_with(acl_sync={"owner": "c1", "write": "all"}), "an unknown write rule", id="acl_sync write"),
])
def test_from_env_refuses_wrong_types_instead_of_coercing_them(text, what):
    # BUG (job.JobSpec.from_json): tuple("orders") silently becomes the patterns ('o','r','d','e','r','s'), so the
    # job would mirror every one-letter topic and not 'orders'; slots is passed through unchecked and only fails
    # later in planning as a bare TypeError (min(slots, ...) in plan_link, slots < 1 in plan.pack).
    try:
        got = JobSpec.from_env({JOB_ENV: text})
    except MirrorflowError as exc:
        assert JOB_ENV in str(exc)
    else:
        pytest.fail(f"{JOB_ENV} with {what} was accepted as topics={got.topics!r}, slots={got.slots!r} "
                    "(bug in JobSpec.from_json: no type checks)")


# --------------------------------------------------------------------------- TopicSelector


@pytest.mark.parametrize("topic", [
    "__consumer_offsets", "__transaction_state", "__anything", "_schemas", "_mirrorflow", "_mirrorflow_offsets",
    "_mirrorflow.checkpoints",
])
@pytest.mark.parametrize("patterns", [[".*"], ["_.*"], ["__consumer_offsets", "_schemas", "_mirrorflow.*"]])
def test_internal_topics_are_never_selected(topic, patterns):
    assert not TopicSelector(patterns).selects(topic)


def test_underscore_topics_that_are_not_internal_are_selected():
    sel = TopicSelector([".*"])
    assert sel.selects("_audit") and sel.selects("_schemas2") and sel.selects("mirrorflow_x")


@pytest.mark.parametrize("topic, selected", [
    ("orders", True), ("orders2", False), ("my-orders", False), ("Orders", False),
    ("payments.eu", True), ("payments.", True), ("paymentsXeu", False), ("payments", False),
    ("x-payments.eu", False),
])
def test_full_match_only(topic, selected):
    assert TopicSelector(["orders", "payments\\..*"]).selects(topic) is selected


def test_no_patterns_select_nothing():
    assert not TopicSelector([]).selects("orders")


def test_selector_from_a_round_tripped_spec():
    sel = TopicSelector(JobSpec.from_json(spec().to_json()).topics)
    assert sel.selects("orders") and sel.selects("payments.us") and not sel.selects("o")


# --------------------------------------------------------------------------- results


def test_partition_error_names_link_clusters_topic_partition_and_offset():
    err = PartitionError("c1.L3", "c1", "c4", "orders", 2, 41, "broker gone")
    assert str(err) == "c1.L3 (c1 -> c4) orders[2] at source offset 41: broker gone"
    assert str(PartitionError("c1.L3", "c1", "c4", "orders", 0, 0, "x")) == \
        "c1.L3 (c1 -> c4) orders[0] at source offset 0: x"
    assert str(PartitionError("c1.L3", "c1", "c4", "orders", 7, None, "x")) == "c1.L3 (c1 -> c4) orders[7]: x"
    assert str(PartitionError("c1.L3", "c1", "c4", "orders", None, None, "blocked")) == \
        "c1.L3 (c1 -> c4) orders: blocked"


def test_summary_of_a_clean_run():
    result = JobResult(3, "r1", tasks=2, plan_s=0.12345, copy_s=1.98765)
    result.links.append(LinkReport("c1.L3", "c1", "c4", partitions=3, planned_records=10, copied=8, skipped=2,
                                   bytes=800))
    result.links.append(LinkReport("c2.L3", "c2", "c4", copied=1, bytes=10))
    result.partitions += [{"copied": 8, "skipped": 2}, {"copied": 0, "skipped": 0}, {"copied": 1, "skipped": 0}]
    summary = result.summary()
    assert summary["ok"] is True and result.ok
    assert summary["errors"] == [] and summary["error_details"] == []
    assert (summary["level"], summary["run_id"]) == (3, "r1")
    assert (summary["copied"], summary["skipped"], summary["bytes"]) == (9, 2, 810)
    assert summary["partitions_copied"] == 2
    assert (summary["spark_tasks"], summary["plan_s"], summary["copy_s"]) == (2, 0.123, 1.988)
    assert [link["link"] for link in summary["links"]] == ["c1.L3", "c2.L3"]
    assert json.loads(result.to_json())["partitions"] == result.partitions


def test_summary_with_errors():
    result = JobResult(3, "r1")
    result.errors.append(PartitionError("c1.L3", "c1", "c4", "orders", 2, 41, "broker gone"))
    result.errors.append(PartitionError("c2.L3", "c2", "c4", "*", None, None, "planning failed: no route"))
    summary = result.summary()
    assert summary["ok"] is False and not result.ok
    assert summary["errors"] == ["c1.L3 (c1 -> c4) orders[2] at source offset 41: broker gone",
                                 "c2.L3 (c2 -> c4) *: planning failed: no route"]
    assert summary["error_details"][0] == {"link": "c1.L3", "source": "c1", "target": "c4", "topic": "orders",
                                           "partition": 2, "offset": 41, "error": "broker gone"}
    assert json.loads(result.to_json())["ok"] is False
