"""State of the consumer group protocol (KIP-848): groups, members, and their file.

Three epochs order everything:

* the **group epoch** goes up whenever what the assignor would see changes: a member
  joins or goes, a subscription changes, a subscribed topic appears or changes its
  partition count;
* the **assignment epoch** is the group epoch the current *target assignment* was
  computed for (the target is computed as soon as the group epoch moves, so the two are
  equal between heartbeats);
* each **member epoch** is the assignment epoch the member has caught up with.

A member moves towards its target in steps (Kafka's ``CurrentAssignmentBuilder``)::

    STABLE ──new target takes partitions away──▶ UNREVOKED_PARTITIONS
      ▲   ╲                                          │ heartbeat owns none of ``revoking``
      │    ╲ new target, nothing to give up          ▼
      │     ╲──────────────────────────────▶ epoch := assignment epoch; takes the target
      │                                      partitions nobody else owns
      └── all of the target owned ◀────────  UNRELEASED_PARTITIONS (waits for the others)

Invariant: a partition is owned (in ``assigned`` or ``revoking``) by at most one member,
so a partition goes to its new owner only after the previous owner's heartbeat has
acknowledged revoking it.

The file ``consumer-groups.json`` in the data directory holds every group (JSON,
replaced atomically: temporary file, fsync, rename)::

    {"version": 1, "groups": {"<group id>": {
        "group_epoch": int, "assignment_epoch": int, "assignor": str,
        "subscribed": {"<topic>": partition count},       # what the target was computed from
        "target": {"<member id>": {"<topic>": [partitions]}},
        "members": {"<member id>": {"member_epoch": int, "previous_member_epoch": int,
            "state": str, "instance_id": str|null, "rack_id": str|null, "client_id": str,
            "client_host": str, "rebalance_timeout_ms": int, "subscribed_topic_names": [str],
            "subscribed_topic_regex": str|null, "server_assignor": str|null,
            "describable": [str]|null,   # the topics its regex may match (null: all)
            "assigned": {"<topic>": [partitions]}, "revoking": {"<topic>": [partitions]}}}}}}

Sessions are not in the file: after a restart every member has a whole session timeout
to heartbeat again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import atomic_write

STATE_FILE = "consumer-groups.json"
FILE_VERSION = 1

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"

TopicPartitions = dict[str, set[int]]
"""topic name → partitions."""


def now() -> float:
    return time.monotonic()


@dataclass
class ConsumerMember:
    """One member: its subscription, its epochs, and the partitions it owns."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    describable: frozenset[str] | None = None  # the topics its principal may describe; None: all
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    revoking: TopicPartitions = field(default_factory=dict)
    last_seen: float = field(default_factory=now)
    revocation_deadline: float = 0.0

    def owns(self, topic: str, partition: int) -> bool:
        return partition in self.assigned.get(topic, ()) or partition in self.revoking.get(topic, ())

    def to_json(self) -> dict[str, Any]:
        return {
            "member_epoch": self.member_epoch,
            "previous_member_epoch": self.previous_member_epoch,
            "state": self.state,
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "subscribed_topic_names": sorted(self.subscribed_topic_names),
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "server_assignor": self.server_assignor,
            "describable": None if self.describable is None else sorted(self.describable),
            "assigned": _partitions_json(self.assigned),
            "revoking": _partitions_json(self.revoking),
        }

    @classmethod
    def from_json(cls, member_id: str, data: dict[str, Any]) -> ConsumerMember:
        return cls(
            member_id,
            client_id=str(data["client_id"]),
            client_host=str(data["client_host"]),
            instance_id=data["instance_id"],
            rack_id=data["rack_id"],
            rebalance_timeout_ms=int(data["rebalance_timeout_ms"]),
            subscribed_topic_names=frozenset(data["subscribed_topic_names"]),
            subscribed_topic_regex=data["subscribed_topic_regex"],
            server_assignor=data["server_assignor"],
            describable=None if data.get("describable") is None else frozenset(data["describable"]),
            member_epoch=int(data["member_epoch"]),
            previous_member_epoch=int(data["previous_member_epoch"]),
            state=str(data["state"]),
            assigned=_partitions_from_json(data["assigned"]),
            revoking=_partitions_from_json(data["revoking"]),
        )


@dataclass
class ConsumerGroup:
    """One group of the consumer protocol."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "uniform"
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)
    subscribed: dict[str, int] = field(default_factory=dict)
    # regex → the topics it matched when last resolved (see ConsumerGroups.resolve_regexes)
    regex_topics: dict[str, frozenset[str]] = field(default_factory=dict)
    regexes_for: int = -1  # the topics version the regexes were resolved against
    # the topics version and group epoch the subscriptions were last resolved for
    resolved_for: tuple[int, int] | None = None

    @property
    def state(self) -> str:
        """Kafka's ``ConsumerGroupState``: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def member_of_instance(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owned_elsewhere(self, topic: str, member_id: str) -> set[int]:
        """The partitions of ``topic`` that members other than ``member_id`` own (hold
        or still revoke)."""
        return {
            p
            for m in self.members.values()
            if m.member_id != member_id
            for p in m.assigned.get(topic, set()) | m.revoking.get(topic, set())
        }

    def subscribed_topics(self) -> set[str]:
        """The topics of the last target assignment's subscriptions (as OffsetDelete
        checks them); none once the last member has gone, as in Kafka, where they are
        counted from the members' subscriptions."""
        return set(self.subscribed) if self.members else set()

    def to_json(self) -> dict[str, Any]:
        return {
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignor": self.assignor,
            "subscribed": self.subscribed,
            "target": {m: _partitions_json(t) for m, t in self.target.items()},
            "members": {m.member_id: m.to_json() for m in self.members.values()},
        }

    @classmethod
    def from_json(cls, group_id: str, data: dict[str, Any]) -> ConsumerGroup:
        return cls(
            group_id,
            group_epoch=int(data["group_epoch"]),
            assignment_epoch=int(data["assignment_epoch"]),
            assignor=str(data["assignor"]),
            members={m: ConsumerMember.from_json(m, d) for m, d in data["members"].items()},
            target={m: _partitions_from_json(t) for m, t in data["target"].items()},
            subscribed={str(t): int(n) for t, n in data["subscribed"].items()},
        )


class StateFileError(ValueError):
    """``consumer-groups.json`` exists but is not a state file this version can read."""


def load_groups(path: Path) -> dict[str, ConsumerGroup]:
    """The groups of the state file (none when it does not exist); raises
    :class:`StateFileError` for a file that does not parse."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw)
        if data.get("version") != FILE_VERSION:
            raise StateFileError(f"{path}: unknown version {data.get('version')!r}")
        return {g: ConsumerGroup.from_json(g, d) for g, d in data["groups"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateFileError(f"{path}: {exc}") from exc


def encode_groups(groups: dict[str, ConsumerGroup]) -> bytes:
    """The state file's bytes for ``groups`` (taken on the event loop, written off it)."""
    data = {"version": FILE_VERSION, "groups": {g.group_id: g.to_json() for g in groups.values()}}
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def save_groups(path: Path, data: bytes) -> None:
    atomic_write(path, data)


def _partitions_json(tps: TopicPartitions) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(tps.items()) if ps}


def _partitions_from_json(data: dict[str, list[int]]) -> TopicPartitions:
    return {str(t): {int(p) for p in ps} for t, ps in data.items()}
