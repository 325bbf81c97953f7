"""Local stand-ins for production infrastructure: real Apache Kafka brokers on loopback.

Used by the test fixtures and the demo; nothing here is imported by the mirroring code
itself. See :mod:`mirrorflow.local.kafka`.
"""
