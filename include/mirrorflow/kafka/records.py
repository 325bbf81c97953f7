"""Reading a consumed record's parts where confluent-kafka itself can fail.

A header key that is not valid UTF-8 (Kafka's protocol carries bytes; another
client or a broken producer may write them) makes confluent-kafka 2.16's
``Message.headers()`` raise ``SystemError`` ("returned a result with an
exception set", caused by a ``UnicodeDecodeError``) and keep a half-built list
on the message: a second call returns it, and touching the missing key crashes
the interpreter (a segfault, which takes a Spark worker or an Airflow task with
it). Every reader of headers goes through :func:`read_headers`, which raises
:class:`~mirrorflow.errors.UnreadableRecord` instead, naming the record; nobody
asks that message again.
"""

from __future__ import annotations

import operator
from typing import Any

from mirrorflow.errors import UnreadableRecord

Headers = list[tuple[str, bytes | None]]

#: Called through ``operator.methodcaller``, never as ``msg.headers()``: CPython 3.11 specialises a hot
#: ``msg.headers()`` call site into a direct call that skips the "result with an exception set" check,
#: and the half-built list then comes back without an error. A methodcaller call is always checked.
_headers = operator.methodcaller("headers")


def read_headers(msg: Any, cluster: str | None = None) -> Headers | None:
    """``msg.headers()``; a header key that is not UTF-8 raises :class:`UnreadableRecord` naming the record.

    ``cluster``: the cluster ``msg`` was read from, for the error (where the caller knows it).
    """
    try:
        headers: Headers | None = _headers(msg)
        return headers
    except SystemError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, UnicodeDecodeError):
            raise UnreadableRecord(msg.topic(), msg.partition(), msg.offset(), cluster) from cause
        raise
