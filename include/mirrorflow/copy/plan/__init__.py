"""What each link copies in a level run (moved here whole, to be cut into steps)."""

from mirrorflow.copy.plan.link import PLAN_THREADS, LinkPlan, plan

__all__ = ["PLAN_THREADS", "LinkPlan", "plan"]
