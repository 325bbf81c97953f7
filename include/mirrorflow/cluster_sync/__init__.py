"""What mirrorflow changes on a cluster besides its data: topic shapes, topic configs, topic ACLs.

Copying records into a cluster is :mod:`mirrorflow.copy`; keeping the cluster
*itself* in step (its topics' shape, configs and ACLs) is this room, hence its
name. It holds the rules that decide what to change on a cluster (pure, each
verdict explaining itself) and the calls that change it, journal it and remember
what mirrorflow made, so nothing made by hand is undone. The ACL sync keeps one
name wherever a reader meets it: the topology key and model ``acl_sync``
(:mod:`mirrorflow.topology.acl_sync`), its rule
:mod:`~mirrorflow.cluster_sync.acl_plan`, its calls
:mod:`~mirrorflow.cluster_sync.acl_sync`. By module, each rule beside its sync:

- :mod:`~mirrorflow.cluster_sync.shape_plan`: what a target's topics need to be in
  their source's shape: partitions, travelling configs, conflicts (pure);
  :mod:`~mirrorflow.cluster_sync.shape_sync` carries a plan out (``apply_shape``,
  ``sync_topic_shapes``);
- :mod:`~mirrorflow.cluster_sync.ownership`: whose travelling configs a topic
  follows, and what becomes of a follower's own value (pure);
  :mod:`~mirrorflow.cluster_sync.config_sync` reads the owners for a plan,
  :mod:`~mirrorflow.cluster_sync.config_memory` keeps what was applied on each follower;
- :mod:`~mirrorflow.cluster_sync.acl_plan`: which topic ACLs travel from their
  owner and as what (pure); :mod:`~mirrorflow.cluster_sync.read_only_guard`: the
  read-only guard, a read-only cluster's denies (pure);
  :mod:`~mirrorflow.cluster_sync.acl_sync` creates and deletes both and records
  what mirrorflow made.

The ACLs mirrorflow's own principal needs are another matter:
:mod:`mirrorflow.needed_acls`.

The rule: this room sits on :mod:`mirrorflow.kafka` (through its face) and the base
layer, below the topology, which validates its settings with the pure rules here;
it never imports a room above it. Outside ``cluster_sync/`` import from here: these
names are the room's face (tests/unit/test_layers.py holds it). The syncs' names
are loaded on first use: they import confluent-kafka, which the topology's
validation never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorflow.cluster_sync.acl_plan import (
    MAX_DELETE_SHARE,
    WRITING,
    Grant,
    GrantPlan,
    GrantRules,
    Refusal,
    Selection,
    UnmappedRule,
    WriteRule,
    arrival,
    as_on,
    is_wildcard,
    mirrors_every,
    plan_grants,
    select,
    travels,
)
from mirrorflow.cluster_sync.ownership import (
    LOCAL_POLICIES,
    ConfigOwnership,
    KeyVerdict,
    LocalPolicy,
    TopicVerdict,
    decide,
    keeps_less,
)
from mirrorflow.cluster_sync.read_only_guard import GUARD, Guard, covers, deny, plan_guard
from mirrorflow.cluster_sync.shape_plan import (
    ConfigAlign,
    ConfigDrift,
    OwnedConfigs,
    PartitionAdd,
    PartitionCountConflict,
    ShapePlan,
    ShapeWarning,
    TopicCreate,
    plan_shape,
    with_headroom,
)
from mirrorflow.faces import on_first_use

if TYPE_CHECKING:
    from mirrorflow.cluster_sync.acl_sync import (
        GrantOwner,
        GrantResult,
        GuardChange,
        apply_grants,
        move_groups,
        read_grants,
    )
    from mirrorflow.cluster_sync.config_memory import read_records, write_records
    from mirrorflow.cluster_sync.config_sync import ConfigOwners
    from mirrorflow.cluster_sync.shape_sync import OwnerSide, ShapeResult, apply_shape, sync_topic_shapes

#: The syncs' names (they import confluent-kafka), and the module of this package each comes from.
_LAZY = {
    "GrantOwner": "acl_sync", "GrantResult": "acl_sync", "GuardChange": "acl_sync", "apply_grants": "acl_sync",
    "move_groups": "acl_sync", "read_grants": "acl_sync", "read_records": "config_memory",
    "write_records": "config_memory", "ConfigOwners": "config_sync", "OwnerSide": "shape_sync",
    "ShapeResult": "shape_sync", "apply_shape": "shape_sync", "sync_topic_shapes": "shape_sync",
}


__getattr__ = on_first_use(__name__, _LAZY)


__all__ = [
    "ConfigAlign",
    "ConfigDrift",
    "ConfigOwners",
    "ConfigOwnership",
    "GUARD",
    "Grant",
    "GrantOwner",
    "GrantPlan",
    "GrantResult",
    "GrantRules",
    "Guard",
    "GuardChange",
    "KeyVerdict",
    "LOCAL_POLICIES",
    "LocalPolicy",
    "MAX_DELETE_SHARE",
    "OwnedConfigs",
    "OwnerSide",
    "PartitionAdd",
    "PartitionCountConflict",
    "Refusal",
    "Selection",
    "ShapePlan",
    "ShapeResult",
    "ShapeWarning",
    "TopicCreate",
    "TopicVerdict",
    "UnmappedRule",
    "WRITING",
    "WriteRule",
    "apply_grants",
    "apply_shape",
    "arrival",
    "as_on",
    "covers",
    "decide",
    "deny",
    "is_wildcard",
    "keeps_less",
    "mirrors_every",
    "move_groups",
    "plan_grants",
    "plan_guard",
    "plan_shape",
    "read_grants",
    "read_records",
    "select",
    "sync_topic_shapes",
    "travels",
    "with_headroom",
    "write_records",
]
