"""Static checks of the docker-compose stack (docker-compose.yaml, deploy/).

There is no Docker engine where the tests run, so the compose file has to be right
by construction. These tests parse it (PyYAML only) and check what would otherwise
only show up at `docker compose up`: a topology address no broker advertises, a
schema registry reading another cluster, two clusters with one cluster id, an image
that floats, a secret written into the file.

Every check is a function that takes parsed data and returns a list of problems,
so the negative tests at the bottom can feed it a deliberately broken copy and see
it rejected: a check that cannot fail proves nothing.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
TOPOLOGY_FILE = REPO / "deploy" / "topology.compose.yaml"
TOPOLOGY_SOURCE = "deploy/topology.compose.yaml"
DOCKERFILES = sorted((REPO / "deploy").glob("*.Dockerfile"))

# docs/architecture.md, Contracts: the default topology, as seen from the host. The stack
# publishes each cluster's host listener on exactly these ports.
DESIGN_HOST_BOOTSTRAP = {
    "c1": "127.0.0.1:19092",
    "c2": "127.0.0.1:19093",
    "c3": "127.0.0.1:19094",
    "c4": "127.0.0.1:19095",
}

AIRFLOW_ROLES = ("api-server", "scheduler", "dag-processor", "triggerer")
PROJECT_MOUNTS = ("dags", "plugins", "include", "spark_jobs")
DEV_MARKER = "dev-only"

Problems = list[str]

# ------------------------------------------------------------------ parsing helpers


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """Parse a compose file; YAML aliases are un-shared (JSON round trip) so a test
    can change one service without changing every service that used the anchor."""
    return json.loads(json.dumps(yaml.safe_load(path.read_text())))


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose.get("services") or {}


def read_env_file(path: Path) -> dict[str, str]:
    """A compose ``env_file`` (``KEY=VALUE`` lines, ``#`` comments)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def env_of(service: dict[str, Any]) -> dict[str, str]:
    """What the container's environment holds: its ``env_file`` entries, then ``environment:`` over them."""
    files = service.get("env_file") or []
    merged: dict[str, str] = {}
    for entry in [files] if isinstance(files, str) else files:
        merged.update(read_env_file(REPO / (entry if isinstance(entry, str) else entry["path"])))
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) if "=" in item else (item, "") for item in env)
        return {**merged, **{key: value for key, value in pairs}}
    return {**merged, **{key: "" if value is None else str(value) for key, value in env.items()}}


def command_tokens(service: dict[str, Any]) -> list[str]:
    command = service.get("command")
    if command is None:
        return []
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def command_text(service: dict[str, Any]) -> str:
    parts = []
    for key in ("entrypoint", "command"):
        value = service.get(key)
        if value is not None:
            parts.append(value if isinstance(value, str) else " ".join(map(str, value)))
    return "\n".join(parts)


def mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of every volume entry, short or long syntax."""
    result = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            result.append((str(entry.get("source", "")), str(entry.get("target", ""))))
        else:
            parts = str(entry).split(":")
            if len(parts) >= 2:
                result.append((parts[0], parts[1]))
            else:
                result.append(("", parts[0]))
    return result


def _norm_source(source: str) -> str:
    return source.removeprefix("./").rstrip("/")


def mount_target(service: dict[str, Any], source: str) -> str | None:
    for src, target in mounts(service):
        if _norm_source(src) == _norm_source(source):
            return target
    return None


def dns_names(compose: dict[str, Any], name: str) -> set[str]:
    """Names other containers can resolve for a service: the service name,
    container_name and network aliases (not `hostname`, which only the container
    itself sees)."""
    service = services(compose)[name]
    names = {name}
    if service.get("container_name"):
        names.add(service["container_name"])
    networks = service.get("networks")
    if isinstance(networks, dict):
        for net in networks.values():
            names.update((net or {}).get("aliases") or [])
    return names


def service_by_dns_name(compose: dict[str, Any], host: str) -> str | None:
    for name in services(compose):
        if host in dns_names(compose, name):
            return name
    return None


def split_host_port(address: str) -> tuple[str, int] | None:
    address = address.strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host, int(port)


def parse_image(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference."""
    ref, _, digest = ref.partition("@")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag, digest or None
    return ref, None, digest or None


# `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}`, `${VAR?err}`, `${VAR:+x}`;
# `$${...}` is an escaped literal for the container's shell and is not interpolated.
INTERPOLATION = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}")


def interpolations(text: str) -> list[tuple[str, str | None, str | None]]:
    return [(m.group(1), m.group(2), m.group(3)) for m in INTERPOLATION.finditer(text)]


def resolve_defaults(text: str) -> str:
    """What compose makes of `text` with no variables set (defaults substituted)."""

    def sub(match: re.Match[str]) -> str:
        op, arg = match.group(2), match.group(3)
        return arg if op in (":-", "-") else ""

    return INTERPOLATION.sub(sub, text).replace("$$", "$")


def all_strings(node: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string in a parsed document with a dotted path to it."""
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in all_strings(value, f"{path}.{key}")]
    if isinstance(node, list):
        return [item for i, value in enumerate(node) for item in all_strings(value, f"{path}[{i}]")]
    return [(path, node)] if isinstance(node, str) else []


# --------------------------------------------------------------- service kinds


def is_kafka(service: dict[str, Any]) -> bool:
    return parse_image(str(service.get("image", "")))[0] == "apache/kafka" or "KAFKA_PROCESS_ROLES" in env_of(service)


def is_schema_registry(service: dict[str, Any]) -> bool:
    return "SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS" in env_of(service)


def _built_from(service: dict[str, Any], dockerfile_suffix: str) -> bool:
    build = service.get("build")
    return isinstance(build, dict) and str(build.get("dockerfile", "")).endswith(dockerfile_suffix)


def is_airflow(service: dict[str, Any]) -> bool:
    return _built_from(service, "airflow.Dockerfile") or parse_image(str(service.get("image", "")))[0] == "apache/airflow"


def is_spark(service: dict[str, Any]) -> bool:
    return (_built_from(service, "spark.Dockerfile") or "spark-class" in command_tokens(service)
            or CONNECT_SERVER in command_tokens(service))


def airflow_role(service: dict[str, Any]) -> str | None:
    tokens = command_tokens(service)
    if tokens[:1] == ["airflow"]:
        tokens = tokens[1:]
    return tokens[0] if tokens and tokens[0] in AIRFLOW_ROLES + ("celery",) else None


def kind_services(compose: dict[str, Any], predicate: Callable[[dict[str, Any]], bool]) -> list[str]:
    return [name for name, svc in services(compose).items() if predicate(svc)]


CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_role(service: dict[str, Any]) -> str | None:
    tokens = command_tokens(service)
    if CONNECT_SERVER in tokens:
        return "connect"
    if "org.apache.spark.deploy.master.Master" in tokens:
        return "master"
    if "org.apache.spark.deploy.worker.Worker" in tokens:
        return "worker"
    return None


def _flag(tokens: list[str], flag: str, default: str) -> str:
    return tokens[tokens.index(flag) + 1] if flag in tokens and tokens.index(flag) + 1 < len(tokens) else default


# ----------------------------------------------------------------- Kafka listeners


def _listeners(value: str) -> list[tuple[str, str, int]]:
    """`NAME://host:port,...` -> [(NAME, host, port)]."""
    result = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, _, rest = item.partition("://")
        host, _, port = rest.rpartition(":")
        if port.isdigit():
            result.append((name, host, int(port)))
    return result


def kafka_endpoints(compose: dict[str, Any]) -> dict[tuple[str, int], str]:
    """(host, port) a client can bootstrap from -> Kafka service. An endpoint counts
    only if the broker both binds the port (KAFKA_LISTENERS) and advertises it under
    a name of its own service (KAFKA_ADVERTISED_LISTENERS): a client is redirected to
    the advertised address after the first metadata request."""
    endpoints = {}
    for name in kind_services(compose, is_kafka):
        env = env_of(services(compose)[name])
        bound = {(listener, port) for listener, _, port in _listeners(env.get("KAFKA_LISTENERS", ""))}
        for listener, host, port in _listeners(env.get("KAFKA_ADVERTISED_LISTENERS", "")):
            if host in dns_names(compose, name) and (listener, port) in bound:
                endpoints[(host, port)] = name
    return endpoints


def resolve_kafka(compose: dict[str, Any], bootstrap: str | list[str]) -> tuple[str | None, Problems]:
    """The one Kafka service a bootstrap list points at, or the problems."""
    items = bootstrap if isinstance(bootstrap, list) else str(bootstrap).split(",")
    endpoints = kafka_endpoints(compose)
    found, problems = set(), []
    for item in filter(None, (i.strip() for i in items)):
        hp = split_host_port(item)
        if hp is None:
            problems.append(f"{item!r} is not host:port")
        elif hp not in endpoints:
            owner = service_by_dns_name(compose, hp[0])
            if owner is None:
                problems.append(f"{item!r}: no compose service is named {hp[0]!r}")
            else:
                problems.append(f"{item!r}: service {owner!r} does not listen on and advertise {hp[0]}:{hp[1]}")
        else:
            found.add(endpoints[hp])
    if len(found) > 1:
        problems.append(f"{bootstrap!r} mixes clusters {sorted(found)}")
    return (found.pop() if len(found) == 1 and not problems else None), problems


# =================================================================== the checks


def check_required_services(compose: dict[str, Any]) -> Problems:
    svcs = services(compose)
    problems = []
    roles = [airflow_role(svc) for svc in svcs.values() if is_airflow(svc)]
    for role in AIRFLOW_ROLES:
        if roles.count(role) != 1:
            problems.append(f"need exactly one Airflow `{role}` service, found {roles.count(role)}")
    if not any("airflow db migrate" in command_text(svc) for svc in svcs.values() if is_airflow(svc)):
        problems.append("no Airflow init service running `airflow db migrate`")
    counts = {
        "postgres": kind_services(compose, lambda s: parse_image(str(s.get("image", "")))[0] == "postgres"),
        "minio": kind_services(compose, lambda s: parse_image(str(s.get("image", "")))[0] == "minio/minio"),
        "spark master": kind_services(compose, lambda s: spark_role(s) == "master"),
        "spark worker": kind_services(compose, lambda s: spark_role(s) == "worker"),
    }
    for what, names in counts.items():
        if not names:
            problems.append(f"no {what} service")
    if len(kind_services(compose, is_kafka)) != 4:
        problems.append(f"need 4 Kafka clusters, found {kind_services(compose, is_kafka)}")
    if len(kind_services(compose, is_schema_registry)) != 4:
        problems.append(f"need 4 schema registries, found {kind_services(compose, is_schema_registry)}")
    return problems


# Keys of a service in the compose specification; a misspelt key (`healtcheck`)
# would otherwise be silently ignored by this test and rejected by compose.
SERVICE_KEYS = frozenset(
    """annotations attach blkio_config build cap_add cap_drop cgroup cgroup_parent command configs
    container_name cpu_count cpu_percent cpu_period cpu_quota cpu_rt_period cpu_rt_runtime cpu_shares
    cpus cpuset credential_spec depends_on deploy develop device_cgroup_rules devices dns dns_opt
    dns_search domainname entrypoint env_file environment expose extends external_links extra_hosts
    gpus group_add healthcheck hostname image init ipc isolation label_file labels links logging
    mac_address mem_limit mem_reservation mem_swappiness memswap_limit models network_mode networks
    oom_kill_disable oom_score_adj pid pids_limit platform ports post_start pre_stop privileged
    profiles provider pull_policy read_only restart runtime scale secrets security_opt shm_size
    stdin_open stop_grace_period stop_signal storage_opt sysctls tmpfs tty ulimits use_api_socket
    user userns_mode uts volumes volumes_from working_dir""".split()
)
TOP_LEVEL_KEYS = frozenset({"version", "name", "include", "services", "networks", "volumes", "secrets", "configs", "models"})


def check_structure(compose: dict[str, Any]) -> Problems:
    problems = [f"unknown top-level key {key!r}" for key in compose if key not in TOP_LEVEL_KEYS and not key.startswith("x-")]
    declared_volumes = set(compose.get("volumes") or {})
    for name, svc in services(compose).items():
        problems += [f"{name}: unknown key {key!r}" for key in svc if key not in SERVICE_KEYS and not key.startswith("x-")]
        if not svc.get("image") and not svc.get("build"):
            problems.append(f"{name}: neither image nor build")
        for key, value in (svc.get("environment") or {}).items() if isinstance(svc.get("environment"), dict) else ():
            if isinstance(value, (dict, list)):
                problems.append(f"{name}: environment {key} is not a scalar")
        for source, target in mounts(svc):
            if not target.startswith("/"):
                problems.append(f"{name}: volume target {target!r} is not absolute")
            is_path = source.startswith((".", "/", "~", "$"))
            if source and not is_path and source not in declared_volumes:
                problems.append(f"{name}: named volume {source!r} is not declared under top-level volumes")
            if source.startswith(".") and not (REPO / _norm_source(source)).exists():
                problems.append(f"{name}: bind source {source!r} does not exist in the repository")
    return problems


def check_images_pinned(compose: dict[str, Any]) -> Problems:
    """Every image has an explicit tag other than `latest` (or a digest), unless the
    service is built here (then `image:` only names the local build)."""
    problems = []
    for name, svc in services(compose).items():
        if svc.get("build"):
            continue
        ref = resolve_defaults(str(svc.get("image", "")))
        if not ref:
            problems.append(f"{name}: no image")
            continue
        repo, tag, digest = parse_image(ref)
        if digest:
            continue
        if tag is None:
            problems.append(f"{name}: image {ref!r} has no tag")
        elif tag == "latest" or not re.search(r"\d", tag):
            problems.append(f"{name}: image {ref!r} is not pinned to a version ({tag!r})")
    return problems


def check_dockerfiles_pinned(dockerfiles: dict[str, str]) -> Problems:
    """Every FROM of every Dockerfile names a versioned tag (or an earlier stage)."""
    problems = []
    for fname, text in dockerfiles.items():
        stages: set[str] = set()
        froms = 0
        for line in text.splitlines():
            words = line.split()
            if not words or words[0].upper() != "FROM":
                continue
            froms += 1
            args = [w for w in words[1:] if not w.startswith("--")]
            ref = args[0] if args else ""
            if len(args) >= 3 and args[1].upper() == "AS":
                stages.add(args[2])
            if ref in stages:
                continue
            repo, tag, digest = parse_image(ref)
            if "$" in ref:
                problems.append(f"{fname}: FROM {ref!r} is not a literal image reference")
            elif not digest and (tag is None or tag == "latest" or not re.search(r"\d", tag)):
                problems.append(f"{fname}: FROM {ref!r} is not pinned to a version")
        if froms == 0:
            problems.append(f"{fname}: no FROM line")
    return problems


def check_depends_on(compose: dict[str, Any]) -> Problems:
    svcs = services(compose)
    problems = []
    graph: dict[str, list[str]] = {}
    for name, svc in svcs.items():
        deps = svc.get("depends_on") or {}
        if isinstance(deps, list):
            deps = {dep: {"condition": "service_started"} for dep in deps}
        graph[name] = list(deps)
        for dep, spec in deps.items():
            condition = (spec or {}).get("condition", "service_started")
            if dep not in svcs:
                problems.append(f"{name}: depends on unknown service {dep!r}")
            elif condition == "service_healthy" and not (svcs[dep].get("healthcheck") or {}).get("test"):
                problems.append(f"{name}: waits for {dep!r} to be healthy, but {dep!r} has no healthcheck")
            elif condition == "service_completed_successfully" and str(svcs[dep].get("restart", "no")) not in ("no", "on-failure"):
                problems.append(f"{name}: waits for {dep!r} to complete, but {dep!r} restarts ({svcs[dep].get('restart')})")
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        if state.get(node) == 1:
            problems.append("depends_on cycle: " + " -> ".join(trail + [node]))
            return
        if state.get(node) == 2 or node not in graph:
            return
        state[node] = 1
        for dep in graph[node]:
            visit(dep, trail + [node])
        state[node] = 2

    for node in graph:
        visit(node, [])
    return problems


def check_published_ports(compose: dict[str, Any]) -> Problems:
    """Host ports are unique and bound to loopback (a dev stack without auth)."""
    problems, seen = [], {}
    for name, svc in services(compose).items():
        for port in svc.get("ports") or []:
            text = resolve_defaults(str(port))
            parts = text.split(":")
            if len(parts) < 3:
                problems.append(f"{name}: port {text!r} is not bound to a host address (use 127.0.0.1:HOST:CONTAINER)")
                continue
            ip, host_port = parts[0], parts[1]
            if ip not in ("127.0.0.1", "localhost", "[::1]"):
                problems.append(f"{name}: port {text!r} is published beyond loopback")
            if host_port in seen:
                problems.append(f"{name}: host port {host_port} already published by {seen[host_port]}")
            seen[host_port] = name
    return problems


def published(compose: dict[str, Any], name: str) -> dict[int, int]:
    """host port -> container port of one service."""
    result = {}
    for port in services(compose)[name].get("ports") or []:
        parts = resolve_defaults(str(port)).split("/")[0].split(":")
        if len(parts) >= 2 and parts[-1].isdigit() and parts[-2].isdigit():
            result[int(parts[-2])] = int(parts[-1])
    return result


_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def check_kafka_clusters(compose: dict[str, Any]) -> Problems:
    problems, ids = [], {}
    for name in kind_services(compose, is_kafka):
        svc = services(compose)[name]
        env = env_of(svc)
        cluster_id = env.get("CLUSTER_ID", "")
        if not _CLUSTER_ID.match(cluster_id):
            problems.append(f"{name}: CLUSTER_ID {cluster_id!r} is not a 22-character base64url UUID")
        else:
            try:
                if len(base64.urlsafe_b64decode(cluster_id + "==")) != 16:
                    problems.append(f"{name}: CLUSTER_ID {cluster_id!r} does not decode to 16 bytes")
            except binascii.Error:
                problems.append(f"{name}: CLUSTER_ID {cluster_id!r} is not base64url")
        if cluster_id in ids:
            problems.append(f"{name}: CLUSTER_ID {cluster_id!r} already used by {ids[cluster_id]}")
        ids[cluster_id] = name

        listeners = {listener: port for listener, _, port in _listeners(env.get("KAFKA_LISTENERS", ""))}
        protocols = dict(item.split(":", 1) for item in env.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",") if ":" in item)
        controllers = [c for c in env.get("KAFKA_CONTROLLER_LISTENER_NAMES", "").split(",") if c]
        if not listeners:
            problems.append(f"{name}: KAFKA_LISTENERS is empty or unparsable")
        for listener in listeners:
            if listener not in protocols:
                problems.append(f"{name}: listener {listener} has no security protocol")
        for listener, host, port in _listeners(env.get("KAFKA_ADVERTISED_LISTENERS", "")):
            if listeners.get(listener) != port:
                problems.append(f"{name}: advertises {listener}://{host}:{port} but binds {listener} on {listeners.get(listener)}")
            if listener in controllers:
                problems.append(f"{name}: advertises its controller listener {listener}")
        inter = env.get("KAFKA_INTER_BROKER_LISTENER_NAME")
        if inter and inter not in listeners:
            problems.append(f"{name}: inter-broker listener {inter} is not among KAFKA_LISTENERS")
        if not controllers or any(c not in listeners for c in controllers):
            problems.append(f"{name}: controller listener(s) {controllers} not among KAFKA_LISTENERS")
        # Single-node KRaft: the quorum is this node, reached at its own controller port.
        voters = [v for v in env.get("KAFKA_CONTROLLER_QUORUM_VOTERS", "").split(",") if v]
        for voter in voters:
            node_id, _, address = voter.partition("@")
            hp = split_host_port(address)
            if hp is None or hp[0] not in dns_names(compose, name) or hp[1] not in [listeners.get(c) for c in controllers]:
                problems.append(f"{name}: quorum voter {voter!r} is not this service's controller listener")
            if node_id != env.get("KAFKA_NODE_ID"):
                problems.append(f"{name}: quorum voter {voter!r} has not this node's id {env.get('KAFKA_NODE_ID')}")
        if not voters and not env.get("KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS"):
            problems.append(f"{name}: no controller quorum configured")
    return problems


def check_schema_registries(compose: dict[str, Any]) -> Problems:
    """Each registry reads and writes its own cluster's `_schemas` topic: a registry
    pointing at another cluster (or none) would fork the schema IDs."""
    problems, owner = [], {}
    for name in kind_services(compose, is_schema_registry):
        env = env_of(services(compose)[name])
        kafka, errors = resolve_kafka(compose, env["SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS"])
        problems += [f"{name}: kafkastore {error}" for error in errors]
        if kafka is not None:
            if kafka in owner:
                problems.append(f"{name}: shares cluster {kafka} with {owner[kafka]}")
            owner[kafka] = name
        if not _listeners(env.get("SCHEMA_REGISTRY_LISTENERS", "")):
            problems.append(f"{name}: SCHEMA_REGISTRY_LISTENERS is not set")
        if env.get("SCHEMA_REGISTRY_HOST_NAME") not in dns_names(compose, name):
            problems.append(f"{name}: SCHEMA_REGISTRY_HOST_NAME {env.get('SCHEMA_REGISTRY_HOST_NAME')!r} is not a name of this service")
    for kafka in kind_services(compose, is_kafka):
        if kafka not in owner:
            problems.append(f"{kafka}: no schema registry for this cluster")
    return problems


def registry_ports(compose: dict[str, Any], name: str) -> set[int]:
    return {port for _, _, port in _listeners(env_of(services(compose)[name]).get("SCHEMA_REGISTRY_LISTENERS", ""))}


def check_topology_addresses(compose: dict[str, Any], bootstraps: dict[str, Any]) -> Problems:
    """Every cluster of the compose topology names a Kafka service of the stack by a
    host:port that service binds and advertises; no two clusters share a service."""
    problems, owner = [], {}
    if not bootstraps:
        problems.append("topology has no clusters")
    for cluster, bootstrap in bootstraps.items():
        kafka, errors = resolve_kafka(compose, bootstrap)
        problems += [f"cluster {cluster}: {error}" for error in errors]
        if kafka is not None:
            if kafka in owner:
                problems.append(f"cluster {cluster}: same Kafka service {kafka} as cluster {owner[kafka]}")
            owner[kafka] = cluster
    return problems


def check_host_listeners(compose: dict[str, Any], bootstraps: dict[str, Any], host_bootstraps: dict[str, str]) -> Problems:
    """From the host, cluster cN is reachable at the default topology's address: the
    Kafka service behind cN publishes that port and advertises it as a loopback name."""
    problems = []
    for cluster, host_address in host_bootstraps.items():
        if cluster not in bootstraps:
            problems.append(f"cluster {cluster} of the default topology is missing from the compose topology")
            continue
        kafka, _ = resolve_kafka(compose, bootstraps[cluster])
        if kafka is None:
            continue  # reported by check_topology_addresses
        _, host_port = split_host_port(host_address) or ("", 0)
        env = env_of(services(compose)[kafka])
        container_port = published(compose, kafka).get(host_port)
        advertised = {(h, p) for _, h, p in _listeners(env.get("KAFKA_ADVERTISED_LISTENERS", ""))}
        bound = {p for _, _, p in _listeners(env.get("KAFKA_LISTENERS", ""))}
        if container_port is None or container_port not in bound:
            problems.append(f"cluster {cluster}: {kafka} does not publish a listener on host port {host_port}")
        elif not advertised & {("localhost", host_port), ("127.0.0.1", host_port)}:
            problems.append(f"cluster {cluster}: {kafka} does not advertise localhost:{host_port}")
    return problems


def _shared_airflow_keys() -> tuple[str, ...]:
    return (
        "AIRFLOW__CORE__EXECUTOR",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
        "AIRFLOW__CORE__FERNET_KEY",
        "AIRFLOW__API_AUTH__JWT_SECRET",
        "AIRFLOW__API__SECRET_KEY",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
        "AIRFLOW__CORE__AUTH_MANAGER",
        "MIRROR_TOPOLOGY",
    )


def check_airflow(compose: dict[str, Any], topology_source: str = TOPOLOGY_SOURCE) -> Problems:
    svcs = services(compose)
    names = kind_services(compose, is_airflow)
    problems = []
    if not names:
        return ["no Airflow services"]
    for name in names:
        svc, env = svcs[name], env_of(svcs[name])
        for source in PROJECT_MOUNTS:
            if mount_target(svc, source) is None:
                problems.append(f"{name}: ./{source} is not mounted")
        for source, key, default in (("dags", "AIRFLOW__CORE__DAGS_FOLDER", "/opt/airflow/dags"),
                                     ("plugins", "AIRFLOW__CORE__PLUGINS_FOLDER", "/opt/airflow/plugins")):
            target = mount_target(svc, source)
            if target is not None and target.rstrip("/") != env.get(key, default).rstrip("/"):
                problems.append(f"{name}: ./{source} is mounted at {target}, but Airflow reads {env.get(key, default)}")
        topology_target = mount_target(svc, topology_source)
        if topology_target is None:
            problems.append(f"{name}: {topology_source} is not mounted")
        elif env.get("MIRROR_TOPOLOGY") != topology_target:
            problems.append(f"{name}: MIRROR_TOPOLOGY={env.get('MIRROR_TOPOLOGY')!r} is not where {topology_source} is mounted ({topology_target})")
        include_target = mount_target(svc, "include")
        if include_target is not None and include_target.rstrip("/") not in [p.rstrip("/") for p in env.get("PYTHONPATH", "").split(":")]:
            problems.append(f"{name}: PYTHONPATH does not contain the ./include mount {include_target} (import mirrorflow)")
        if not env.get("AIRFLOW__API_AUTH__JWT_SECRET"):
            problems.append(f"{name}: AIRFLOW__API_AUTH__JWT_SECRET is not set")

    # All components must agree on these, or tokens, DB and executor part ways.
    for key in _shared_airflow_keys():
        values = {env_of(svcs[name]).get(key) for name in names}
        if len(values) != 1:
            problems.append(f"{key} differs between Airflow services: {sorted(map(str, values))}")
    first = env_of(svcs[names[0]])
    executor = first.get("AIRFLOW__CORE__EXECUTOR", "")
    roles = {airflow_role(svcs[name]): name for name in names}
    if executor not in ("LocalExecutor", "CeleryExecutor"):
        problems.append(f"executor {executor!r}: expected LocalExecutor (or CeleryExecutor with workers)")
    if executor == "CeleryExecutor" and "celery" not in roles:
        problems.append("CeleryExecutor without a celery worker service")

    api = roles.get("api-server")
    url = first.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "")
    parts = urlsplit(url)
    if api is None or parts.hostname not in dns_names(compose, api):
        problems.append(f"AIRFLOW__CORE__EXECUTION_API_SERVER_URL {url!r} does not name the api-server service {api!r}")
    elif (parts.port or 80) != int(env_of(svcs[api]).get("AIRFLOW__API__PORT", "8080")):
        problems.append(f"AIRFLOW__CORE__EXECUTION_API_SERVER_URL {url!r}: api-server listens on {env_of(svcs[api]).get('AIRFLOW__API__PORT', '8080')}")
    elif not parts.path.rstrip("/").endswith("/execution"):
        problems.append(f"AIRFLOW__CORE__EXECUTION_API_SERVER_URL {url!r} does not end in /execution/")

    db = urlsplit(resolve_defaults(first.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")))
    db_service = service_by_dns_name(compose, db.hostname or "")
    if not db.scheme.startswith("postgresql") or db_service is None or parse_image(str(svcs[db_service].get("image", "")))[0] != "postgres":
        problems.append(f"SQL_ALCHEMY_CONN does not point at the postgres service: {db.geturl()!r}")

    # LocalExecutor: tasks, hence Spark drivers, run in the scheduler; executors call
    # the driver back by the name Spark advertises, which must resolve to the scheduler.
    scheduler = roles.get("scheduler")
    if executor == "LocalExecutor" and scheduler is not None:
        driver_host = env_of(svcs[scheduler]).get("SPARK_LOCAL_HOSTNAME") or svcs[scheduler].get("hostname")
        if driver_host not in dns_names(compose, scheduler):
            problems.append(f"{scheduler}: Spark driver host {driver_host!r} (SPARK_LOCAL_HOSTNAME/hostname) does not resolve to this service")
    return problems


def check_spark(compose: dict[str, Any]) -> Problems:
    svcs = services(compose)
    problems = []
    masters = {}
    for name in kind_services(compose, lambda s: spark_role(s) == "master"):
        tokens = command_tokens(svcs[name])
        masters[name] = int(_flag(tokens, "--port", "7077"))
    for name in kind_services(compose, is_spark):
        svc, env = svcs[name], env_of(svcs[name])
        for source in ("include", "spark_jobs"):
            if mount_target(svc, source) is None:
                problems.append(f"{name}: ./{source} is not mounted")
        include_target = mount_target(svc, "include")
        if include_target and include_target not in env.get("PYTHONPATH", "").split(":"):
            problems.append(f"{name}: PYTHONPATH does not contain the ./include mount {include_target}")
        if spark_role(svc) in ("worker", "connect"):
            url = next((t for t in command_tokens(svc) if t.startswith("spark://")), "")
            hp = split_host_port(url)
            master = service_by_dns_name(compose, hp[0]) if hp else None
            if master not in masters or hp[1] != masters[master]:
                problems.append(f"{name}: master URL {url!r} is not a spark master service and port")
    return problems


def _conn(env: dict[str, str], conn_id: str) -> dict[str, Any] | None:
    raw = env.get(f"AIRFLOW_CONN_{conn_id.upper()}")
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return {"__uri__": raw}


def check_airflow_connections(compose: dict[str, Any]) -> Problems:
    """Connections defined as AIRFLOW_CONN_* point at services of this stack."""
    svcs = services(compose)
    names = kind_services(compose, is_airflow)
    if not names:
        return ["no Airflow services"]
    env = env_of(svcs[names[0]])
    problems = []
    for name in names[1:]:
        other = {k: v for k, v in env_of(svcs[name]).items() if k.startswith("AIRFLOW_CONN_")}
        if other != {k: v for k, v in env.items() if k.startswith("AIRFLOW_CONN_")}:
            problems.append(f"{name}: AIRFLOW_CONN_* differ from {names[0]}")

    spark = _conn(env, "spark_default")
    if spark is None or "__uri__" in spark:
        problems.append("AIRFLOW_CONN_SPARK_DEFAULT missing or not JSON (the provider falls back to yarn)")
    elif spark.get("conn_type") == "spark_connect":  # the warm Spark: a Connect server on the master
        server = service_by_dns_name(compose, str(spark.get("host", "")))
        if server is None or spark_role(svcs[server]) != "connect":
            problems.append(f"spark_default Connect server {spark.get('host')!r} is not a Spark Connect service")
        else:
            tokens = command_tokens(svcs[server])
            port = next((t.split("=", 1)[1] for t in tokens if t.startswith("spark.connect.grpc.binding.port=")),
                        "15002")
            if int(spark.get("port") or 15002) != int(port):
                problems.append(f"spark_default Connect server {server} listens on {port}, not {spark.get('port')}")
    else:
        host = str(spark.get("host", ""))
        master_url = f"{host}:{spark['port']}" if spark.get("port") else host
        hp = split_host_port(master_url)
        master = service_by_dns_name(compose, hp[0]) if hp else None
        if not master_url.startswith("spark://") or master is None or spark_role(svcs[master]) != "master":
            problems.append(f"spark_default master {master_url!r} is not the spark master service")
        elif hp[1] != int(_flag(command_tokens(svcs[master]), "--port", "7077")):
            problems.append(f"spark_default master {master_url!r}: the master listens on another port")

    aws = _conn(env, "aws_default")
    endpoint = ((aws or {}).get("extra") or {}).get("endpoint_url", "")
    parts = urlsplit(endpoint)
    minio = service_by_dns_name(compose, parts.hostname or "")
    if minio is None or parse_image(str(svcs[minio].get("image", "")))[0] != "minio/minio" or parts.port != 9000:
        problems.append(f"aws_default endpoint_url {endpoint!r} is not the minio service on port 9000")

    for key in env:
        if not key.startswith("AIRFLOW_CONN_"):
            continue
        conn = _conn(env, key.removeprefix("AIRFLOW_CONN_")) or {}
        if conn.get("conn_type") == "kafka":
            _, errors = resolve_kafka(compose, str((conn.get("extra") or {}).get("bootstrap.servers", "")))
            problems += [f"{key}: {error}" for error in errors]
        if key.startswith("AIRFLOW_CONN_SCHEMA_REGISTRY"):
            registry = service_by_dns_name(compose, str(conn.get("host", "")))
            if registry is None or not is_schema_registry(svcs[registry]) or conn.get("port") not in registry_ports(compose, registry):
                problems.append(f"{key}: {conn.get('host')}:{conn.get('port')} is not a schema registry listener")
    return problems


# ------------------------------------------------------------------------ secrets

_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|FERNET|JWT|CREDENTIAL|(^|_)KEY$", re.IGNORECASE)
_NOT_A_SECRET = re.compile(r"_(FILE|PATH|DIR)$", re.IGNORECASE)
_URL_USERINFO = re.compile(r"://([^/@\s:]*):([^/@\s]+)@")


def _secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_A_SECRET.search(name)


def _secret_value_problem(where: str, value: str) -> str | None:
    """A secret must be exactly one `${VAR}`, `${VAR:?...}` or `${VAR:-dev-only...}`."""
    value = value.strip()
    match = INTERPOLATION.fullmatch(value)
    if not match:
        return f"{where}: literal secret value (use ${{VAR:?...}} or ${{VAR:-{DEV_MARKER}-...}})"
    op, arg = match.group(2), match.group(3)
    if op in (":-", "-") and DEV_MARKER not in (arg or "").lower():
        return f"{where}: default {arg!r} of ${{{match.group(1)}}} is not marked {DEV_MARKER!r}"
    if op in (":+", "+"):
        return f"{where}: ${{{match.group(1)}:+...}} substitutes a literal"
    return None


def _mask(text: str) -> tuple[str, list[str]]:
    found: list[str] = []

    def sub(match: re.Match[str]) -> str:
        found.append(match.group(0))
        return f"\x00{len(found) - 1}\x00"

    return INTERPOLATION.sub(sub, text), found


def check_secrets(compose: dict[str, Any]) -> Problems:
    problems = []
    for path, text in all_strings(compose):
        # Any interpolation of a secret-looking variable with a default: dev-marked.
        for var, op, arg in interpolations(text):
            if _secret_name(var) and op in (":-", "-") and DEV_MARKER not in (arg or "").lower():
                problems.append(f"{path}: default {arg!r} of ${{{var}}} is not marked {DEV_MARKER!r}")
        # Passwords inside URLs (user:password@host).
        masked, found = _mask(text)
        for match in _URL_USERINFO.finditer(masked):
            password = re.sub(r"\x00(\d+)\x00", lambda m: found[int(m.group(1))], match.group(2))
            problem = _secret_value_problem(f"{path} (URL password)", password)
            if problem:
                problems.append(problem)
    for name, svc in services(compose).items():
        for key, value in env_of(svc).items():
            where = f"{name}.environment.{key}"
            if _secret_name(key):
                problem = _secret_value_problem(where, value)
                if problem:
                    problems.append(problem)
            if key.startswith("AIRFLOW_CONN_"):
                conn = _conn(env_of(svc), key.removeprefix("AIRFLOW_CONN_")) or {}
                fields = dict(conn.get("extra") or {}) if isinstance(conn.get("extra"), dict) else {}
                fields.update({k: v for k, v in conn.items() if k != "extra"})
                for field, field_value in fields.items():
                    if _secret_name(field) and field_value not in (None, ""):
                        problem = _secret_value_problem(f"{where}.{field}", str(field_value))
                        if problem:
                            problems.append(problem)
    return problems


def check_interpolation_defaults(compose: dict[str, Any]) -> Problems:
    """One variable, one default: MinIO and the Airflow connection must agree on the
    credentials when neither is set."""
    defaults: dict[str, tuple[str, str]] = {}
    problems = []
    for path, text in all_strings(compose):
        for var, op, arg in interpolations(text):
            if op not in (":-", "-"):
                continue
            if var in defaults and defaults[var][0] != arg:
                problems.append(f"${{{var}}} defaults to {arg!r} at {path} but {defaults[var][0]!r} at {defaults[var][1]}")
            defaults.setdefault(var, (arg or "", path))
    return problems


ALL_COMPOSE_CHECKS: dict[str, Callable[[dict[str, Any]], Problems]] = {
    "required_services": check_required_services,
    "structure": check_structure,
    "images_pinned": check_images_pinned,
    "depends_on": check_depends_on,
    "published_ports": check_published_ports,
    "kafka_clusters": check_kafka_clusters,
    "schema_registries": check_schema_registries,
    "airflow": check_airflow,
    "spark": check_spark,
    "airflow_connections": check_airflow_connections,
    "secrets": check_secrets,
    "interpolation_defaults": check_interpolation_defaults,
}


# ======================================================================== fixtures


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def _bootstrap_of(cluster: Any) -> Any:
    return getattr(cluster, "bootstrap", None) if not isinstance(cluster, dict) else cluster.get("bootstrap")


@pytest.fixture(scope="module")
def topology_bootstraps() -> dict[str, Any]:
    """cluster name -> bootstrap, read through the project's own loader (the same
    code the DAGs use), so the file is also checked against the contract."""
    from mirrorflow.topology import load_topology

    topology = load_topology(TOPOLOGY_FILE)
    return {name: _bootstrap_of(cluster) for name, cluster in topology.clusters.items()}


# =========================================================================== tests


@pytest.mark.parametrize("check", sorted(ALL_COMPOSE_CHECKS))
def test_compose_passes(compose: dict[str, Any], check: str) -> None:
    assert ALL_COMPOSE_CHECKS[check](compose) == []


def test_dockerfiles_pinned() -> None:
    names = {path.name for path in DOCKERFILES}
    assert {"airflow.Dockerfile", "spark.Dockerfile"} <= names
    assert check_dockerfiles_pinned({path.name: path.read_text() for path in DOCKERFILES}) == []


def test_airflow_image_matches_requirements() -> None:
    """The Airflow base image is the version requirements.txt pins, on Python 3.11
    (the Spark image's minor: PySpark refuses mismatched driver/executor Pythons)."""
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    )
    airflow_from = re.search(r"^FROM\s+(\S+)", (REPO / "deploy" / "airflow.Dockerfile").read_text(), re.M)
    spark_from = re.search(r"^FROM\s+(\S+)", (REPO / "deploy" / "spark.Dockerfile").read_text(), re.M)
    assert airflow_from and spark_from
    assert airflow_from.group(1) == f"apache/airflow:{pins['apache-airflow']}-python3.11"
    assert parse_image(spark_from.group(1))[1].startswith("3.11")


def test_topology_addresses_resolve(compose: dict[str, Any], topology_bootstraps: dict[str, Any]) -> None:
    assert check_topology_addresses(compose, topology_bootstraps) == []


def test_host_listeners_match_design_topology(compose: dict[str, Any], topology_bootstraps: dict[str, Any]) -> None:
    assert set(topology_bootstraps) == set(DESIGN_HOST_BOOTSTRAP)
    assert check_host_listeners(compose, topology_bootstraps, DESIGN_HOST_BOOTSTRAP) == []


def test_compose_topology_keeps_design_tree() -> None:
    """Only the addresses differ from the default topology (topologies/demo.yaml)."""
    raw = yaml.safe_load(TOPOLOGY_FILE.read_text())
    assert raw["tree"] == {
        "level": 3,
        "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}],
    }
    assert raw["topics"] == ["orders", "payments\\..*"]


# --------------------------------------------------------------- negative tests
# Each mutation breaks one thing in a copy of the real compose file; the named check
# must report it (matched by a fragment of its message).


def _env(svc: dict[str, Any]) -> dict[str, Any]:
    return svc.setdefault("environment", {})


def _set_env(service: str, key: str, value: str) -> Callable[[dict[str, Any]], None]:
    def mutate(c: dict[str, Any]) -> None:
        _env(c["services"][service])[key] = value

    return mutate


def _drop_mount(service: str, source: str) -> Callable[[dict[str, Any]], None]:
    def mutate(c: dict[str, Any]) -> None:
        svc = c["services"][service]
        svc["volumes"] = [v for v in svc["volumes"] if not str(v).startswith(source)]

    return mutate


def _set(service: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(c: dict[str, Any]) -> None:
        c["services"][service][key] = value

    return mutate


NEGATIVE_CASES = {
    "untagged image": ("images_pinned", _set("postgres", "image", "postgres"), "has no tag"),
    "latest image": ("images_pinned", _set("minio", "image", "minio/minio:latest"), "not pinned"),
    "floating tag": ("images_pinned", _set("kafka-c1", "image", "apache/kafka:stable"), "not pinned"),
    "missing triggerer": ("required_services", lambda c: c["services"].pop("airflow-triggerer"), "`triggerer`"),
    "three kafka clusters": ("required_services", lambda c: c["services"].pop("kafka-c4"), "need 4 Kafka"),
    "misspelt key": ("structure", lambda c: c["services"]["postgres"].update(healtcheck={}), "unknown key 'healtcheck'"),
    "undeclared volume": ("structure", lambda c: c["services"]["minio"].update(volumes=["minio-dta:/data"]), "not declared"),
    "duplicate cluster id": (
        "kafka_clusters",
        lambda c: _env(c["services"]["kafka-c2"]).update(CLUSTER_ID=_env(c["services"]["kafka-c1"])["CLUSTER_ID"]),
        "already used by kafka-c1",
    ),
    "malformed cluster id": ("kafka_clusters", _set_env("kafka-c3", "CLUSTER_ID", "cluster-3"), "22-character"),
    "copy-pasted quorum voter": ("kafka_clusters", _set_env("kafka-c2", "KAFKA_CONTROLLER_QUORUM_VOTERS", "1@kafka-c1:9093"), "quorum voter"),
    "advertised port not bound": (
        "kafka_clusters",
        _set_env("kafka-c1", "KAFKA_ADVERTISED_LISTENERS", "INTERNAL://kafka-c1:9094,HOST://localhost:19092"),
        "binds INTERNAL on 9092",
    ),
    "registry on missing cluster": (
        "schema_registries",
        _set_env("schema-registry-c2", "SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS", "PLAINTEXT://kafka-c9:9092"),
        "no compose service is named 'kafka-c9'",
    ),
    "two registries on one cluster": (
        "schema_registries",
        _set_env("schema-registry-c2", "SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS", "PLAINTEXT://kafka-c1:9092"),
        "shares cluster kafka-c1",
    ),
    "dags not mounted": ("airflow", _drop_mount("airflow-scheduler", "./dags"), "./dags is not mounted"),
    "topology not mounted": ("airflow", _drop_mount("airflow-api-server", "./deploy/topology.compose.yaml"), "is not mounted"),
    "MIRROR_TOPOLOGY elsewhere": ("airflow", _set_env("airflow-triggerer", "MIRROR_TOPOLOGY", "/opt/airflow/topology.yaml"), "MIRROR_TOPOLOGY="),
    "JWT secret differs": ("airflow", _set_env("airflow-scheduler", "AIRFLOW__API_AUTH__JWT_SECRET", "${OTHER_JWT:?x}"), "JWT_SECRET differs"),
    "execution API on wrong host": (
        "airflow",
        lambda c: [_env(s).update(AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://localhost:8080/execution/") for s in c["services"].values() if is_airflow(s)],
        "does not name the api-server",
    ),
    "spark conn to missing master": (
        "airflow_connections",
        lambda c: [_env(s).update(AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "spark://spark", "port": 7077}') for s in c["services"].values() if is_airflow(s)],
        "not the spark master",
    ),
    "spark connect conn to the master": (
        "airflow_connections",
        lambda c: [_env(s).update(AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark_connect", "host": "spark-master", "port": 15002}') for s in c["services"].values() if is_airflow(s)],
        "is not a Spark Connect service",
    ),
    "kafka conn to controller port": (
        "airflow_connections",
        lambda c: [_env(s).update(AIRFLOW_CONN_KAFKA_C1='{"conn_type": "kafka", "extra": {"bootstrap.servers": "kafka-c1:9093"}}') for s in c["services"].values() if is_airflow(s)],
        "does not listen on and advertise",
    ),
    "worker to wrong master port": (
        "spark",
        _set("spark-worker", "command", ["spark-class", "org.apache.spark.deploy.worker.Worker", "spark://spark-master:7000"]),
        "master URL",
    ),
    "literal password": ("secrets", _set_env("postgres", "POSTGRES_PASSWORD", "hunter2"), "literal secret"),
    "unmarked default": ("secrets", _set_env("minio", "MINIO_ROOT_PASSWORD", "${MINIO_ROOT_PASSWORD:-minio123}"), "not marked 'dev-only'"),
    "password in URL": (
        "secrets",
        _set_env("airflow-init", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql+psycopg2://airflow:airflow@postgres:5432/airflow"),
        "URL password",
    ),
    "literal secret in connection": (
        "secrets",
        _set_env("airflow-scheduler", "AIRFLOW_CONN_AWS_DEFAULT", '{"conn_type": "aws", "login": "a", "password": "s3cr3t-value"}'),
        "AIRFLOW_CONN_AWS_DEFAULT.password",
    ),
    "diverging defaults": ("interpolation_defaults", _set_env("minio-init", "MINIO_ROOT_PASSWORD", "${MINIO_ROOT_PASSWORD:-dev-only-other}"), "defaults to"),
    "depends on unknown": ("depends_on", lambda c: c["services"]["spark-worker"]["depends_on"].update(spark={"condition": "service_started"}), "unknown service 'spark'"),
    "healthy without healthcheck": ("depends_on", lambda c: c["services"]["spark-master"].pop("healthcheck"), "has no healthcheck"),
    "port on all interfaces": ("published_ports", _set("postgres", "ports", ["5432:5432"]), "not bound to a host address"),
    "duplicate host port": ("published_ports", _set("spark-worker", "ports", ["127.0.0.1:18080:8081"]), "already published"),
}


@pytest.mark.parametrize("case", sorted(NEGATIVE_CASES))
def test_broken_compose_is_rejected(compose: dict[str, Any], case: str) -> None:
    check, mutate, fragment = NEGATIVE_CASES[case]
    broken = copy.deepcopy(compose)
    assert ALL_COMPOSE_CHECKS[check](broken) == []  # the untouched copy passes ...
    mutate(broken)
    problems = ALL_COMPOSE_CHECKS[check](broken)
    assert any(fragment in problem for problem in problems), problems  # ... the broken one does not


@pytest.mark.parametrize(
    ("bootstraps", "fragment"),
    [
        ({"c1": "kafka-c9:9092"}, "no compose service is named 'kafka-c9'"),
        ({"c1": "kafka-c1:9093"}, "does not listen on and advertise"),  # the controller port
        ({"c1": "kafka-c1:19092"}, "does not listen on and advertise"),  # advertised as localhost only
        ({"c1": "schema-registry-c1:8081"}, "does not listen on and advertise"),
        ({"c1": "kafka-c1:9092", "c2": "kafka-c1:9092"}, "same Kafka service"),
        ({"c1": "kafka-c1:9092,kafka-c2:9092"}, "mixes clusters"),
        ({"c1": "kafka-c1"}, "not host:port"),
        ({}, "no clusters"),
    ],
)
def test_broken_topology_is_rejected(compose: dict[str, Any], bootstraps: dict[str, Any], fragment: str) -> None:
    problems = check_topology_addresses(compose, bootstraps)
    assert any(fragment in problem for problem in problems), problems


def test_host_listener_mismatch_is_rejected(compose: dict[str, Any]) -> None:
    bootstraps = {f"c{i}": f"kafka-c{i}:9092" for i in range(1, 5)}
    swapped = dict(DESIGN_HOST_BOOTSTRAP, c1="127.0.0.1:19093")
    problems = check_host_listeners(compose, bootstraps, swapped)
    assert any("host port 19093" in problem for problem in problems), problems


def test_unpinned_dockerfile_is_rejected() -> None:
    problems = check_dockerfiles_pinned({
        "a.Dockerfile": "FROM python\n",
        "b.Dockerfile": "FROM apache/airflow:latest\n",
        "c.Dockerfile": "FROM python:3.11-slim AS build\nFROM build\n",  # a stage: fine
        "d.Dockerfile": "ARG V\nFROM python:${V}\n",
    })
    assert sorted(p.split(":")[0] for p in problems) == ["a.Dockerfile", "b.Dockerfile", "d.Dockerfile"], problems


# ------------------------------------------------------------------ the secured override (deploy/compose.secured.yaml)

SECURED_OVERRIDE = REPO / "deploy" / "compose.secured.yaml"
SECURED_TOPOLOGY = REPO / "deploy" / "topology.secured.yaml"
_REQUIRED_VAR = re.compile(r"^\$\{(AIRFLOW_CONN_[A-Z0-9_]+):\?[^}]+\}$")


def check_secured_override(base: dict[str, Any], override: dict[str, Any], topology: dict[str, Any]) -> Problems:
    """The override, merged onto the base as ``docker compose -f base -f override`` merges it, must run
    every Airflow service on the secured topology with each cluster's connection taken from the
    environment (required, never a value in the file), and leave nothing running that needs a
    service it moved behind a profile."""
    problems: Problems = []
    over = services(override)
    airflow = [n for n, s in services(base).items() if n.startswith("airflow-")]
    wanted = {f"AIRFLOW_CONN_{c['conn_id'].upper()}" for c in (topology.get("clusters") or {}).values()}
    if any("bootstrap" in c for c in (topology.get("clusters") or {}).values()):
        problems.append("the secured topology names a bootstrap: its clusters must be connections only")
    for name in airflow:
        env = (over.get(name) or {}).get("environment") or {}
        for var in sorted(wanted):
            if var not in env:
                problems.append(f"{name}: {var} is not passed on")
            elif not _REQUIRED_VAR.match(str(env[var])):
                problems.append(f"{name}: {var} must be ${{{var}:?...}} (from .env, required), not a value in the file")
        base_mounts = [v for v in services(base)[name].get("volumes", []) if str(v).endswith("/topology.yaml:ro")]
        mounts = [v for v in (over.get(name) or {}).get("volumes", []) if "topology.secured.yaml" in str(v)]
        if not mounts or (base_mounts and mounts[0].split(":")[1] != base_mounts[0].split(":")[1]):
            problems.append(f"{name}: the secured topology is not mounted over {base_mounts}")
    profiled = {n for n, s in over.items() if s.get("profiles")}
    for name, service in services(base).items():
        if name in profiled:
            continue
        needs = service.get("depends_on") or {}
        for dep in (needs if isinstance(needs, (dict, list)) else []):
            if dep in profiled:
                problems.append(f"{name} depends on {dep}, which the override moves behind a profile")
    return problems


def test_the_secured_override_runs_airflow_on_connections_only(compose: dict[str, Any]) -> None:
    override = load_compose(SECURED_OVERRIDE)
    topology = yaml.safe_load(SECURED_TOPOLOGY.read_text())
    assert check_secured_override(compose, override, topology) == []
    base_topology = yaml.safe_load(TOPOLOGY_FILE.read_text())
    assert topology["tree"] == base_topology["tree"]
    assert sorted(topology["clusters"]) == sorted(base_topology["clusters"])


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda o, t: o["services"]["airflow-scheduler"]["environment"].update(
        AIRFLOW_CONN_KAFKA_C1='{"conn_type": "kafka", "extra": {"sasl.password": "x"}}'), "not a value in the file"),
    (lambda o, t: o["services"]["airflow-triggerer"]["environment"].pop("AIRFLOW_CONN_KAFKA_C4"), "is not passed on"),
    (lambda o, t: o["services"].update({"spark-master": {"profiles": ["x"]}}), "moves behind a profile"),
    (lambda o, t: t["clusters"]["c2"].update(bootstrap="b:9092"), "names a bootstrap"),
])
def test_a_broken_secured_override_is_rejected(compose: dict[str, Any], mutate, fragment: str) -> None:
    override, topology = load_compose(SECURED_OVERRIDE), yaml.safe_load(SECURED_TOPOLOGY.read_text())
    mutate(override, topology)
    problems = check_secured_override(compose, override, topology)
    assert any(fragment in p for p in problems), problems
