"""Records no Kafka client API will write: a header key that is not valid UTF-8, through librdkafka's C API.

confluent-kafka takes header keys as ``str`` and Kafka's Java producer as ``String``;
both encode them as valid UTF-8. Kafka's protocol carries bytes, and other clients
(or a broken producer) write what they like, so the test writes the record with
``rd_kafka_produceva`` from the librdkafka confluent-kafka ships, through ctypes.
"""

from __future__ import annotations

import ctypes
import glob
import os

import confluent_kafka


class _Header(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("val", ctypes.c_void_p), ("size", ctypes.c_ssize_t)]


class _Mem(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _Value(ctypes.Union):  # rd_kafka_vu_t's union, padded as librdkafka pads it
    _fields_ = [("cstr", ctypes.c_char_p), ("i32", ctypes.c_int32), ("mem", _Mem), ("header", _Header),
                ("pad", ctypes.c_char * 64)]


class _VU(ctypes.Structure):
    _fields_ = [("vtype", ctypes.c_int), ("u", _Value)]


#: rd_kafka_vtype_t
_TOPIC, _PARTITION, _VALUE, _HEADER = 1, 3, 4, 9


def _librdkafka() -> ctypes.CDLL:
    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    [path] = glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"))
    lib = ctypes.CDLL(path)
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_produceva.restype = ctypes.c_void_p
    lib.rd_kafka_produceva.argtypes = [ctypes.c_void_p, ctypes.POINTER(_VU), ctypes.c_size_t]
    lib.rd_kafka_error_string.restype = ctypes.c_char_p
    lib.rd_kafka_error_string.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_flush.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_outq_len.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    return lib


def produce_with_header_keys(bootstrap: str, topic: str, partition: int,
                             records: list[tuple[bytes, bytes | None]]) -> None:
    """Produce ``(value, header key bytes or None)`` records in order; each header's value is ``b"v"``."""
    lib = _librdkafka()
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for name, setting in (("bootstrap.servers", bootstrap), ("acks", "all"), ("enable.idempotence", "true")):
        assert lib.rd_kafka_conf_set(conf, name.encode(), setting.encode(), err, 512) == 0, err.value
    producer = lib.rd_kafka_new(0, conf, err, 512)  # RD_KAFKA_PRODUCER; it owns conf from here
    assert producer, err.value
    keep: list[ctypes.Array] = []  # no RD_KAFKA_MSG_F_COPY: the buffers must outlive the flush
    try:
        for value, header_key in records:
            args = (_VU * (4 if header_key is not None else 3))()
            args[0].vtype, args[0].u.cstr = _TOPIC, topic.encode()
            args[1].vtype, args[1].u.i32 = _PARTITION, partition
            payload = ctypes.create_string_buffer(value, len(value))
            args[2].vtype = _VALUE
            args[2].u.mem.ptr, args[2].u.mem.size = ctypes.cast(payload, ctypes.c_void_p), len(value)
            keep.append(payload)
            if header_key is not None:
                name, header_value = ctypes.create_string_buffer(header_key), ctypes.create_string_buffer(b"v", 1)
                keep += [name, header_value]
                args[3].vtype = _HEADER
                args[3].u.header.name = ctypes.cast(name, ctypes.c_char_p)
                args[3].u.header.val, args[3].u.header.size = ctypes.cast(header_value, ctypes.c_void_p), 1
            error = lib.rd_kafka_produceva(producer, args, len(args))
            assert not error, lib.rd_kafka_error_string(error)
        lib.rd_kafka_flush(producer, 30_000)
        assert lib.rd_kafka_outq_len(producer) == 0, "not every record was acknowledged"
    finally:
        lib.rd_kafka_destroy(producer)
