"""What each link copies in a level run: planning, one step to a module, called in order by :func:`plan`.

- :mod:`~mirrorflow.copy.plan.level`: the orchestrator, :func:`plan`;
- :mod:`~mirrorflow.copy.plan.clusters`: which clusters let this client in;
- :mod:`~mirrorflow.copy.plan.configs`: syncing topic configs (their owners, one plan's worth);
- :mod:`~mirrorflow.copy.plan.acls`: syncing topic ACLs, once per target;
- :mod:`~mirrorflow.copy.plan.shapes`: shaping each target's topics in its source's shape;
- :mod:`~mirrorflow.copy.plan.link`: planning a link: what it reads of its clusters
  (:mod:`~mirrorflow.copy.plan.reads`), where each partition starts
  (:mod:`~mirrorflow.copy.plan.starts`, with :mod:`~mirrorflow.copy.plan.lost`,
  :mod:`~mirrorflow.copy.plan.heals` and :mod:`~mirrorflow.copy.plan.refusals`), and
  its tasks (:mod:`~mirrorflow.copy.plan.tasks`, with the window ends of
  :mod:`~mirrorflow.copy.plan.windows`).
"""

from mirrorflow.copy.plan.level import PLAN_THREADS, plan
from mirrorflow.copy.plan.link import LinkPlan

__all__ = ["PLAN_THREADS", "LinkPlan", "plan"]
