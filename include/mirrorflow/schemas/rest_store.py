"""A registry reached through its Confluent-compatible REST API (confluent-kafka's client).

For registries whose storage topic must not be written from outside (a managed
registry, or one that keeps its state elsewhere). Reading lists every subject
and version, soft-deleted ones included, and turns them into the same records
the storage topic would hold, so one plan serves both ways in.

Writing keeps ids and versions with the registry's IMPORT mode: a subject that
needs new registrations is switched to IMPORT (``force``, since it may already
hold versions), registered with explicit ``id`` and ``version``, and switched
back to the mode it should have. confluent-kafka's ``register_schema`` sends no
id or version, so that one request goes through the client's own REST session
(same URL, auth, TLS and retries as every other call).

A failed call stops only the subject it belongs to; the other subjects go on.

Reaching a registry over HTTPS with a private CA and basic auth takes the
client's own settings: ``basic.auth.user.info`` (``user:password``) and
``ssl.ca.location`` (a file), or the CA inline as ``ssl.ca.pem`` (and a client
certificate as ``ssl.certificate.pem``/``ssl.key.pem``): confluent-kafka's
client only opens files, so :func:`inline_pem_to_files` writes inline PEM to
private files first. Before reading, one request without the client's retries
checks that the registry lets us in, so a wrong password or an untrusted
certificate fails at once with a sentence naming the registry, the cause and
the setting to fix (:class:`RegistryAccessError`), never a secret.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from mirrorflow.errors import MirrorflowError
from mirrorflow.schemas.plan import Conflict, Write
from mirrorflow.schemas.records import CONFIG, MODE, SCHEMA, Key, RegistryState, config_view
from mirrorflow.secrets import remember

IMPORT = "IMPORT"
#: Inline PEM settings (librdkafka's names) and the file setting of confluent-kafka's registry client each becomes.
INLINE_PEM = {"ssl.ca.pem": "ssl.ca.location", "ssl.certificate.pem": "ssl.certificate.location",
              "ssl.key.pem": "ssl.key.location"}
_pem_dir: str | None = None
_pem_lock = threading.Lock()


class RegistryAccessError(MirrorflowError):
    """The registry refused the login, or its TLS certificate is not trusted: nothing was read or written."""

    def __init__(self, store: str, cause: str, hint: str) -> None:
        self.store, self.cause, self.hint = store, cause, hint
        super().__init__(f"{store}: {cause}: {hint}")

    def __reduce__(self):
        return (RegistryAccessError, (self.store, self.cause, self.hint))


def inline_pem_to_files(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` with each inline PEM setting (``ssl.ca.pem``...) replaced by a private file's path.

    The files (mode 0600, in a 0700 folder of this process, named by a hash of
    their content so a second call reuses them) are removed when the process
    exits. Giving both the inline and the file setting is an error.
    """
    out = dict(conf)
    for inline, location in INLINE_PEM.items():
        pem = out.pop(inline, None)
        if pem is None:
            continue
        if out.get(location) is not None:
            raise MirrorflowError(f"schema registry settings: give {inline} or {location}, not both")
        if not isinstance(pem, str) or "-----BEGIN" not in pem:
            raise MirrorflowError(f"schema registry settings: {inline} must be PEM text (-----BEGIN ...)")
        out[location] = _private_file(pem)
    return out


def _private_file(text: str) -> str:
    global _pem_dir
    with _pem_lock:
        if _pem_dir is None or not os.path.isdir(_pem_dir):
            _pem_dir = tempfile.mkdtemp(prefix="mirrorflow-registry-")  # 0700
            atexit.register(shutil.rmtree, _pem_dir, True)
        path = os.path.join(_pem_dir, hashlib.sha256(text.encode()).hexdigest()[:32] + ".pem")
        if not os.path.exists(path):
            fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(path + ".tmp", path)
    return path


def _without_userinfo(url: str) -> str:
    """The URL as it may be shown: a ``user:password@`` part taken out."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _not_found(exc: Exception) -> bool:
    return getattr(exc, "http_status_code", None) == 404


def _client(conf: Mapping[str, Any]):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(dict(conf))


class RestStore:
    """Read and write one registry's state through its REST API."""

    via = "rest"
    #: Subject deletes are plain version deletes through REST; the topic's DELETE_SUBJECT/CLEAR_SUBJECT records
    #: have no call of their own.
    keytypes = frozenset({SCHEMA, CONFIG, MODE})

    def __init__(self, cluster: str, conf: Mapping[str, Any]) -> None:
        self.cluster = cluster
        remember(conf)  # its password is scrubbed from journal lines and error texts of this process
        self.url = _without_userinfo(str(conf.get("url")))
        self._conf = inline_pem_to_files(conf)
        self._sr = None
        #: Whether the registry has the mode API (known after :meth:`read`); without it ids cannot be kept.
        self.mode_api: bool | None = None

    @property
    def client(self):
        if self._sr is None:
            try:
                self._sr = _client(self._conf)
            except (OSError, ssl.SSLError) as exc:  # a CA or certificate file that is missing or not PEM
                files = ", ".join(f"{k} {self._conf[k]}" for k in INLINE_PEM.values() if self._conf.get(k))
                raise RegistryAccessError(self.describe(), f"cannot load the TLS files ({files})",
                                          f"{type(exc).__name__}: {exc}") from None
        return self._sr

    def describe(self) -> str:
        return f"registry {self.url} of cluster {self.cluster}"

    @property
    def user(self) -> str | None:
        info = self._conf.get("basic.auth.user.info")
        return str(info).split(":", 1)[0] if info else None

    def check_access(self) -> None:
        """One request, without the client's retries: raise :class:`RegistryAccessError` if we are not let in.

        Only the two causes a retry cannot fix are decided here, a refused login
        and an untrusted certificate; anything else (a registry that is down)
        is left to the calls that follow and their retries.
        """
        rest = self.client._rest_client
        base = rest.base_urls[0].rstrip("/")
        try:
            response = rest.session.get(f"{base}/config", headers={"Accept": "application/json"},
                                        timeout=rest.timeout or 30.0)
        except _transport_error(rest.session) as exc:
            verify = _cause(exc, ssl.SSLCertVerificationError)
            if verify is not None:
                raise self._untrusted(verify) from None
            return
        if response.status_code in (401, 403):
            raise self._refused(response.status_code) from None

    def _refused(self, status: int) -> RegistryAccessError:
        user = self.user
        where = f"the login and password of the connection of schemas.clusters.{self.cluster}"
        if status == 403:
            return RegistryAccessError(self.describe(), f"user {user!r} is not allowed to read it (HTTP 403)",
                                       f"give that user read access on the registry, or use another in {where}")
        if user is None:
            return RegistryAccessError(self.describe(), "the registry requires a login (HTTP 401, authentication "
                                       "required) and none is configured", f"set {where} (basic.auth.user.info)")
        return RegistryAccessError(self.describe(), f"the registry refused the login of user {user!r} (HTTP 401, "
                                   "authentication failed)", f"check {where} (basic.auth.user.info)")

    def _untrusted(self, exc: ssl.SSLCertVerificationError) -> RegistryAccessError:
        reason = getattr(exc, "verify_message", None) or str(exc)
        if "mismatch" in reason.lower():
            hint = "use a URL whose host the certificate names (or a certificate that names this host)"
        elif "expired" in reason.lower():
            hint = "the registry needs a valid certificate"
        elif self._conf.get("ssl.ca.location"):
            hint = ("it is not signed by the CA in ssl.ca.location / ssl.ca.pem: give the CA that signed the "
                    "registry's certificate")
        else:
            hint = ("no CA is configured (the system's CAs do not know it): give the CA that signed it as "
                    "ssl.ca.pem (inline PEM) or ssl.ca.location (a file) in the connection's extra")
        return RegistryAccessError(self.describe(), f"the registry's TLS certificate is not trusted ({reason})", hint)

    # ----------------------------------------------------------------- reading

    def read(self) -> RegistryState:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        self.check_access()
        sr = self.client
        sr.clear_caches()
        entries: dict[Key, Any] = {}
        live_subjects = set(sr.get_subjects())
        for subject in sr.get_subjects(deleted=True):
            live = set(sr.get_versions(subject)) if subject in live_subjects else set()
            for version in sr.get_versions(subject, deleted=True):
                reg = sr.get_version(subject, version, deleted=True)
                value: dict[str, Any] = {"subject": subject, "version": version, "id": reg.schema_id,
                                         "schema": reg.schema.schema_str, "deleted": version not in live}
                if reg.schema.schema_type and reg.schema.schema_type != "AVRO":
                    value["schemaType"] = reg.schema.schema_type
                if reg.schema.references:
                    value["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                                           for r in reg.schema.references]
                entries[Key(SCHEMA, subject, version)] = value
            for keytype, read in ((CONFIG, self._subject_config), (MODE, self._subject_mode)):
                try:
                    entries[Key(keytype, subject)] = read(subject)
                except SchemaRegistryError as exc:
                    if not _not_found(exc):
                        raise
        entries[Key(CONFIG, None)] = self._subject_config(None)
        try:
            entries[Key(MODE, None)] = {"mode": sr.get_global_mode()}
            self.mode_api = True
        except SchemaRegistryError as exc:
            if not _not_found(exc):
                raise
            self.mode_api = False  # e.g. Apicurio: "Operation not supported"
        return RegistryState(entries)

    def _subject_config(self, subject: str | None) -> dict[str, Any]:
        path = "config" if subject is None else f"config/{_quote(subject)}"
        return config_view(self.client._rest_client.get(path)) or {}

    def _subject_mode(self, subject: str) -> dict[str, Any]:
        return {"mode": self.client._rest_client.get(f"mode/{_quote(subject)}", {"defaultToGlobal": False})["mode"]}

    # ----------------------------------------------------------------- writing

    def apply(self, writes: Sequence[Write], written: Callable[[Write], None],
              state: RegistryState | None = None) -> list[Conflict]:
        """Make each write true; returns the subjects that failed (their later writes are skipped)."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        registrations = [w for w in writes if w.key.keytype == SCHEMA and w.value is not None and w.previous is None]
        if registrations and self.mode_api is False:
            raise MirrorflowError(
                f"{self.describe()} has no mode API (GET /mode answers 404), so it cannot register with explicit "
                f"ids and versions (IMPORT mode); {len(registrations)} registration(s) not written. Sync this "
                "cluster via: topic, or use a registry with IMPORT mode")
        failed: dict[str | None, Conflict] = {}
        # subject -> its subject-level mode before we set IMPORT (only subjects; a global MODE write pops nothing)
        switched: dict[str | None, Any] = {}
        global_mode = ((state.get(Key(MODE, None)) if state else None) or {}).get("mode")
        moded = {w.key.subject for w in writes if w.key.keytype == MODE}
        for w in writes:
            subject = w.key.subject
            if subject in failed:
                continue
            try:
                if w.key.keytype == SCHEMA:
                    self._schema(w, switched, state, global_mode)
                elif w.key.keytype == CONFIG:
                    self._config(subject, w.value)
                elif w.key.keytype == MODE:
                    self._mode(subject, w.value)
                    switched.pop(subject, None)
            except SchemaRegistryError as exc:
                failed[subject] = Conflict(self.cluster, subject or "<global>", w.primary_subject or "<global>",
                                           w.key.version, w.schema_id, f"the registry refused the write: {exc}")
                continue
            written(w)
        for subject, before in switched.items():
            if subject not in moded:
                self._mode(subject, before)
        return list(failed.values())

    def _schema(self, w: Write, switched: dict[str | None, Any], state: RegistryState | None,
                global_mode: str | None) -> None:
        sr, subject, version = self.client, w.key.subject, w.key.version
        assert subject is not None  # a SCHEMA key always names its subject (Key.from_bytes, plan_target)
        if w.value is not None and w.previous is None:
            if subject not in switched and global_mode != IMPORT:
                before = state.get(Key(MODE, subject)) if state else None
                if (before or {}).get("mode") != IMPORT:
                    switched[subject] = before
                    sr.update_mode(subject, IMPORT, force=True)
            body = {k: w.value[k] for k in ("schema", "schemaType", "references", "metadata", "ruleSet")
                    if w.value.get(k) is not None}
            body.update(id=w.value["id"], version=version)
            answer = sr._rest_client.post(f"subjects/{_quote(subject)}/versions", body=body)
            if answer.get("id") != w.value["id"]:
                raise _refusal(f"the registry assigned id {answer.get('id')} instead of {w.value['id']}: it does not "
                               "honour explicit ids; check its IMPORT mode")
        if w.value is not None and w.value.get("deleted") and not (w.previous or {}).get("deleted"):
            sr.delete_version(subject, version)
        if w.value is None:
            if not (w.previous or {}).get("deleted"):
                sr.delete_version(subject, version)
            sr.delete_version(subject, version, permanent=True)
        if w.value is not None and not w.value.get("deleted") and (w.previous or {}).get("deleted"):
            raise _refusal(f"version {version} is soft-deleted on the target but live on the primary; "
                           "a registry cannot undelete a version")

    def _config(self, subject: str | None, value: Mapping[str, Any] | None) -> None:
        path = "config" if subject is None else f"config/{_quote(subject)}"
        if value is None:
            self.client._rest_client.delete(path)
            return
        view = config_view(value)
        assert view is not None  # value is not None here
        body = {("compatibility" if k == "compatibilityLevel" else k): v for k, v in view.items()}
        self.client._rest_client.put(path, body=body)

    def _mode(self, subject: str | None, value: Mapping[str, Any] | None) -> None:
        sr = self.client
        if subject is None:
            sr.update_global_mode((value or {}).get("mode", "READWRITE"), force=True)
        elif value is None:
            sr.delete_mode(subject)
        else:
            sr.update_mode(subject, value["mode"], force=True)


def _transport_error(session: Any) -> type[BaseException]:
    """``TransportError`` of the HTTP library the registry client's session comes from.

    confluent-kafka takes ``httpx2`` when it is installed (the OpenLineage provider brings it), else
    ``httpx``; the two have separate exception classes.
    """
    package = importlib.import_module(type(session).__module__.split(".")[0])
    return cast(type[BaseException], package.TransportError)


def _cause(exc: BaseException, kind: type[BaseException]) -> Any:
    """The first exception of type ``kind`` in ``exc``'s chain (httpx wraps the ssl error), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _quote(subject: str) -> str:
    from urllib.parse import quote

    return quote(subject, safe="")


def _refusal(message: str) -> Exception:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    return SchemaRegistryError(409, 40900, message)
