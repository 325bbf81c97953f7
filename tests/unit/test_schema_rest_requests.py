"""The HTTP requests the REST store sends to write a target, as Confluent's API documents them.

No registry that keeps explicit ids (IMPORT mode) can be installed here (see
docs/schemas.md), so this is a protocol test, not a server test: a loopback
HTTP server records what confluent-kafka's client sends for mirrorflow and
answers with the documented response shapes. It pins the order that makes an
import safe: IMPORT before registering, explicit id and version in the body,
soft before hard delete, the subject's mode restored afterwards, and a
registry that assigns another id failing only that subject.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mirrorflow.schemas.plan import plan_target
from mirrorflow.schemas.records import CONFIG, MODE, SCHEMA, Key, RegistryState
from mirrorflow.schemas.rest_store import RestStore
from mirrorflow.naming import NameFormat

PLAIN = NameFormat.of("{topic}")


@pytest.fixture
def recorder():
    calls: list[tuple[str, str, object]] = []
    wrong_id_for: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def _answer(self, body) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, method: str):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            calls.append((method, self.path, body))
            return body

        def do_POST(self):
            body = self._record("POST")
            subject = self.path.split("/")[2]
            self._answer({"id": body["id"] + (1000 if subject in wrong_id_for else 0)})

        def do_PUT(self):
            self._answer(self._record("PUT"))

        def do_DELETE(self):
            self._record("DELETE")
            self._answer({"mode": "READWRITE"} if self.path.startswith("/mode") else 1)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", calls, wrong_id_for
    server.shutdown()


def value(subject, version, sid, text='"string"', deleted=False):
    return {"subject": subject, "version": version, "id": sid, "schema": text, "deleted": deleted}


def test_imports_keep_ids_switch_modes_and_delete_in_order(recorder):
    url, calls, _ = recorder
    primary = RegistryState({
        Key(SCHEMA, "orders-value", 1): value("orders-value", 1, 3, deleted=True),
        Key(SCHEMA, "orders-value", 2): value("orders-value", 2, 7, '"int"'),
        Key(SCHEMA, "old-value", 1): None,
        Key(SCHEMA, "events-value", 1): value("events-value", 1, 8, '"long"'),
        Key(CONFIG, "orders-value"): {"compatibilityLevel": "FULL"},
    })
    target = RegistryState({
        Key(SCHEMA, "orders-value", 1): value("orders-value", 1, 3),
        Key(SCHEMA, "old-value", 1): value("old-value", 1, 2, '"float"'),
        Key(MODE, "events-value"): {"mode": "READONLY"},
        Key(MODE, None): {"mode": "READWRITE"},
    })
    store = RestStore("c9", {"url": url})
    plan = plan_target("c9", primary, target, PLAIN, PLAIN, store.keytypes)
    written = []
    assert store.apply(plan.writes, written.append, target) == []
    assert len(written) == len(plan.writes) == 5
    assert [(m, p.split("?")[0], b) for m, p, b in calls] == [
        ("DELETE", "/subjects/old-value/versions/1", None),                       # soft first ...
        ("DELETE", "/subjects/old-value/versions/1", None),                       # ... then permanent
        ("DELETE", "/subjects/orders-value/versions/1", None),                    # soft delete of v1
        ("PUT", "/mode/orders-value", {"mode": "IMPORT"}),
        ("POST", "/subjects/orders-value/versions", {"schema": '"int"', "id": 7, "version": 2}),
        ("PUT", "/mode/events-value", {"mode": "IMPORT"}),
        ("POST", "/subjects/events-value/versions", {"schema": '"long"', "id": 8, "version": 1}),
        ("PUT", "/config/orders-value", {"compatibility": "FULL"}),
        ("DELETE", "/mode/orders-value", None),                                   # back to no subject mode
        ("PUT", "/mode/events-value", {"mode": "READONLY"}),                      # back to what it was
    ]
    assert "permanent=true" in [p for m, p, b in calls if m == "DELETE" and "versions" in p][1].lower()
    # confluent-kafka spells the flag force=True; the registry parses it case-insensitively (Boolean.parseBoolean).
    assert all("force=true" in p.lower() for m, p, b in calls if m == "PUT" and p.startswith("/mode"))


def test_a_registry_that_assigns_another_id_fails_only_that_subject(recorder):
    url, calls, wrong_id_for = recorder
    wrong_id_for.add("a-value")
    primary = RegistryState({Key(SCHEMA, "a-value", 1): value("a-value", 1, 1),
                             Key(SCHEMA, "a-value", 2): value("a-value", 2, 2, '"int"'),
                             Key(SCHEMA, "b-value", 1): value("b-value", 1, 3, '"long"')})
    store = RestStore("c9", {"url": url})
    target = RegistryState({Key(MODE, None): {"mode": "IMPORT"}})  # globally IMPORT: no subject switches
    plan = plan_target("c9", primary, target, PLAIN, PLAIN, store.keytypes)
    written = []
    [failure] = store.apply(plan.writes, written.append, target)
    assert (failure.subject, failure.version, failure.schema_id) == ("a-value", 1, 1)
    assert "assigned id 1001 instead of 1" in failure.reason
    assert [w.key.subject for w in written] == ["b-value"]
    assert [p.split("?")[0] for m, p, b in calls] == ["/subjects/a-value/versions", "/subjects/b-value/versions"]
