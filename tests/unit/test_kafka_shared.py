"""Admin clients shared inside a scope (mirrorflow.kafka.shared): who shares what, and when it ends."""

from __future__ import annotations

import threading

from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.shared import admin_for, discard, shared_count, sharing_admins

# Nothing listens here: a client connects lazily, and these tests never ask it anything.
NOWHERE = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}


def test_outside_a_scope_every_call_gets_a_fresh_client():
    client = ClusterClient("c1", dict(NOWHERE))
    assert admin_for(client) is not admin_for(client)
    assert shared_count() == 0


def test_inside_a_scope_one_client_per_cluster_settings_from_every_thread_until_the_last_scope_ends():
    c1, c1_again = ClusterClient("c1", dict(NOWHERE)), ClusterClient("c1", dict(NOWHERE))
    other_login = ClusterClient("c1", {**NOWHERE, "sasl.username": "someone-else"})
    with sharing_admins():
        first = admin_for(c1)
        from_thread: list[object] = []
        worker = threading.Thread(target=lambda: from_thread.append(admin_for(c1_again)))
        worker.start()
        worker.join()
        assert from_thread == [first]
        assert admin_for(other_login) is not first  # other credentials never share a client
        with sharing_admins():  # nested (or another thread's) scope: the same clients
            assert admin_for(c1) is first
        assert admin_for(c1) is first and shared_count() == 2
    assert shared_count() == 0
    assert admin_for(c1) is not first


def test_a_discarded_client_is_not_handed_out_again():
    client = ClusterClient("c1", dict(NOWHERE))
    with sharing_admins():
        abandoned = admin_for(client)
        discard(abandoned)
        assert admin_for(client) is not abandoned
