"""The leader a mirror follows, over the Kafka protocol: any Kafka-protocol cluster.

One blocking :class:`~logtrove.client.kafka.KafkaClient` per broker of the source: the
bootstrap one for cluster-wide requests (Metadata, DescribeConfigs, ListGroups), and one
per partition leader for Fetch and ListOffsets (as a Kafka follower fetches from each
leader), and per group coordinator for OffsetFetch. Requests use the versions
logtrove's own remote commands use (Metadata 12, Fetch 12, ListOffsets 7, OffsetFetch 8,
ListGroups 4, DescribeConfigs 4, FindCoordinator 3), which Apache Kafka 2.8+, Redpanda,
tansu and logtrove serve; OffsetForLeaderEpoch 3 only where ApiVersions lists it (Kafka,
Redpanda and logtrove do, tansu does not). The request bodies are
:mod:`logtrove.wire.requests`' (the clients send the same); this module picks the broker
each goes to and reads the answers.

Fetch is a consumer's (replica id -1, READ_UNCOMMITTED): it returns every batch below the
high watermark, control batches included, as raw bytes, never decoded here. Everything
the source answers is hostile input: a connection error or an unreadable answer raises
:class:`SourceError`, and the mirror drops the connection and retries.

A secured source (TLS, SASL) is reached with a
:class:`~logtrove.client.security.ClientSecurity` (librdkafka's property names):
every connection, the bootstrap one and each leader's, is wrapped in TLS and
authenticated before its first request. A refusal that retrying cannot mend raises
:class:`SourceRefusedError` instead, and the mirror stops with its reason:

* SaslAuthenticate answers SASL_AUTHENTICATION_FAILED (a wrong user or password), or
  the handshake refuses the mechanism;
* the source's certificate does not verify (an unknown CA, a name it does not carry);
* the TLS peer refuses us (no or an untrusted client certificate), or is not TLS.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logtrove.client import ClientSecurity, KafkaClient, KafkaProtocolError
from logtrove.storage import SOURCE_CONFIGS
from logtrove.wire import (
    ApiKey,
    describe_configs_body,
    fetch_body,
    find_coordinator_body,
    list_offsets_body,
    metadata_body,
    offset_fetch_body,
    offset_for_leader_epoch_body,
)

# FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: the epoch we know is older / newer than the
# leader's, so its answer would not be about our log: refresh metadata and ask again, as a
# Kafka follower does (never "the epochs cannot tell", which stops a diverged partition)
STALE_EPOCH_ERRORS = frozenset({74, 75})
CLIENT_ID = "logtrove-mirror"
SASL_AUTHENTICATION_FAILED = 58

# OpenSSL's reasons for a refused TLS session that a retry cannot mend, with a hint.
_TLS_HINTS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the broker wants a client certificate "
    "(ssl.certificate.location, ssl.key.location)",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the broker refused our client certificate",
    "TLSV1_ALERT_UNKNOWN_CA": "the broker does not trust the CA of our client certificate",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the broker refused our client certificate",
    "WRONG_VERSION_NUMBER": "is that a TLS listener? (security.protocol)",
}

# The topic configs a mirror copies (the storage refuses clients' changes of them on a
# followed topic): see logtrove.storage.config.SOURCE_CONFIGS.
MIRRORED_CONFIGS = tuple(sorted(SOURCE_CONFIGS))


class SourceError(Exception):
    """The source cluster could not be reached or answered something unusable (retried)."""


class SourceRefusedError(Exception):
    """The source refused the mirror's credentials or TLS session, or its certificate did
    not verify: retrying with the same settings cannot help, so this is not a
    :class:`SourceError` (which the mirror retries). ``reason``: ``authentication_failed``
    or ``tls_refused`` (:data:`logtrove.storage.follow.REASONS`)."""

    def __init__(self, message: str, reason: str = "tls_refused") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SourceTopic:
    """A topic of the source: partition count and each partition's leader node."""

    name: str
    leaders: Mapping[int, int]  # partition -> leader node id (-1: none right now)
    epochs: Mapping[int, int] = field(default_factory=dict)  # partition -> leader epoch (-1: unknown)

    @property
    def partitions(self) -> int:
        return len(self.leaders)


@dataclass(frozen=True, slots=True)
class FetchWant:
    """One partition to fetch from ``offset`` with at most ``max_bytes``."""

    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Fetched:
    """One partition of a Fetch answer: raw record batches (possibly ending with a
    partial one, as Kafka may send), the leader's high watermark and log start."""

    topic: str
    partition: int
    error_code: int
    records: bytes
    high_watermark: int
    log_start_offset: int  # -1 when the source does not say


class Source:
    """Connections to the source cluster, opened on first use and dropped on error."""

    def __init__(
        self,
        bootstrap: str,
        *,
        security: ClientSecurity | None = None,
        timeout_s: float = 30,
        max_frame_bytes: int = 256 << 20,
    ) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes
        self._nodes: dict[int, str] = {}
        self._clients: dict[str, KafkaClient] = {}
        self._api_keys: dict[str, frozenset[int]] = {}  # per broker address, from ApiVersions

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        self._api_keys.clear()

    def _client(self, address: str) -> KafkaClient:
        client = self._clients.get(address)
        if client is None:
            try:
                client = KafkaClient(
                    address,
                    timeout_s=self.timeout_s,
                    client_id=CLIENT_ID,
                    max_frame_bytes=self.max_frame_bytes,
                    security=self.security,
                )
            except KafkaProtocolError as exc:  # only SASL speaks before the first request
                raise self._sasl_refused(address, exc) from exc
            except ssl.SSLError as exc:
                refused = _tls_refused(address, exc)
                raise refused or SourceError(f"cannot connect to {address}: {exc}") from exc
            except (OSError, ValueError) as exc:
                raise SourceError(f"cannot connect to {address}: {exc}{self._closed_hint(exc)}") from exc
            self._clients[address] = client
        return client

    def _request(self, address: str, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
        """One request; any failure drops the connection (it may be out of step) and
        raises :class:`SourceError`."""
        fresh = address not in self._clients
        client = self._client(address)
        try:
            return client.request(api_key, version, body)
        except (OSError, KafkaProtocolError, ValueError, TypeError) as exc:
            self._clients.pop(address, None)
            self._api_keys.pop(address, None)  # another broker may answer there next time
            client.close()
            # TLS 1.3 refuses a client certificate after the handshake: at the first read
            refused = _tls_refused(address, exc) if isinstance(exc, ssl.SSLError) else None
            hint = self._closed_hint(exc) if fresh else ""
            raise refused or SourceError(f"{address}: api key {api_key} failed: {exc}{hint}") from exc

    def _closed_hint(self, exc: Exception) -> str:
        """A hint for a TLS connection closed before its first answer while we sent no
        client certificate: how a broker that requires one (and sends no TLS alert, as
        logtrove's does not) refuses it. Retried all the same: a broker restarting looks
        the same."""
        security = self.security
        if not isinstance(exc, ConnectionError) or security is None or not security.protocol.tls:
            return ""
        if security.certfile:
            return ""
        return (
            " (closed before the first answer: if the broker requires a client certificate, "
            "set ssl.certificate.location and ssl.key.location)"
        )

    def _sasl_refused(self, address: str, exc: KafkaProtocolError) -> SourceRefusedError:
        """The error for a SASL exchange the source refused (the password never in it)."""
        mechanism = self.security.mechanism if self.security else "?"
        user = self.security.username if self.security else None
        if exc.code == SASL_AUTHENTICATION_FAILED:
            return SourceRefusedError(
                f"authentication failed for user {user} at {address} ({mechanism}): {exc}",
                "authentication_failed",
            )
        return SourceRefusedError(
            f"SASL {mechanism} as user {user} refused at {address}: {exc}", "authentication_failed"
        )

    def _node(self, node_id: int) -> str:
        """The address of a node (the bootstrap one if Metadata did not name it)."""
        return self._nodes.get(node_id, self.bootstrap)

    # -- metadata and configs ----------------------------------------------------------
    def topics(self, pattern: re.Pattern[str]) -> dict[str, SourceTopic]:
        """The source's topics whose whole name matches ``pattern`` (internal topics and
        names starting with ``__`` never: each cluster keeps its own), with leaders."""
        resp = self._request(self.bootstrap, ApiKey.METADATA, 12, metadata_body(None))
        self._nodes = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in resp.brokers}
        found: dict[str, SourceTopic] = {}
        for t in resp.topics:
            name = str(t.name or "")
            if int(t.error_code) or t.is_internal or name.startswith("__") or not pattern.fullmatch(name):
                continue
            leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
            if sorted(leaders) != list(range(len(leaders))):
                raise SourceError(f"metadata of {name!r} lists partitions {sorted(leaders)}, not 0..n-1")
            epochs = {int(p.partition_index): int(p.leader_epoch) for p in t.partitions}
            found[name] = SourceTopic(name, leaders, epochs)
        return found

    def configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """The :data:`MIRRORED_CONFIGS` each topic sets explicitly at the source (its
        defaults are left to the mirror's defaults). A topic the source could not
        describe is left out (unknown, which is not "none set"); a source without
        DescribeConfigs gives no topic rather than an error."""
        names = list(topics)
        if not names:
            return {}
        body = describe_configs_body(names, MIRRORED_CONFIGS)
        try:
            resp = self._request(self.bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, body)
        except SourceError:
            return {}
        out: dict[str, dict[str, str]] = {}
        for result in resp.results:
            if int(result.error_code):
                continue
            out[str(result.resource_name)] = {
                str(c.name): str(c.value)
                for c in result.configs
                if c.name in MIRRORED_CONFIGS and c.value is not None and int(c.config_source) == 1
            }
        return out

    # -- offsets and records ---------------------------------------------------------------
    def list_offsets(self, topic: SourceTopic, partitions: Iterable[int], timestamp: int) -> dict[int, int]:
        """ListOffsets ``timestamp`` (EARLIEST / LATEST) of some partitions, each asked of
        its leader; a partition whose answer carries an error is left out."""
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            by_leader.setdefault(topic.leaders.get(p, -1), []).append(p)
        out: dict[int, int] = {}
        for leader, parts in by_leader.items():
            body = list_offsets_body(topic.name, parts, timestamp)
            resp = self._request(self._node(leader), ApiKey.LIST_OFFSETS, 7, body)
            for t in resp.topics:
                for p in t.partitions:
                    if not int(p.error_code) and p.offset >= 0:
                        out[int(p.partition_index)] = int(p.offset)
        return out

    def fetch(
        self, leader: int, wants: list[FetchWant], *, max_wait_ms: int, max_bytes: int
    ) -> list[Fetched]:
        """One Fetch of ``wants`` (all led by ``leader``) from their offsets. Partitions
        the answer leaves out (some brokers do when they have nothing) are not listed."""
        by_topic: dict[str, list[tuple[int, int, int]]] = {}
        for w in wants:
            by_topic.setdefault(w.topic, []).append((w.partition, w.offset, w.max_bytes))
        body = fetch_body(by_topic, max_wait_ms=max_wait_ms, max_bytes=max_bytes)
        resp = self._request(self._node(leader), ApiKey.FETCH, 12, body)
        if int(resp.error_code):
            raise SourceError(f"fetch from node {leader}: error code {int(resp.error_code)}")
        return [
            Fetched(
                str(t.topic),
                int(p.partition_index),
                int(p.error_code),
                bytes(p.records or b""),
                int(p.high_watermark),
                int(p.log_start_offset),
            )
            for t in resp.responses
            for p in t.partitions
        ]

    def serves(self, node_id: int, api_key: int) -> bool:
        """Whether a broker lists ``api_key`` in its ApiVersions answer (asked once per
        broker address)."""
        address = self._node(node_id)
        keys = self._api_keys.get(address)
        if keys is None:
            resp = self._request(address, ApiKey.API_VERSIONS, 0, {})
            keys = self._api_keys[address] = frozenset(int(k.api_key) for k in resp.api_keys)
        return api_key in keys

    def epoch_end_offsets(self, topic: SourceTopic, epochs: Mapping[int, int]) -> dict[int, tuple[int, int]]:
        """OffsetForLeaderEpoch of some partitions (partition -> the local log's latest
        epoch), each asked of its leader: partition -> (the leader's largest epoch ≤ it, the
        offset where that epoch ends there). A leader that does not serve the API, and a
        partition answered with an error, are left out (the epochs cannot tell), except
        that a leader epoch other than the metadata's (FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH) raises :class:`SourceError`: the round is retried after a
        metadata refresh, as a Kafka follower retries."""
        by_leader: dict[int, list[int]] = {}
        for p in epochs:
            by_leader.setdefault(topic.leaders.get(p, -1), []).append(p)
        out: dict[int, tuple[int, int]] = {}
        for leader, parts in by_leader.items():
            if leader < 0 or not self.serves(leader, ApiKey.OFFSET_FOR_LEADER_EPOCH):
                continue
            asked = [(p, topic.epochs.get(p, -1), epochs[p]) for p in parts]
            body = offset_for_leader_epoch_body(topic.name, asked)
            resp = self._request(self._node(leader), ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body)
            for t in resp.topics:
                for p in t.partitions:
                    code = int(p.error_code)
                    if code in STALE_EPOCH_ERRORS:  # our metadata is older or newer than the leader
                        raise SourceError(
                            f"{topic.name}-{int(p.partition)}: the leader's epoch is not the "
                            f"{topic.epochs.get(int(p.partition), -1)} its metadata said (error code "
                            f"{code}); asking again after a metadata refresh"
                        )
                    if not code and int(p.partition) in epochs:
                        out[int(p.partition)] = (int(p.leader_epoch), int(p.end_offset))
        return out

    # -- consumer groups ----------------------------------------------------------------------
    def groups(self) -> list[str]:
        """The group ids the source's brokers know (ListGroups to the bootstrap broker;
        on a multi-broker cluster each broker lists the groups it coordinates, so every
        known broker is asked)."""
        ids: set[str] = set()
        for address in {self.bootstrap, *self._nodes.values()}:
            resp = self._request(address, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
            if not int(resp.error_code):
                ids.update(str(g.group_id) for g in resp.groups)
        return sorted(ids)

    def committed(self, group: str) -> dict[tuple[str, int], tuple[int, int, str]]:
        """Every commit of ``group``: (topic, partition) -> (offset, leader epoch,
        metadata), asked of its coordinator. Uncommitted partitions are left out."""
        coordinator = self._coordinator(group)
        resp = self._request(coordinator, ApiKey.OFFSET_FETCH, 8, offset_fetch_body(group))
        out: dict[tuple[str, int], tuple[int, int, str]] = {}
        for found in resp.groups:
            if int(found.error_code):
                continue
            for t in found.topics:
                for p in t.partitions:
                    if not int(p.error_code) and p.committed_offset >= 0:
                        key = (str(t.name), int(p.partition_index))
                        out[key] = (int(p.committed_offset), int(p.committed_leader_epoch), p.metadata or "")
        return out

    def _coordinator(self, group: str) -> str:
        resp = self._request(self.bootstrap, ApiKey.FIND_COORDINATOR, 3, find_coordinator_body(group))
        if int(resp.error_code):
            return self.bootstrap
        return f"{resp.host}:{int(resp.port)}"


def _tls_refused(address: str, exc: ssl.SSLError) -> SourceRefusedError | None:
    """The error for a TLS session that cannot succeed with these settings, naming the
    certificate problem; ``None`` for a connection that merely broke (retried)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return SourceRefusedError(
            f"TLS: the certificate of {address} did not verify: {exc.verify_message} "
            "(ssl.ca.location must name the CA that signed it, and it must name the host)"
        )
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)):
        return None
    reason = str(exc.reason or exc)
    hint = _TLS_HINTS.get(reason)
    return SourceRefusedError(f"TLS with {address} refused: {reason}" + (f" ({hint})" if hint else ""))
