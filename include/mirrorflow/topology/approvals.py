"""A second pair of eyes before a failover, a target switch or a decommission (topology key ``approvals``).

Off by default::

    approvals:
      enabled: true
      timeout_minutes: 60          # no answer by then: rejected, nothing changed
      approvers: [alice, bob]      # auth-manager user ids who may answer (default: anyone but the requester)

With it on, ``mirror_failover_consumer_group``, ``mirror_switch_target`` and
``mirror_decommission_cluster`` compute their plan, show it to an approver
through Airflow's human-in-the-loop (Browse, Required Actions), and change
nothing until it is approved (docs/approvals.md).

Who may answer is decided here, without Airflow: the requester never approves
their own change (an empty list means anyone else), and an approver id that
can never match the auth manager's ids is an error by name, not an approval
that silently times out as a rejection.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from mirrorflow.errors import MirrorflowError
from mirrorflow.topology.base import Model

#: What the auth managers mirrorflow knows use as user ids (``HITLUser.id``): the simple auth manager the
#: user name, Flask AppBuilder (FAB) the row id of its user table, a number.
ID_KINDS = {"simple": "user names", "fab": "numeric ids (FAB's user table: Security > List Users)"}
_NUMERIC = re.compile(r"[0-9]+")


class ApproversInvalid(MirrorflowError):
    """``approvals.approvers`` names someone who can never answer; nobody was asked, nothing changed."""


class ApprovalsConfig(Model):
    """Whether operator DAGs wait for an approval before they act, how long, and who may answer."""

    enabled: StrictBool = False
    timeout_minutes: Annotated[StrictInt, Field(ge=1, le=10080)] = 60
    approvers: list[StrictStr] = Field(default_factory=list)

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for user in value:
            if not user or user != user.strip():
                raise PydanticCustomError("approver", "an approver id is a non-empty string without surrounding "
                                                      "spaces, got '{user}'", {"user": user})
            if user in seen:
                raise PydanticCustomError("approver", "'{user}' is listed twice", {"user": user})
            seen.add(user)
        return value


def check_approvers(approvers: Iterable[str], kind: str | None, known: Iterable[str] | None = None) -> None:
    """Raise :class:`ApproversInvalid` naming every approver the auth manager can never match.

    ``kind`` is the auth manager (:data:`ID_KINDS`; ``None``: one whose ids
    cannot be checked); ``known`` its user ids when it can list them.
    """
    approvers = list(approvers)
    if kind == "fab":
        wrong = [u for u in approvers if not _NUMERIC.fullmatch(u)]
        if wrong:
            raise ApproversInvalid(f"approvals.approvers: {', '.join(map(repr, wrong))} can never answer: the FAB "
                                   f"auth manager's user ids are {ID_KINDS['fab']}, not user names")
    if known is not None:
        users = set(known)
        wrong = [u for u in approvers if u not in users]
        if wrong:
            listed = ", ".join(sorted(users)) or "none"
            raise ApproversInvalid(f"approvals.approvers: {', '.join(map(repr, wrong))} is not a user of the "
                                   f"{kind or 'configured'} auth manager, whose ids are "
                                   f"{ID_KINDS.get(kind or '', 'its own')} (known: {listed})")


def may_answer(approvers: Iterable[str], requester: str | None) -> list[str] | None:
    """Who Airflow may let answer: the approvers but the requester; ``None``: anyone (the requester refused later).

    Raises :class:`ApproversInvalid` when the requester is the only approver: nobody could approve.
    """
    listed = list(approvers)
    if not listed:
        return None
    others = [u for u in listed if u != requester]
    if not others:
        raise ApproversInvalid(f"approvals.approvers lists only {requester!r}, who requested this change and may not "
                               "approve it: add someone else")
    return others


def self_approval(requester: str | None, responder_ids: Iterable[str | None]) -> bool:
    """Whether the answer came from the person who asked for the change (any of their ids: id or name)."""
    return requester is not None and requester in {r for r in responder_ids if r}
