"""A fatal error confluent-kafka loses inside flush() (a SystemError) is raised as the fatal error it stands for.

The SystemError cannot be made on demand on a real broker (it needs a fencing to land
while flush serves delivery reports, seen once in a CI run of the two-attempts test),
so a stand-in producer raises what confluent-kafka 2.16 raised there.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorflow.copy.engine.transactions import flush
from mirrorflow.kafka.codes import FENCED_CODES


class _LostError:
    def flush(self, timeout: float) -> int:
        raise SystemError("<method 'flush' of 'cimpl.Producer' objects> returned NULL without setting an exception")


class _Fine:
    def flush(self, timeout: float) -> int:
        return 3


def test_a_lost_fatal_error_is_raised_as_fatal_and_names_the_likely_fencing():
    with pytest.raises(KafkaException) as raised:
        flush(_LostError(), 1.0)
    err = raised.value.args[0]
    assert err.fatal() and err.code() == KafkaError._FATAL and err.code() not in FENCED_CODES
    assert "fenced" in err.str() and "returned NULL" in err.str()


def test_a_flush_that_works_says_how_many_copies_are_unacknowledged():
    assert flush(_Fine(), 1.0) == 3
