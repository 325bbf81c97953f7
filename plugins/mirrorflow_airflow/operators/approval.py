"""A second pair of eyes (topology key ``approvals``): the plan shown, nothing changed until it is approved.

Airflow's own human-in-the-loop ``ApprovalOperator`` (Browse, Required Actions):
the approver reads the plan a task before it computed, read-only, and picks
Approve or Reject. What this adds:

- the plan as the request's body (Markdown), from the proposing task's XCom;
- a rejection, or no answer within ``approvals.timeout_minutes`` (the default
  answer is Reject), skips every task that would change something, and says so
  in the log and in an ``approval`` journal line, as does an approval, each naming
  who answered (``approved_by`` then also appears in the action's own journal line);
- a dry run asks nobody: it goes through at once, and the steps behind run as
  the dry run they are, changing nothing (as without approvals);
- the requester never approves their own change: they are left out of the
  approvers Airflow lets answer, and with no ``approvers`` (anyone may answer)
  an approval by the requester counts as a rejection, said by name;
- ``approvers`` are checked against the auth manager before anyone is asked
  (its user names when it can list them, the id format otherwise): an id that
  can never match fails the task by name instead of timing out as a rejection.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.journal import journal_entry
from mirrorflow.topology.approvals import (
    ApprovalsConfig,
    ApproversInvalid,
    check_approvers,
    may_answer,
    self_approval,
)

log = logging.getLogger(__name__)


def responder(answer: dict[str, Any] | None) -> str | None:
    """Who answered an approval (its XCom), ``None`` for a timeout or no approval at all."""
    user = (answer or {}).get("responded_by_user") or {}
    return user.get("name") or user.get("id")


def auth_manager_users() -> tuple[str | None, list[str] | None]:
    """The configured auth manager's kind (``simple``, ``fab``, ``None``: another) and its user ids if it can list them.

    Only the simple auth manager lists its users without a database (they are
    configuration); FAB's ids are checked by their format; others not at all.
    """
    from airflow.configuration import conf

    path = conf.get("core", "auth_manager", fallback="") or ""
    if path.rsplit(".", 1)[-1] == "SimpleAuthManager":
        if conf.getboolean("core", "simple_auth_manager_all_admins", fallback=False):
            return "simple", None  # everyone is an admin and may answer: there is no list to check against
        from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

        return "simple", [u.username for u in SimpleAuthManager.get_users()]
    if path.rsplit(".", 1)[-1] == "FabAuthManager":
        return "fab", None
    return None, None


def requester(context: Any) -> str | None:
    """Who asked for the change: the user who triggered the run (``None`` when Airflow does not know)."""
    run = context.get("dag_run")
    return getattr(run, "triggering_user_name", None) or None


class PlanApprovalOperator(ApprovalOperator):
    """Wait for Approve or Reject of the plan ``plan_task_id`` returned: ``{"subject": ..., "text": Markdown}``."""

    def __init__(self, *, settings: ApprovalsConfig, action: str, plan_task_id: str, **kwargs: Any) -> None:
        super().__init__(
            subject=f"{{{{ ti.xcom_pull(task_ids='{plan_task_id}')['subject'] }}}}",
            body=f"{{{{ ti.xcom_pull(task_ids='{plan_task_id}')['text'] }}}}",
            defaults=ApprovalOperator.REJECT,
            response_timeout=timedelta(minutes=settings.timeout_minutes),
            assigned_users=[{"id": u, "name": u} for u in settings.approvers] or None,
            ignore_downstream_trigger_rules=True,
            **kwargs,
        )
        self.action = action
        self.plan_task_id = plan_task_id
        self.approvers = list(settings.approvers)

    def execute(self, context: Any) -> Any:
        if (context["params"] or {}).get("dry_run"):
            # the steps behind run as the dry run they are, changing nothing, exactly as without approvals
            log.info("dry run: nothing changes, so nobody is asked to approve the %s", self.action)
            return {"dry_run": True, "chosen_options": [], "responded_by_user": None}
        asked_by = requester(context)
        kind, known = auth_manager_users()
        try:
            check_approvers(self.approvers, kind, known)
            allowed = may_answer(self.approvers, asked_by)
        except ApproversInvalid as exc:
            journal_entry("approval", action=self.action, dag_id=context["dag"].dag_id, run_id=context["run_id"],
                          decision="refused", by=None, why=str(exc), requested_by=asked_by)
            raise AirflowFailException(f"{self.action}: nobody was asked, nothing changed: {exc}") from None
        if kind is None and self.approvers:
            log.info("the auth manager's user ids cannot be checked here: %s must be its ids exactly",
                     ", ".join(self.approvers))
        self.assigned_users = [{"id": u, "name": u} for u in allowed] if allowed else None
        if asked_by:
            self.body = f"{self.body}\n\nRequested by **{asked_by}**, who may not approve it."
        log.info("waiting for an approval of: %s (requested by %s; may answer: %s)", self.action,
                 asked_by or "unknown", ", ".join(allowed) if allowed else "anyone but the requester")
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        # Said before the operator acts on it: on a rejection it skips the rest by raising, and returns nothing.
        if "error" not in event:
            approved = list(event.get("chosen_options") or []) == [self.APPROVE]
            who = responder(event)
            why = "approved" if approved else ("rejected" if who else "no answer in time: rejected by default")
            asked_by = requester(context)
            user = event.get("responded_by_user") or {}
            if approved and self_approval(asked_by, (user.get("id"), user.get("name"))):
                # Airflow lets anyone with access answer when no approvers are listed: the rule is kept here
                approved, why = False, f"{asked_by} requested this change and may not approve it: rejected"
                event = {**event, "chosen_options": [self.REJECT]}
            journal_entry("approval", action=self.action, dag_id=context["dag"].dag_id, run_id=context["run_id"],
                          decision="approve" if approved else "reject", by=who, why=why, requested_by=asked_by)
            if approved:
                log.info("%s approved by %s: going ahead", self.action, who)
            else:
                log.warning("%s %s%s: nothing was changed, and the tasks that would have are skipped", self.action,
                            why, f" by {who}" if who else "")
        return super().execute_complete(context, event)
