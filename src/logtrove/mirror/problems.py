"""Why a mirror retries or stopped, and what an operator does about it.

Each problem the mirror reports in ``mirror-status.json``
(:class:`~logtrove.storage.follow.FollowProblem`) carries a reason from
:data:`~logtrove.storage.follow.REASONS` and an action written for the person reading
``topics describe`` or an alert on ``/metrics``: the one thing to check or change, and
whether the mirror comes back by itself.
"""

from __future__ import annotations

import errno

from logtrove.storage.follow import FollowProblem

# errors of a write that more space (or a larger file size limit) would have let through
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def unreachable(source: str, message: str, retry_s: float, now_ms: int) -> FollowProblem:
    return FollowProblem(
        "source_unreachable",
        message,
        f"check that {source} is up and reachable from this host (address, port, listener, "
        f"firewall); the mirror retries every {retry_s:g} s and resumes where it stopped",
        now_ms,
    )


def refused(reason: str, message: str, now_ms: int) -> FollowProblem:
    """The source refused the mirror (``reason``: authentication_failed or tls_refused)."""
    if reason == "authentication_failed":
        action = (
            "fix sasl.mechanism, sasl.username and sasl.password in --source-config "
            "(serve: --follow-config), or the user at the source, then start the mirror again"
        )
    else:
        action = (
            "fix ssl.ca.location (the CA that signed the source's certificate, which must name "
            "the host) or the client certificate in --source-config (serve: --follow-config), "
            "then start the mirror again"
        )
    return FollowProblem(reason, message, action, now_ms)


def local_failure(data_dir: str, exc: OSError, now_ms: int) -> FollowProblem:
    """The data directory failed a write or a read (the whole mirror stops)."""
    # a write the kernel cut short (Segment.append reports it without an errno) is what a
    # full disk or the file size limit does to pwritev before it fails outright
    short = exc.errno is None and "short write" in str(exc)
    if exc.errno in _FULL or short:
        return FollowProblem(
            "disk_full",
            f"cannot write to {data_dir}: {exc}",
            f"free space in {data_dir} (or raise the file size limit), then start the mirror "
            "again: it resumes from each partition's log end, with no gap and no duplicate",
            now_ms,
        )
    return FollowProblem(
        "storage_error",
        f"the data directory {data_dir} failed: {exc}",
        "check the data directory (permissions, mount, I/O errors in the system log), then "
        "start the mirror again",
        now_ms,
    )


def diverged(topic: str, message: str, now_ms: int) -> FollowProblem:
    return FollowProblem(
        "diverged",
        message,
        f"delete the topic here (logtrove topics delete {topic}, with the mirror stopped) and "
        "start the mirror again: it copies the topic anew from the source's log start",
        now_ms,
    )


def invalid_batch(message: str, now_ms: int) -> FollowProblem:
    return FollowProblem(
        "invalid_batch",
        message,
        "the source sent a batch that fails validation (CRC or records): check the source's "
        "log at that offset (logtrove dump, kafka-dump-log.sh); the other partitions go on, and "
        "a restart of the mirror tries this one again",
        now_ms,
    )


def partition_storage(message: str, now_ms: int) -> FollowProblem:
    return FollowProblem(
        "storage_error",
        message,
        "check the partition's directory and the broker log; a restart of the mirror tries it again",
        now_ms,
    )
