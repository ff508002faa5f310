"""Connection limits of the Kafka listener.

* Admission, as Kafka's ``max.connections`` and ``max.connections.per.ip``: a connection
  over a limit is closed as soon as it is accepted, before any byte of it is read.
  Refusals are logged at most once per ``log_interval_s`` (with how many there were
  since the last line), so a flood of connections cannot also flood the log.
* Timeouts, as Kafka's ``connections.max.idle.ms`` plus a read timeout for slow senders
  and, on SASL listeners, a deadline to authenticate by:
  each connection records what it is waiting for and since when (:class:`Connection`, two
  attribute writes per step, no timer per request); one periodic scan
  (:func:`overdue`) finds those waiting too long, and the broker aborts them.
"""

from __future__ import annotations

import enum
import logging
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("logtrove.broker")

MIN_AUTO_CONNECTIONS = 64


def default_max_connections() -> int:
    """Half the process's descriptor soft limit (at least 64): the other half stays for
    segment files, indexes and the HTTP API, so clients alone can never exhaust them."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 65536
    return max(MIN_AUTO_CONNECTIONS, soft // 2)


class ConnectionLimits:
    """Counts open connections, in total and per client address, and admits new ones.

    Invariant: ``total == sum(per_ip.values())``; every :meth:`admit` that returned
    ``True`` is matched by exactly one :meth:`release` of the same address.
    """

    def __init__(
        self,
        max_total: int,
        max_per_ip: int | None,
        *,
        log_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self._log_interval_s = log_interval_s
        self._clock = clock
        self._refused = 0
        self._last_log: float | None = None

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; ``False`` (not counted) if over a limit."""
        if self.total >= self.max_total:
            self._refuse(f"{self.max_total} connections open (--max-connections)")
            return False
        if self.max_per_ip is not None and self.per_ip[address] >= self.max_per_ip:
            self._refuse(f"{self.max_per_ip} connections open from {address} (--max-connections-per-ip)")
            return False
        self.total += 1
        self.per_ip[address] += 1
        return True

    def release(self, address: str) -> None:
        """Forget one admitted connection from ``address``."""
        self.total -= 1
        self.per_ip[address] -= 1
        if self.per_ip[address] <= 0:
            del self.per_ip[address]

    def _refuse(self, why: str) -> None:
        self._refused += 1
        now = self._clock()
        if self._last_log is None or now - self._last_log >= self._log_interval_s:
            log.warning("refused %d new connection(s): %s", self._refused, why)
            self._refused = 0
            self._last_log = now


class Phase(enum.Enum):
    """What a connection is waiting for."""

    IDLE = "waiting for a request"  # limit: connections_max_idle_ms
    READING = "reading a request"  # its first byte came; limit: request_read_timeout_ms
    HANDLING = "handling a request"  # the broker's turn (a Fetch may long-poll): no limit
    WRITING = "writing a reply"  # the client's turn to take it; limit: connections_max_idle_ms


@dataclass(slots=True, eq=False)
class Connection:
    """One served connection: its address, how to close it, and its current phase."""

    address: str
    abort: Callable[[], None]
    phase: Phase
    since: float  # loop time at which the phase began
    auth_deadline: float | None = None  # SASL listeners: loop time by which it must be authenticated

    def enter(self, phase: Phase, now: float) -> None:
        self.phase, self.since = phase, now


def overdue(
    connections: Iterable[Connection], now: float, *, idle_s: float, read_s: float
) -> list[tuple[Connection, str]]:
    """The connections that have waited longer than their phase allows, with why."""
    out = []
    for conn in connections:
        if conn.auth_deadline is not None and now > conn.auth_deadline:
            out.append((conn, "not authenticated in time (--sasl-auth-timeout-ms)"))
            continue
        if conn.phase is Phase.HANDLING:
            continue
        limit, option = (
            (read_s, "--request-read-timeout-ms")
            if conn.phase is Phase.READING
            else (idle_s, "--connections-max-idle-ms")
        )
        if now - conn.since > limit:
            out.append((conn, f"{conn.phase.value} for over {limit * 1000:.0f} ms ({option})"))
    return out


__all__ = ["Connection", "ConnectionLimits", "Phase", "default_max_connections", "overdue"]
