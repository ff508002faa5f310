"""The mirror's settings and what it keeps of each followed partition.

:class:`MirrorConfig` (one mirror's settings), :class:`PartitionState` (per followed
partition: the source's start and end as last seen, whether it was checked against the
leader, why it stopped), :class:`MirrorStats` (totals since the start) and
:class:`MirrorError` (the mirror cannot go on); the loop that uses them is :mod:`.mirror`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from logtrove.client import ClientSecurity
from logtrove.storage.follow import FollowProblem


class MirrorError(Exception):
    """The mirror cannot go on (the pattern is not a regex, the source refused the
    mirror's credentials or TLS, the source is unreachable for too long in ``once`` mode)."""


@dataclass(frozen=True)
class MirrorConfig:
    """Settings of one mirror."""

    source: str  # HOST:PORT of any broker of the source cluster
    security: ClientSecurity | None = None  # TLS / SASL towards the source (None: PLAINTEXT)
    topics: str = ".*"  # a regular expression the whole topic name must match
    max_bytes_per_s: int | None = None
    groups: bool = True  # copy the source's group commits on the followed topics
    metadata_interval_ms: int = 5000
    groups_interval_ms: int = 5000
    status_interval_ms: int = 1000
    max_wait_ms: int = 500  # the fetch long poll when there is nothing new
    fetch_max_bytes: int = 16 << 20
    partition_max_bytes: int = 4 << 20
    retry_backoff_ms: int = 1000
    once_max_failures: int = 30  # consecutive failed rounds before ``once`` gives up
    maintenance: bool = False  # run storage maintenance itself (no broker beside it to do so)
    maintenance_interval_ms: int = 1000


@dataclass
class PartitionState:
    """What the mirror knows of one followed partition."""

    topic: str
    partition: int
    source_start: int = -1
    source_end: int = -1
    caught_up_ms: int = 0  # the last time the local end reached the source's high watermark
    max_bytes: int = 0
    failed: str | None = None  # why it is no longer followed (divergence, a refused batch)
    problem: FollowProblem | None = None  # the same with its reason and what to do
    verified: bool = False  # checked against the leader (epochs, or the last batch compared)
    source_epoch: int = -1  # the partition's leader epoch in the source's metadata
    diverged: str | None = None  # an answer overlapped the local end: the epochs must resolve it
    past_end: str | None = None  # the source's end is below ours (lost records, or a lagging HW)


@dataclass
class MirrorStats:
    """Totals since the mirror started, for progress lines and the benchmark."""

    records: int = 0
    batches: int = 0
    bytes: int = 0
    rounds: int = 0
    commits: int = 0
    started: float = field(default_factory=time.monotonic)
