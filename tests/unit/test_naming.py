"""Names per cluster (include/mirrorflow/naming.py): formats render one-to-one and parse back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorflow.naming import GROUP, NameFormat, topic_name_problems, translate

LONG = NameFormat.of("{tenant}-{instance}-{environment}-{topic}",
                     {"tenant": "acme", "instance": "main", "environment": "prod"})
SHORT = NameFormat.of("{tenant}-{environment}-{topic}", {"tenant": "acme", "environment": "prod"})
PLAIN = NameFormat.identity()


def test_a_topic_renamed_from_one_clusters_pattern_to_anothers():
    assert LONG.render("orders") == "acme-main-prod-orders"
    assert translate("acme-main-prod-orders", LONG, SHORT) == "acme-prod-orders"
    assert translate("acme-prod-orders", SHORT, PLAIN) == "orders"
    assert translate("orders", PLAIN, LONG) == "acme-main-prod-orders"


def test_a_name_outside_a_format_does_not_parse():
    assert SHORT.parse("acme-prod-eu-orders") == "eu-orders"  # a logical name may hold the separator
    assert LONG.parse("acme-prod-orders") is None
    assert LONG.parse("acme-main-prod-") is None  # nothing left for the logical part
    assert PLAIN.is_identity and not LONG.is_identity


def test_a_group_format_uses_its_own_placeholder():
    groups = NameFormat.of("{tenant}.{group}", {"tenant": "acme"}, GROUP)
    assert groups.render("billing") == "acme.billing" and groups.parse("acme.billing") == "billing"
    with pytest.raises(ValueError, match=r"\{group\} must occur exactly once"):
        NameFormat.of("{tenant}.{topic}", {"tenant": "acme"}, GROUP)


@pytest.mark.parametrize(("template", "values", "problem"), [
    ("{tenant}-{topic}", {"tenant": "a{b}"}, "values must not hold braces: tenant"),
    ("{topic}", {"topic": "x"}, "values must not set 'topic'"),
])
def test_bad_formats_name_the_problem(template, values, problem):
    with pytest.raises(ValueError, match=problem.replace("{", r"\{").replace("}", r"\}")):
        NameFormat.of(template, values)


def test_a_topic_format_with_characters_kafka_refuses_is_named():
    assert topic_name_problems(NameFormat.of("{tenant}/{topic}", {"tenant": "acme"})) == [
        "'{tenant}/{topic}' puts '/' in topic names (Kafka allows letters, digits, '.', '_', '-')"]
    assert topic_name_problems(LONG) == []


@given(st.text(alphabet="abc-._", min_size=1, max_size=12), st.text(alphabet="abc-._", min_size=1, max_size=12))
def test_render_is_one_to_one_and_parse_undoes_it(a, b):
    for fmt in (LONG, SHORT, PLAIN):
        assert fmt.parse(fmt.render(a)) == a
        assert (fmt.render(a) == fmt.render(b)) == (a == b)
