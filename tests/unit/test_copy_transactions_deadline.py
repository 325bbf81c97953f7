"""The copier's own deadline around transactional producer calls (no broker needed)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow.copy.engine import transactions
from mirrorflow.kafka import deadline


def test_a_producer_call_that_outlives_its_timeout_fails_the_partition_instead_of_hanging():
    """librdkafka's send_offsets_to_transaction can block past its timeout when the coordinator dies."""
    release = threading.Event()
    old_grace, deadline.CALL_GRACE_S = deadline.CALL_GRACE_S, 0.1
    try:
        with pytest.raises(KafkaException) as silent:
            transactions.bounded(lambda: release.wait(60), 0.2, "send_offsets_to_transaction", "c2")
        assert silent.value.abandoned
        assert silent.value.args[0].code() == KafkaError._TIMED_OUT
        assert "send_offsets_to_transaction on target c2 did not return" in silent.value.args[0].str()
        assert transactions.bounded(lambda: 42, 1.0, "commit_transaction", "c2") == 42
        with pytest.raises(KafkaException) as refused:
            transactions.bounded(lambda: (_ for _ in ()).throw(KafkaException(KafkaError(KafkaError._FENCED))),
                               1.0, "commit_transaction", "c2")
        assert not getattr(refused.value, "abandoned", False)
    finally:
        release.set()
        deadline.CALL_GRACE_S = old_grace
