"""Options of the ``logtrove`` data source, parsed once into a frozen value.

Names and meanings follow Spark's Kafka source, so a job written against Kafka runs
against logtrove by changing the format and ``kafka.bootstrap.servers`` into ``path`` or
``bootstrap``:

=============================  ==============================================================
``path``                       data directory (direct mode: executors read segment files)
``bootstrap``                  ``host:port`` of a running broker (remote mode: Kafka protocol)
``subscribe``                  comma-separated topics
``subscribePattern``           regular expression over topic names
``assign``                     JSON ``{"topic": [0, 1]}``
``startingOffsets``            ``earliest`` | ``latest`` | JSON ``{"t": {"0": 23, "1": -2}}``
``endingOffsets``              ``latest`` | JSON (``-1`` = latest); batch queries only
``startingTimestamp``          epoch ms for every partition (wins over the two above)
``endingTimestamp``            epoch ms for every partition; exclusive, by offset position
``startingOffsetsByTimestamp`` JSON ``{"t": {"0": 1700000000000}}``
``endingOffsetsByTimestamp``   JSON, as above
``maxOffsetsPerTrigger``       streaming: records per micro-batch, shared by partitions
``minPartitions``              split offset ranges until there are at least this many
``includeHeaders``             add the ``headers`` column
``key`` / ``id`` / ``tag``     only records with this key / message ID / tag (exact)
``contains``                   only records whose value contains this substring
``isolation``                  ``read_committed`` (default): no records of aborted transactions,
                               ``latest`` is the last stable offset (nothing past an open
                               transaction); ``read_uncommitted``: every record (Spark's Kafka
                               source: ``kafka.isolation.level``, also accepted)
=============================  ==============================================================

In offset JSON, ``-2`` means earliest and ``-1`` latest, as in Kafka.

Remote mode reaches a secured broker (the source's planning and tasks, and the writer)
with the settings ``logtrove mirror --source-config`` takes: librdkafka's property names,
each an option (also with Spark's Kafka source prefix ``kafka.``), or all of them in a
properties file named by ``clientConfig`` (read where the query is planned, so the
password is in no job's code):

=============================  ==============================================================
``security.protocol``          ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``
``sasl.mechanism``             ``PLAIN`` (default), ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
``sasl.username``              with ``sasl.password``: needed by the ``SASL_*`` protocols
``sasl.password``
``ssl.ca.location``            PEM file of the CA that signed the broker's certificate
                               (the system's CAs without it); the host name is checked
``ssl.certificate.location``   PEM client certificate (a broker requiring one: mTLS), with
``ssl.key.location``           its key
``clientConfig``               a file of ``name=value`` lines of the settings above
=============================  ==============================================================

The files must be readable at the same path on the executors. They are for remote mode:
with ``path`` they are refused (:func:`parse_security`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logtrove.clock import ascii_int

if TYPE_CHECKING:
    from logtrove.client.security import ClientSecurity

EARLIEST = -2
LATEST = -1

OffsetSpec = str | dict[str, dict[int, int]]
"""``"earliest"``, ``"latest"``, or per topic and partition an offset (or -2 / -1)."""


class OptionError(ValueError):
    """An option of the data source is missing, unknown in value, or malformed."""


@dataclass(frozen=True)
class RecordFilter:
    """Exact-match conditions served by the indexes (key, message ID, tag) and a
    substring search of values. Empty means every record."""

    key: bytes | None = None
    id: str | None = None
    tag: str | None = None
    contains: bytes | None = None

    @property
    def empty(self) -> bool:
        return self.key is None and self.id is None and self.tag is None and self.contains is None


@dataclass(frozen=True)
class ReadOptions:
    """Every read option, validated. Build with :meth:`parse`."""

    path: str | None = None
    bootstrap: str | None = None
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] | None = None
    starting_offsets: OffsetSpec = "earliest"
    ending_offsets: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: Mapping[str, Mapping[int, int]] | None = None
    ending_by_timestamp: Mapping[str, Mapping[int, int]] | None = None
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    include_headers: bool = False
    filter: RecordFilter = field(default_factory=RecordFilter)
    read_committed: bool = True
    security: ClientSecurity | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
        """Validate Spark's options (keys are case-insensitive). Streaming reads start at
        ``latest`` by default, as Spark's Kafka source does; batch reads at ``earliest``."""
        opts = {k.lower(): v for k, v in options.items()}
        path, bootstrap = opts.get("path"), opts.get("bootstrap") or opts.get("kafka.bootstrap.servers")
        if bool(path) == bool(bootstrap):
            raise OptionError(
                "give exactly one of path (a data directory) or bootstrap (host:port of a broker)"
            )
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(chosen) != 1:
            raise OptionError("give exactly one of subscribe, subscribePattern or assign")
        if streaming and "endingoffsets" in opts:
            raise OptionError("endingOffsets is for batch queries only")
        pattern = opts.get("subscribepattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise OptionError(
                    f"subscribePattern {pattern!r} is not a regular expression: {exc}"
                ) from None
        return cls(
            path=path,
            bootstrap=bootstrap,
            subscribe=tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()),
            subscribe_pattern=pattern,
            assign=_parse_assign(opts["assign"]) if opts.get("assign") else None,
            starting_offsets=_parse_offsets(
                "startingOffsets", opts.get("startingoffsets", "latest" if streaming else "earliest")
            ),
            ending_offsets=_parse_offsets("endingOffsets", opts.get("endingoffsets", "latest")),
            starting_timestamp=_opt_int("startingTimestamp", opts.get("startingtimestamp")),
            ending_timestamp=_opt_int("endingTimestamp", opts.get("endingtimestamp")),
            starting_by_timestamp=_parse_times(
                "startingOffsetsByTimestamp", opts.get("startingoffsetsbytimestamp")
            ),
            ending_by_timestamp=_parse_times(
                "endingOffsetsByTimestamp", opts.get("endingoffsetsbytimestamp")
            ),
            max_offsets_per_trigger=_opt_int("maxOffsetsPerTrigger", opts.get("maxoffsetspertrigger"), low=1),
            min_partitions=_opt_int("minPartitions", opts.get("minpartitions"), low=1),
            include_headers=_parse_bool("includeHeaders", opts.get("includeheaders", "false")),
            filter=RecordFilter(
                key=opts["key"].encode() if "key" in opts else None,
                id=opts.get("id"),
                tag=opts.get("tag"),
                contains=opts["contains"].encode() if opts.get("contains") else None,
            ),
            read_committed=_parse_isolation(opts.get("isolation") or opts.get("kafka.isolation.level")),
            security=parse_security(opts),
        )

    def select_topics(self, available: list[str]) -> list[str]:
        """The topics this read covers, among ``available`` (subscribe lists must exist)."""
        if self.subscribe_pattern is not None:
            rx = re.compile(self.subscribe_pattern)
            return sorted(t for t in available if rx.fullmatch(t) and not t.startswith("__"))
        wanted = list(self.assign) if self.assign is not None else list(self.subscribe)
        missing = [t for t in wanted if t not in available]
        if missing:
            raise OptionError(f"unknown topic(s): {', '.join(missing)}")
        return wanted


# The client's settings (logtrove.client.security.KNOWN), spelled out here so that a
# direct-mode read never imports the Kafka client; tests/spark/test_options_and_planning.py
# checks the two agree.
SECURITY_SETTINGS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
)


def parse_security(options: Mapping[str, str]) -> ClientSecurity | None:
    """The TLS / SASL settings of the options (see the module doc); ``None`` when none is
    given (PLAINTEXT). :class:`OptionError` for settings that cannot be, for settings
    with ``path``, and for ``clientConfig`` together with the settings.

    ``logtrove.client`` is imported only when settings are given: a direct-mode read
    never loads the Kafka client (see :func:`logtrove.spark.source.freeze_imported`)."""
    opts = {k.lower(): v for k, v in options.items()}
    settings = {}
    for name in SECURITY_SETTINGS:
        value = opts.get(name) or opts.get(f"kafka.{name}")
        if value:
            settings[name] = value
    config = opts.get("clientconfig")
    if not settings and not config:
        return None
    if opts.get("path"):
        raise OptionError("the security options are for remote mode (bootstrap), not with path")
    if settings and config:
        raise OptionError(f"give clientConfig or the settings ({', '.join(settings)}), not both")
    from logtrove.client.security import ClientConfigError, ClientSecurity

    try:
        return ClientSecurity.load(Path(config)) if config else ClientSecurity.from_settings(settings)
    except ClientConfigError as exc:
        raise OptionError(f"{'clientConfig ' + config if config else 'security options'}: {exc}") from None


def _parse_isolation(raw: str | None) -> bool:
    """Whether the read is read_committed (the default)."""
    value = (raw or "read_committed").strip().lower()
    if value not in ("read_committed", "read_uncommitted"):
        raise OptionError(f"isolation must be read_committed or read_uncommitted, got {raw!r}")
    return value == "read_committed"


def _opt_int(name: str, raw: str | None, *, low: int | None = None) -> int | None:
    if raw is None or raw == "":
        return None
    value = ascii_int(raw.strip(), signed=True)
    if value is None:
        raise OptionError(f"{name} must be an integer, got {raw!r}")
    if low is not None and value < low:
        raise OptionError(f"{name} must be at least {low}, got {value}")
    return value


def _parse_bool(name: str, raw: str) -> bool:
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"{name} must be true or false, got {raw!r}")


def _load_json(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise OptionError(f"{name} is not valid JSON: {exc}") from None


def _per_partition(name: str, raw: str) -> dict[str, dict[int, int]]:
    data = _load_json(name, raw)
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise OptionError(f'{name} must look like {{"topic": {{"0": 23}}}}, got {raw!r}')
    try:
        return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in data.items()}
    except (TypeError, ValueError):
        raise OptionError(f"{name}: partitions and offsets must be integers, got {raw!r}") from None


def _parse_offsets(name: str, raw: str) -> OffsetSpec:
    if raw.strip().lower() in ("earliest", "latest"):
        return raw.strip().lower()
    return _per_partition(name, raw)


def _parse_times(name: str, raw: str | None) -> dict[str, dict[int, int]] | None:
    return None if raw is None else _per_partition(name, raw)


def _parse_assign(raw: str) -> dict[str, tuple[int, ...]]:
    data = _load_json("assign", raw)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise OptionError(f'assign must look like {{"topic": [0, 1]}}, got {raw!r}')
    return {str(t): tuple(int(p) for p in parts) for t, parts in data.items()}
