"""Who may answer an approval (``approvals.approvers``): ids that can never match are refused by name, and the
requester never approves their own change. Pure rules, no Airflow; the operator applies them
(tests/dags/test_approvals.py answers for real)."""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.offsets.failover import _moves, stale_positions
from mirrorflow.offsets.position import Position
from mirrorflow.topology import Topology
from mirrorflow.topology.approvals import ApproversInvalid, check_approvers, may_answer, self_approval
from tests.unit.topologies import BASE


def test_an_empty_list_means_anyone_but_the_requester():
    assert may_answer([], "alice") is None  # anyone: the operator refuses the requester's own approval
    assert may_answer(["alice", "bob"], "alice") == ["bob"]
    assert may_answer(["alice", "bob"], None) == ["alice", "bob"]
    with pytest.raises(ApproversInvalid, match="lists only 'alice', who requested this change"):
        may_answer(["alice"], "alice")
    assert self_approval("alice", ("alice", "alice"))
    assert self_approval("alice", ("7", "alice"))  # FAB: numeric id, the name is the user name
    assert not self_approval("alice", ("bob", None))
    assert not self_approval(None, ("alice", "alice"))  # unknown requester (a scheduled run): cannot tell


def test_an_approver_the_auth_manager_can_never_match_is_named():
    check_approvers(["alice"], "simple", ["admin", "alice"])
    with pytest.raises(ApproversInvalid, match=r"'bob' is not a user of the simple auth manager.*known: admin, alice"):
        check_approvers(["alice", "bob"], "simple", ["admin", "alice"])
    check_approvers(["12", "7"], "fab")
    with pytest.raises(ApproversInvalid, match="'alice' can never answer: the FAB auth manager's user ids are numeric"):
        check_approvers(["12", "alice"], "fab")
    check_approvers(["anything"], None)  # an auth manager whose ids cannot be checked: taken as given


@pytest.mark.parametrize("approvers, says", [
    ([""], "non-empty string"), ([" alice"], "non-empty string"), (["alice", "alice"], "'alice' is listed twice")])
def test_malformed_approvers_are_refused_naming_the_key(approvers, says):
    with pytest.raises(TopologyError) as caught:
        Topology.parse({**BASE, "approvals": {"enabled": True, "approvers": approvers}})
    assert "approvals.approvers" in str(caught.value) and says in str(caught.value)


def _pos(group: str, partition: int, offset: int) -> Position:
    return Position(group=group, topic="orders", partition=partition, owner="c1", offset=offset, timestamp_ms=None)


def test_a_moved_cut_is_named_per_partition():
    plan = {"g": {"orders[0]": 20, "orders[1]": 5}}
    assert _moves(plan, plan) == []
    assert _moves(plan, {"g": {"orders[0]": 30, "orders[1]": 5}}) == ["g orders[0] 20 -> 30"]
    assert _moves(plan, {"g": {"orders[0]": 20}}) == ["g orders[1] 5 -> none"]
    assert stale_positions([_pos("g", 0, 20), _pos("g", 1, 5)], plan) == []
    assert stale_positions([_pos("g", 0, 25), _pos("g", 1, 5)], plan) == ["g orders[0] 20 -> 25"]
    assert stale_positions([_pos("g", 0, 20)], plan) == []  # a partition without a position is not a move
