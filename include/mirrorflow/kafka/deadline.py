"""A deadline of our own around a librdkafka call that may not keep its timeout.

Some librdkafka calls can block far past the timeout they are given: a
transactional step whose coordinator dies mid-call (librdkafka issue 5456), or a
``list_offsets`` whose leader lookup stalls. A copy or a check must fail by name,
never hang a task (or a whole test run), so :func:`within` runs the call in a
helper thread and stops waiting at ``timeout`` plus a grace period. The client
the call was made on is then left to that thread: the caller must not use it
again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

#: Grace beyond the call's own timeout before the caller stops waiting for it.
CALL_GRACE_S = 5.0

T = TypeVar("T")


class CallAbandoned(KafkaException):
    """A call did not return within its deadline; its client is abandoned to the helper thread."""


def within(call: Callable[[], T], timeout: float, what: str) -> T:
    """The result of ``call()``, or :class:`CallAbandoned` (``_TIMED_OUT``) after ``timeout + CALL_GRACE_S``.

    ``what`` names the call (and where it went) in the error and in the helper
    thread's name. Errors raised by the call are raised here unchanged.
    """
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    helper = threading.Thread(target=run, name=f"mirrorflow-{what}"[:60], daemon=True)
    helper.start()
    helper.join(timeout + CALL_GRACE_S)
    if helper.is_alive():
        raise CallAbandoned(KafkaError(KafkaError._TIMED_OUT,
                                       f"{what} did not return within {timeout + CALL_GRACE_S:.0f}s; "
                                       f"the client is abandoned"))
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]
