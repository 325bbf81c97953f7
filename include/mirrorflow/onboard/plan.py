"""Onboarding a cluster: the request, the preflight checks, and the plan every later step follows.

Where the new cluster N joins: next to an existing leaf S (``sibling_of``) as a
new inner node ``{level: L, children: [S, N]}``. Then S is N's whole sibling
subtree at level L, and every message of every cluster reaches S. So S alone
is N's *peer*: the backfill copies S's partitions to N, and its end is the
checkpoint of the new level-L link ``S -> N`` (same link id, same
``transactional.id``, same checkpoint group as the regular link). When N joins
the tree the regular level-L run continues from exactly that offset: no gap,
no duplicate, while producers keep writing on every cluster.

Why joining an existing n-ary node (the parent of S already has level L) is
refused: N would then get new links from *every* other child of that node,
each starting without a checkpoint, and their cuts would race the backfill.
The pair node has no such links.

Links that copied into S's subtree before keep their effective target when the
tree grows (the default target spread can change with one more leaf): the
plan *pins* them, so nothing moves without an exact cut (mirror_switch_target
moves them later, with one).

Backfilled messages carry the copy-flags bits of every level N distributes
at, so none of N's distributors ever sends them on; provenance is stamped as
on any copy.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from confluent_kafka import KafkaException, Producer

from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX, is_internal_topic
from mirrorflow.kafka import (
    ClusterClient,
    Need,
    logical_earliest_and_stable,
    mirrored_topics,
    probe,
    refusal,
)
from mirrorflow.offsets.position import OFFSETS_TOPIC
from mirrorflow.topology import Distributor, Topology
from mirrorflow.topology.model import TopicSelector

log = logging.getLogger(__name__)

Backfill = Literal["none", "retained", "since", "archive"]
BACKFILL_MODES = ("none", "retained", "since", "archive")


class OnboardRefused(MirrorflowError):
    """Preflight found a reason not to onboard; nothing was created or changed."""


@dataclass(frozen=True)
class OnboardRequest:
    """The form of ``mirror_onboard_cluster``, validated; every error names its field."""

    cluster: str
    sibling_of: str
    level: int
    bootstrap: str | None = None
    conn_id: str | None = None
    topics: tuple[str, ...] = ()
    backfill: Backfill = "retained"
    since: str | None = None
    schemas: bool = True
    adopt: bool = False
    dry_run: bool = False
    #: How the new cluster names mirrored topics and groups (the topology key ``clusters.<c>.names``); ``None``:
    #: the logical names.
    names: Mapping[str, Any] | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> OnboardRequest:
        problems: list[str] = []

        def text(key: str) -> str | None:
            value = params.get(key)
            if value is None or (isinstance(value, str) and not value.strip()):
                return None
            if not isinstance(value, str):
                problems.append(f"{key}: expected a string, got {type(value).__name__}")
                return None
            return value.strip()

        cluster, sibling = text("cluster"), text("sibling_of")
        if cluster is None:
            problems.append("cluster: the new cluster's name is required")
        elif not re.fullmatch(r"[A-Za-z0-9_-]+", cluster):
            problems.append(f"cluster: {cluster!r} is not a valid cluster name (letters, digits, _ and -)")
        if sibling is None:
            problems.append("sibling_of: name the existing cluster the new one joins next to")
        level = params.get("level")
        if isinstance(level, str) and level.strip().isdigit():
            level = int(level)
        if not isinstance(level, int) or isinstance(level, bool) or level < 1:
            problems.append(f"level: expected a positive integer, got {level!r}")
        bootstrap, conn_id = text("bootstrap"), text("conn_id")
        if (bootstrap is None) == (conn_id is None):
            problems.append("bootstrap / conn_id: give exactly one (an address host:port, or an Airflow connection id)")
        topics = params.get("topics") or []
        if isinstance(topics, str):
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            problems.append("topics: expected a list of topic names or regexes")
            topics = []
        for t in topics:
            try:
                re.compile(t)
            except re.error as exc:
                problems.append(f"topics: bad regular expression {t!r}: {exc}")
        backfill = params.get("backfill") or "retained"
        if backfill not in BACKFILL_MODES:
            problems.append(f"backfill: expected one of {', '.join(BACKFILL_MODES)}, got {backfill!r}")
        since = text("since")
        if backfill == "since":
            if since is None:
                problems.append("since: backfill 'since' needs a timestamp (ISO 8601, or epoch milliseconds)")
            else:
                try:
                    parse_since(since)
                except ValueError as exc:
                    problems.append(f"since: {exc}")
        names = _names(params.get("names"), problems)
        flags = {}
        for key, default in (("schemas", True), ("adopt", False), ("dry_run", False)):
            value = params.get(key, default)
            if not isinstance(value, bool):
                problems.append(f"{key}: expected true or false, got {value!r}")
                value = default
            flags[key] = value
        if problems:
            raise OnboardRefused("mirror_onboard_cluster: the form is not valid:\n  " + "\n  ".join(problems))
        # a missing cluster or sibling_of, a level that is not a positive integer, or a backfill outside
        # BACKFILL_MODES added a problem above
        assert cluster is not None and sibling is not None and isinstance(level, int)
        return cls(cluster=cluster, sibling_of=sibling, level=level, bootstrap=bootstrap,
                   conn_id=conn_id, topics=tuple(topics), backfill=cast(Backfill, backfill), since=since,
                   names=names, **flags)

    def cluster_config(self) -> dict[str, Any]:
        """The new cluster's entry under ``clusters`` (an address, or the connection id; its names if given)."""
        config: dict[str, Any] = {"bootstrap": self.bootstrap} if self.bootstrap else {"conn_id": self.conn_id}
        if self.names:
            config["names"] = dict(self.names)
        return config

    def grown(self, topology: Topology) -> Topology:
        """``topology`` with the new cluster in place, unchecked (:func:`joined_topology` checks the join)."""
        return _grown(topology, self.cluster, self.cluster_config(), self.sibling_of, self.level)

    def since_ms(self) -> int | None:
        return parse_since(self.since) if self.backfill == "since" and self.since else None


def _names(value: Any, problems: list[str]) -> dict[str, Any] | None:
    """The form's ``names`` (an object like the topology's ``clusters.<c>.names``), checked; ``None``: none."""
    if value in (None, {}, ""):
        return None
    if not isinstance(value, dict):
        problems.append(f"names: expected an object such as {{\"topic_prefix\": \"acme-\"}}, got "
                        f"{type(value).__name__}")
        return None
    from pydantic import ValidationError

    from mirrorflow.topology.names import ClusterNames

    try:
        ClusterNames.model_validate(value)
    except ValidationError as exc:
        problems.extend(f"names{''.join(f'.{k}' for k in e['loc'])}: {e['msg']}" for e in exc.errors())
        return None
    return dict(value)


def parse_since(text: str) -> int:
    """Epoch milliseconds from ISO 8601 (naive means UTC) or a number of milliseconds."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither ISO 8601 (2026-11-22T10:00:00Z) nor epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


@dataclass
class OnboardPlan:
    """What preflight decided; every later task reads it (XCom) instead of deciding again."""

    cluster: str
    config: dict[str, Any]
    sibling_of: str
    level: int
    #: The new link ``sibling -> cluster`` whose checkpoint the backfill hands over.
    link_id: str
    backfill: str
    since_ms: int | None
    #: Copy-flags bits every backfilled message gets (every level the new cluster distributes at).
    bits: int
    #: Topic -> partitions, as the sibling has them (the offsets topic included when present).
    topics: dict[str, int]
    #: Topics already on the new cluster that are used as they are.
    adopted: list[str] = field(default_factory=list)
    #: Link id -> effective target to pin when joining (their default changes with the new leaf).
    pins: dict[str, str] = field(default_factory=dict)
    #: Archive restores: topic -> {partition: [first, next archived offset]} (backfill ``archive``).
    restore: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    joined: bool = False
    dry_run: bool = False
    cluster_id: str = ""
    brokers: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OnboardPlan:
        return cls(**dict(data))

    def event(self) -> dict[str, Any]:
        """The cluster change that joins the tree (see :mod:`mirrorflow.topology.changes`)."""
        from mirrorflow.topology.changes import add_event

        return add_event(self.cluster, self.config, sibling_of=self.sibling_of, level=self.level)

    def grown(self, topology: Topology) -> Topology:
        """``topology`` with the new cluster in place, as the join will make it (itself once the cluster joined)."""
        return _grown(topology, self.cluster, self.config, self.sibling_of, self.level)


def _grown(topology: Topology, cluster: str, config: Mapping[str, Any], sibling_of: str, level: int) -> Topology:
    if cluster in topology.clusters:
        return topology
    return topology.with_cluster(cluster, config, sibling_of=sibling_of, level=level)


def joined_topology(topology: Topology, req: OnboardRequest) -> Topology:
    """The topology with the new cluster in place; refuses joins that would need racing cuts."""
    if req.cluster in topology.clusters:
        return topology
    try:
        new = req.grown(topology)
    except (MirrorflowError, LookupError, ValueError) as exc:
        raise OnboardRefused(f"cluster {req.cluster} cannot join next to {req.sibling_of} at level {req.level}: "
                             f"{exc} (a new cluster joins as a pair with one leaf, at a level below the level of "
                             "that leaf's parent; see docs/onboarding.md)") from None
    old_ids = {link.link_id for link in topology.all_links()}
    foreign = [l for l in new.all_links() if l.link_id not in old_ids and l.source != req.cluster
               and not (l.source == req.sibling_of and l.level == req.level)]
    if foreign:
        raise OnboardRefused(
            f"cluster {req.cluster} would join an existing level-{req.level} node next to {req.sibling_of}: that "
            f"creates links {', '.join(l.link_id for l in foreign)} into it from other clusters, whose starting "
            f"points would race the backfill. Join at a level below {req.sibling_of}'s parent (a new pair node "
            f"with {req.sibling_of}); see docs/onboarding.md")
    return new


def backfill_link(new: Topology, req: OnboardRequest) -> Distributor:
    return next(l for l in new.distributors(req.sibling_of) if l.level == req.level)


def pins_for(old: Topology, new: Topology, targets: Mapping[str, str]) -> dict[str, str]:
    """Links whose effective target would change only because the tree grew: keep them where they are."""
    pins: dict[str, str] = {}
    for link in old.all_links():
        stored = targets.get(link.link_id)
        current = stored if stored and link.accepts(stored) else link.default_target  # as effective_links does
        if link.link_id not in {l.link_id for l in new.all_links()}:
            continue
        grown = new.link(link.link_id)
        if grown.default_target != current and grown.accepts(current):
            pins[link.link_id] = current
    return pins


def preflight(topology: Topology, req: OnboardRequest, new_client: ClusterClient, sibling: ClusterClient, *,
              targets: Mapping[str, str] | None = None, resumed_topics: list[str] | None = None,
              archive_coverage: Any = None, timeout: float = 30.0) -> OnboardPlan:
    """Check everything before anything changes; return the plan or raise :class:`OnboardRefused`.

    ``resumed_topics``: topics an earlier attempt of this same onboarding created (so
    a re-run continues instead of calling them a clash). ``archive_coverage``:
    ``(topic, partition) -> [(first, next), ...]`` of the sibling's archive
    (backfill ``archive``).
    """
    joined = req.cluster in topology.clusters
    if joined and topology.cluster(req.cluster).model_dump(exclude_none=True).get("bootstrap") not in (
            None, req.bootstrap):
        raise OnboardRefused(f"cluster {req.cluster} is already in the topology with another address")
    new = joined_topology(topology, req)
    link = backfill_link(new, req)
    bits = 0
    for d in new.distributors(req.cluster):
        bits |= d.bit
    for who, client in ((req.cluster, new_client), (req.sibling_of, sibling)):
        try:
            info = probe(client, timeout)
        except ClusterUnreachable as exc:
            raise OnboardRefused(f"preflight: {exc}") from None
        if who == req.cluster:
            new_info = info
    _check_transactions(new_client, req.cluster, timeout)

    selector = TopicSelector(list(topology.topics))
    wanted = TopicSelector(list(req.topics)) if req.topics else None
    on_sibling = mirrored_topics(sibling, timeout)  # logical names: each cluster's own, parsed
    on_new = mirrored_topics(new_client, timeout)
    topics = {t: n for t, n in sorted(on_sibling.items())
              if selector.selects(t) and (wanted is None or wanted.selects(t))}
    if wanted is not None and not topics:
        raise OnboardRefused(f"topics {list(req.topics)}: no mirrored topic on {req.sibling_of} matches")
    clashes, adopted, mine = [], [], set(resumed_topics or [])
    for t, n in topics.items():
        if t not in on_new:
            continue
        if on_new[t] != n:
            clashes.append(f"{t}: {on_new[t]} partitions on {req.cluster}, {n} on {req.sibling_of} (a mirrored "
                           "topic must have the same partitions everywhere; delete or rename it on "
                           f"{req.cluster})")
        elif t in mine:
            continue
        elif req.adopt:
            adopted.append(t)
        else:
            clashes.append(f"{t}: already exists on {req.cluster} (same {n} partitions); its messages would be "
                           "distributed as the new cluster's own. Set adopt to use it as it is")
    if clashes:
        raise OnboardRefused(f"preflight: {len(clashes)} topic(s) on {req.cluster} clash with the mirrored ones; "
                             "nothing was created:\n  " + "\n  ".join(clashes))
    if (offsets := sibling.own(OFFSETS_TOPIC)) in on_sibling:
        topics[offsets] = on_sibling[offsets]

    plan = OnboardPlan(cluster=req.cluster, config=req.cluster_config(), sibling_of=req.sibling_of,
                       level=req.level, link_id=link.link_id, backfill=req.backfill, since_ms=req.since_ms(),
                       bits=bits, topics=topics, adopted=adopted,
                       pins={} if joined else pins_for(topology, new, targets or {}), joined=joined,
                       dry_run=req.dry_run, cluster_id=new_info.cluster_id, brokers=new_info.brokers)
    if joined:
        plan.notes.append(f"{req.cluster} is already in the tree: the backfill continues from its checkpoint")
    if req.backfill == "archive":
        plan.restore = _restore_ends(plan, sibling, archive_coverage, timeout)
    return plan


def preflight_transactional_id(cluster: str) -> str:
    """The ``transactional.id`` with which preflight proves that ``cluster`` takes transactions."""
    return f"{INTERNAL_TOPIC_PREFIX}.preflight.{cluster}"


def _check_transactions(client: ClusterClient, name: str, timeout: float) -> None:
    """The copier needs transactions (Kafka 0.11+, and the right ACLs): prove it once, up front."""
    txn_id = preflight_transactional_id(name)
    producer = Producer(client.producer(**{"transactional.id": txn_id, "transaction.timeout.ms": 10000}))
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        err = exc.args[0]
        named = refusal(name, client.settings, err, "proving that it takes exactly-once (transactional) producers",
                        Need("TRANSACTIONAL_ID", txn_id, "WRITE"))
        if named is not None:
            raise OnboardRefused(f"preflight: {named}") from None
        raise OnboardRefused(f"preflight: cluster {name} refuses transactional producers ({err.name()}: "
                             f"{err.str()}); exactly-once copies need Kafka 0.11+ transactions and WRITE on "
                             f"the transactional id {txn_id} (docs/security.md)") from None


def _restore_ends(plan: OnboardPlan, sibling: ClusterClient, coverage: Any, timeout: float
                  ) -> dict[str, dict[str, list[int]]]:
    """Per partition, where the archive restore ends; refuse if archive and Kafka do not meet."""
    if coverage is None:
        raise OnboardRefused("backfill 'archive': no archive is configured (topology key archive, Airflow AWS "
                             "connection)")
    from confluent_kafka import TopicPartition

    data = {t: n for t, n in plan.topics.items() if not is_internal_topic(t)}
    tps = [TopicPartition(t, p) for t, n in data.items() for p in range(n)]
    lows, _ = logical_earliest_and_stable(sibling, tps, timeout)
    ends: dict[str, dict[str, list[int]]] = {}
    gaps = []
    for tp in tps:
        where = f"{tp.topic}[{tp.partition}]"
        ranges = sorted(coverage(tp.topic, tp.partition))
        low = lows[(tp.topic, tp.partition)]
        covering = [r for r in ranges if r[0] <= low <= r[1]]
        if covering:
            first, end = covering[-1]
            if any(r[1] < first for r in ranges):
                plan.notes.append(f"{where}: the archive has a hole before offset {first}; history is restored "
                                  f"from {first}")
            if first < end:
                ends.setdefault(tp.topic, {})[str(tp.partition)] = [first, end]
        elif not ranges or low < ranges[0][0]:
            if low > 0:
                plan.notes.append(f"{where}: {plan.sibling_of} still holds everything from offset {low}, and "
                                  "nothing before it is archived")
        else:
            last = max(r[1] for r in ranges if r[1] < low)
            gaps.append(f"{where}: the archive ends at offset {last} but {plan.sibling_of} starts at {low} "
                        f"(offsets {last}..{low - 1} are in neither)")
    if gaps:
        raise OnboardRefused("backfill 'archive': the archive and the sibling's retained data do not meet; run "
                             "mirror_archive (or choose backfill retained):\n  " + "\n  ".join(gaps))
    return ends
