"""A mirror's lag behind its source, as the mirror last saw it: ``mirror-status.json``.

A mirror (``logtrove mirror`` or ``serve --follow``) writes this small file in the data
directory about once a second; whoever shows lag (``/metrics``, ``topics describe``) reads
it from the path, in any process, as the indexer's checkpoint is read. It is a status
report, not state: losing it loses nothing (the mirror resumes from the logs' ends), so it
is replaced by rename without fsync. Which topics are followed is durable state and lives
in each topic's file (``TopicInfo.followed_from``).

::

    {"source": "HOST:PORT", "updated_ms": 1700000000000,
     "state": "running",                     # or "retrying", "stopped" (problem null: asked to)
     "problem": null,                                        # why retrying or stopped (below)
     "partitions": [{"topic": "t", "partition": 0,
                     "source_start": 0, "source_end": 120,   # the leader's log start, high watermark
                     "end": 100,                             # the mirror's log end offset
                     "lag_records": 20, "lag_ms": 350,       # behind by; since last caught up
                     "failed": null}]}                       # why this partition is no longer copied

A problem is ``{"reason": ..., "message": ..., "action": ..., "since_ms": ...}``, the
reason one of :data:`REASONS` and the action what an operator does about it. Retrying
(the source unreachable) mends itself when the source is back; a stopped mirror (refused
credentials or TLS, the local disk full) and a failed partition (a divergence the leader's
epochs cannot resolve, a batch that fails validation) wait for the operator.

``lag_ms`` is Kafka's replica lag time: how long ago the mirror last reached the leader's
high watermark (0 while it keeps up). A file that cannot be read or has the wrong shape
reads as no status at all; one written before states were reported reads as running.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import TMP_SUFFIX, remove_temp_files

STATUS_FILE = "mirror-status.json"
RUNNING, RETRYING, STOPPED = "running", "retrying", "stopped"
REASONS = (
    "source_unreachable",  # retrying: connection refused, timed out, broken
    "authentication_failed",  # stopped: SASL refused the mirror's user or password
    "tls_refused",  # stopped: a certificate did not verify, or the broker refused ours
    "diverged",  # a partition: its log parts from the source's and the epochs cannot say where
    "invalid_batch",  # a partition: the source sent a batch that fails validation (CRC, records)
    "disk_full",  # stopped: the data directory has no space left (or a file size limit)
    "storage_error",  # stopped or a partition: the local storage failed otherwise
)


@dataclass(frozen=True, slots=True)
class FollowProblem:
    """Why a mirror retries or stopped, or why a partition is no longer copied."""

    reason: str  # one of REASONS
    message: str
    action: str  # what to do about it
    since_ms: int


@dataclass(frozen=True, slots=True)
class PartitionFollowStatus:
    """How far one mirrored partition is behind its leader."""

    topic: str
    partition: int
    source_start: int
    source_end: int
    end: int
    lag_records: int
    lag_ms: int
    failed: FollowProblem | None = None


@dataclass(frozen=True, slots=True)
class FollowStatus:
    """The whole status file."""

    source: str
    updated_ms: int
    partitions: tuple[PartitionFollowStatus, ...]
    state: str = RUNNING
    problem: FollowProblem | None = None

    def for_topic(self, topic: str) -> dict[int, PartitionFollowStatus]:
        return {p.partition: p for p in self.partitions if p.topic == topic}


def write_follow_status(data_dir: Path, status: FollowStatus) -> None:
    """Replace the status file (temporary file + rename; no fsync, see the module doc)."""
    body: dict[str, Any] = {"source": status.source, "updated_ms": status.updated_ms, "state": status.state}
    body["problem"] = asdict(status.problem) if status.problem is not None else None
    body["partitions"] = [asdict(p) for p in status.partitions]
    fd, tmp = tempfile.mkstemp(dir=data_dir, prefix="." + STATUS_FILE + ".", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out)
        Path(tmp).replace(data_dir / STATUS_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_status_leftovers(data_dir: Path) -> None:
    """Remove temporary files a crash of :func:`write_follow_status` left (writers only)."""
    remove_temp_files(data_dir, (STATUS_FILE,))


def read_follow_status(data_dir: Path) -> FollowStatus | None:
    """The status a mirror last wrote in ``data_dir``, or ``None`` (no mirror, or a file
    that is not one)."""
    try:
        data: Any = json.loads((data_dir / STATUS_FILE).read_text("utf-8"))
        rows = tuple(
            PartitionFollowStatus(
                str(p["topic"]),
                int(p["partition"]),
                int(p["source_start"]),
                int(p["source_end"]),
                int(p["end"]),
                int(p["lag_records"]),
                int(p["lag_ms"]),
                _problem(p.get("failed")),
            )
            for p in data["partitions"]
        )
        state = str(data.get("state", RUNNING))
        return FollowStatus(
            str(data["source"]), int(data["updated_ms"]), rows, state, _problem(data.get("problem"))
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _problem(data: Any) -> FollowProblem | None:
    if data is None:
        return None
    return FollowProblem(
        str(data["reason"]), str(data["message"]), str(data["action"]), int(data["since_ms"])
    )
