"""Records near a topic's size limit: ``LIMIT`` (5 MiB), ``AT_LIMIT`` (a value whose batch is exactly LIMIT bytes).

:func:`produce_large` writes one such record with a producer allowed twice the
limit, so the broker (not the producer) decides, and returns its delivery error.
"""

from __future__ import annotations

from confluent_kafka import Producer

LIMIT = 5 * 1024 * 1024


#: The value size whose record batch (61 bytes of batch header, 13 of record framing: no key, no headers)
#: is exactly LIMIT bytes; the test shows the broker refuses one byte more.
AT_LIMIT = LIMIT - 74


def produce_large(bootstrap, topic, value):
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2 * LIMIT, "linger.ms": 0})
    errors = []
    producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(60)
    return errors[0]
