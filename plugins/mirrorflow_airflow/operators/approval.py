"""A second pair of eyes (topology key ``approvals``): the plan shown, nothing changed until it is approved.

Airflow's own human-in-the-loop ``ApprovalOperator`` (Browse, Required Actions):
the approver reads the plan a task before it computed, read-only, and picks
Approve or Reject. What this adds:

- the plan as the request's body (Markdown), from the proposing task's XCom;
- a rejection, or no answer within ``approvals.timeout_minutes`` (the default
  answer is Reject), skips every task that would change something, and says so
  in the log and in an ``approval`` audit line, as does an approval, each naming
  who answered (``approved_by`` then also appears in the action's own audit line);
- a dry run asks nobody: it goes through at once, and the steps behind run as
  the dry run they are, changing nothing (as without approvals).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from mirrorflow.journal import audit
from mirrorflow.topology.approvals import ApprovalsConfig

log = logging.getLogger(__name__)


def responder(answer: dict[str, Any] | None) -> str | None:
    """Who answered an approval (its XCom), ``None`` for a timeout or no approval at all."""
    user = (answer or {}).get("responded_by_user") or {}
    return user.get("name") or user.get("id")


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

    def execute(self, context: Any) -> Any:
        if (context["params"] or {}).get("dry_run"):
            # the steps behind run as the dry run they are, changing nothing, exactly as without approvals
            log.info("dry run: nothing changes, so nobody is asked to approve the %s", self.action)
            return {"dry_run": True, "chosen_options": [], "responded_by_user": None}
        log.info("waiting for an approval of: %s", self.action)
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        # Said before the operator acts on it: on a rejection it skips the rest by raising, and returns nothing.
        if "error" not in event:
            approved = list(event.get("chosen_options") or []) == [self.APPROVE]
            who = responder(event)
            why = "approved" if approved else ("rejected" if who else "no answer in time: rejected by default")
            audit("approval", action=self.action, dag_id=context["dag"].dag_id, run_id=context["run_id"],
                  decision="approve" if approved else "reject", by=who, why=why)
            if approved:
                log.info("%s approved by %s: going ahead", self.action, who)
            else:
                log.warning("%s %s%s: nothing was changed, and the tasks that would have are skipped", self.action,
                            why, f" by {who}" if who else "")
        return super().execute_complete(context, event)
