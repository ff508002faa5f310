"""Writing rows to topics: ``df.write.format("logtrove")`` and its streaming form.

Input columns follow Spark's Kafka sink: ``value`` (required, string or binary), and
optionally ``key``, ``topic`` (else the ``topic`` option), ``partition`` (else
murmur2 of the key as Kafka's default partitioner, round robin when keyless),
``headers`` (array of ``{key, value}``) and ``timestamp``.

Both modes encode the Arrow columns straight into record batches
(:mod:`logtrove.spark.encoding`, :mod:`logtrove.records.encoder`: no Python object per
row), up to ``FLUSH_BYTES`` of Arrow data at a time, each partition's rows in batches of
about ``BATCH_BYTES``; the log compresses them as its topic's ``compression.type`` says.
Remote mode (``bootstrap``) produces those batches through the broker (Produce v9,
acks=all, one connection per task), under TLS / SASL with the source's options
(``security.protocol``, ``sasl.*``, ``ssl.*``, ``clientConfig``:
:mod:`logtrove.spark.options`, :mod:`logtrove.spark.connect`). Direct mode (``path``) appends them to the segment
files itself and therefore needs the data directory's writer lock: it refuses when a
broker holds it (produce through the broker instead), and tasks of the same job take
turns on the lock. :func:`write_direct` is the row-wise writer of
:class:`~logtrove.records.NewRecord` rows (:func:`rows_from_arrow`), kept as the reference
the columnar path is tested against.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

from logtrove.client import ClientSecurity, KafkaClient, check
from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.records import NewRecord, build_batch
from logtrove.records.builder import frame_records
from logtrove.records.encoder import encode_records, partition_order
from logtrove.records.partitioner import partition_for_key
from logtrove.spark.connect import open_client
from logtrove.spark.encoding import ColumnTypeError, TopicRows, topic_rows
from logtrove.spark.options import OptionError, parse_security
from logtrove.storage import DataDirLockedError, Storage
from logtrove.storage.datadir import read_holder
from logtrove.wire import ApiKey, produce_body

WRITER_HOLDER = "logtrove-spark-writer"
LOCK_WAIT_S = 120.0
BATCH_BYTES = 256 * 1024
REMOTE_TIMEOUT_S = 30.0
FLUSH_BYTES = 64 << 20  # Arrow data combined and encoded at a time

Row = tuple[str, int | None, NewRecord]


@dataclass(frozen=True)
class WriteOptions:
    path: str | None
    bootstrap: str | None
    topic: str | None
    security: ClientSecurity | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        opts = {k.lower(): v for k, v in options.items()}
        path, bootstrap = opts.get("path"), opts.get("bootstrap") or opts.get("kafka.bootstrap.servers")
        if bool(path) == bool(bootstrap):
            raise OptionError(
                "give exactly one of path (a data directory) or bootstrap (host:port of a broker)"
            )
        return cls(path, bootstrap, opts.get("topic"), parse_security(opts))


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def rows_from_arrow(batch: Any, default_topic: str | None) -> list[Row]:
    """(topic, partition or None, record) for each row of an Arrow batch."""
    cols = batch.to_pydict()
    if "value" not in cols:
        raise OptionError("the DataFrame needs a value column")
    n = batch.num_rows
    topics = cols.get("topic", [default_topic] * n)
    out: list[Row] = []
    for i in range(n):
        topic = topics[i] or default_topic
        if not topic:
            raise OptionError("row without a topic: add a topic column or the topic option")
        ts = cols["timestamp"][i] if "timestamp" in cols else None
        headers = (
            tuple((h["key"], _as_bytes(h["value"])) for h in (cols["headers"][i] or ()))
            if "headers" in cols
            else ()
        )
        record = NewRecord(
            value=_as_bytes(cols["value"][i]),
            key=_as_bytes(cols["key"][i]) if "key" in cols else None,
            headers=headers,
            timestamp=int(ts.timestamp() * 1000) if ts is not None else None,
        )
        out.append((topic, cols["partition"][i] if "partition" in cols else None, record))
    return out


def _grouped(rows: list[Row], partitions: Mapping[str, int]) -> dict[tuple[str, int], list[NewRecord]]:
    round_robin = count()
    groups: dict[tuple[str, int], list[NewRecord]] = defaultdict(list)
    for topic, explicit, record in rows:
        total = partitions[topic]
        if explicit is not None:
            partition = explicit
        elif record.key is not None:
            partition = partition_for_key(record.key, total)
        else:
            partition = next(round_robin) % total
        if not 0 <= partition < total:
            raise OptionError(f"topic {topic} has partitions 0-{total - 1}, not {partition}")
        groups[(topic, partition)].append(record)
    return groups


def _chunks(records: list[NewRecord]) -> Iterable[list[NewRecord]]:
    chunk: list[NewRecord] = []
    size = 0
    for record in records:
        chunk.append(record)
        size += len(record.value or b"") + len(record.key or b"") + 32
        if size >= BATCH_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _open_writer(path: str) -> Storage:
    """The writer opening; waits while another task of a Spark job holds the lock.

    A lock whose holder info cannot be read yet counts as another task's: the
    holder writes its info just after taking the lock, so a task that looks in
    between sees an empty file. It waits for that too, up to ``LOCK_WAIT_S``.
    """
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return Storage.open(path, holder=WRITER_HOLDER)
        except DataDirLockedError as exc:
            info = read_holder(Path(path))
            # No holder info yet: another task has just taken the lock and is writing it.
            holder = WRITER_HOLDER if info is None else info.get("command")
            if holder != WRITER_HOLDER:
                raise DataDirLockedError(
                    f"{exc} The Spark writer appends directly only when no broker runs: "
                    "use the bootstrap option to produce through the broker."
                ) from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def write_direct(path: str, rows: list[Row]) -> int:
    """Append ``rows`` to the data directory; returns the number of records."""
    storage = _open_writer(path)
    try:
        partitions = {t: storage.topic(t).partitions for t in {r[0] for r in rows}}
        for (topic, p), records in _grouped(rows, partitions).items():
            log = storage.log(topic, p)
            for chunk in _chunks(records):
                log.append(build_batch(chunk))
        storage.flush_all()
    finally:
        storage.close()
    return len(rows)


class _DirectSink:
    """Appends to the data directory, taking the writer lock at the first append and
    keeping it to :meth:`close` (as :func:`write_direct` does)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.storage: Storage | None = None

    def _open(self) -> Storage:
        if self.storage is None:
            self.storage = _open_writer(self.path)
        return self.storage

    def partitions(self, topic: str) -> int:
        return self._open().topic(topic).partitions

    def append(self, topic: str, partition: int, batch: bytes) -> None:
        self._open().log(topic, partition).append(batch)

    def close(self) -> None:
        if self.storage is not None:
            try:
                self.storage.flush_all()
            finally:
                self.storage.close()
                self.storage = None


class _RemoteSink:
    """Produces each record batch to the broker as it is (acks=all, one request each, in
    order per partition) over one connection. A topic the broker does not know is
    created if the broker allows it, as a Kafka producer's Metadata request does."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.client: KafkaClient | None = None

    def _open(self) -> KafkaClient:
        if self.client is None:
            self.client = open_client(
                self.bootstrap, self.security, client_id="logtrove-spark-writer", timeout_s=REMOTE_TIMEOUT_S
            )
        return self.client

    def partitions(self, topic: str) -> int:
        deadline = time.monotonic() + REMOTE_TIMEOUT_S
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": True}
        while True:
            found = self._open().request(ApiKey.METADATA, 12, body).topics[0]
            if not int(found.error_code) and found.partitions:
                return len(found.partitions)
            if time.monotonic() > deadline:
                check(found.error_code, None, f"metadata of {topic}")
                raise OptionError(f"topic {topic} has no partitions")
            time.sleep(0.1)  # just created: the broker answers LEADER_NOT_AVAILABLE once

    def append(self, topic: str, partition: int, batch: bytes) -> None:
        part = self._open().request(ApiKey.PRODUCE, 9, produce_body(topic, partition, batch))
        answer = part.responses[0].partition_responses[0]
        check(answer.error_code, answer.error_message, f"produce to {topic}-{partition}")

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class _ArrowAppender:
    """The columnar path: Arrow batches encoded into record batches and handed to a sink
    (:class:`_DirectSink` or :class:`_RemoteSink`), opened at the first row."""

    def __init__(
        self, sink: _DirectSink | _RemoteSink, default_topic: str | None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.sink = sink
        self.default_topic = default_topic
        self.clock = clock
        self.partitions: dict[str, int] = {}
        self.round_robin = 0
        self.rows = 0

    def add(self, batch: Any) -> None:
        """Encode and append every row of ``batch`` (a pyarrow RecordBatch)."""
        if "value" not in batch.schema.names:
            raise OptionError("the DataFrame needs a value column")
        if batch.num_rows == 0:
            return
        try:
            groups = list(topic_rows(batch, self.default_topic))
        except LookupError:
            raise OptionError("row without a topic: add a topic column or the topic option") from None
        except ColumnTypeError as exc:
            raise OptionError(str(exc)) from None
        for group in groups:
            self._append(group)
        self.rows += batch.num_rows

    def _append(self, group: TopicRows) -> None:
        total = self.partitions.get(group.topic)
        if total is None:
            total = self.partitions[group.topic] = self.sink.partitions(group.topic)
        try:
            order, starts, self.round_robin = partition_order(
                group.key, group.partition, group.rows, total, self.round_robin
            )
        except ValueError as exc:
            raise OptionError(f"topic {group.topic} {exc}") from None
        bounds = memoryview(starts).cast("q")
        now = self.clock.now_ms()
        for p in range(total):
            lo, hi = bounds[p], bounds[p + 1]
            while lo < hi:
                payload, end, base_ts, max_ts = encode_records(
                    group.key, group.value, group.timestamp, group.headers, group.rows, order,
                    lo, hi, BATCH_BYTES, now,
                )  # fmt: skip
                self.sink.append(group.topic, p, frame_records(payload, end - lo, base_ts, max_ts))
                lo = end


def write_arrow(sink: _DirectSink | _RemoteSink, batches: Iterable[Any], default_topic: str | None) -> int:
    """Append every row of the Arrow ``batches`` to ``sink`` through the columnar encoder;
    returns the number of rows. Batches are combined up to ``FLUSH_BYTES`` of Arrow data
    so that a partition's record batches are not cut at Spark's Arrow batch boundaries."""
    import pyarrow as pa

    appender = _ArrowAppender(sink, default_topic)
    pending: list[Any] = []
    size = 0

    def flush() -> None:
        nonlocal size
        if pending:
            for combined in pa.Table.from_batches(pending).combine_chunks().to_batches():
                appender.add(combined)
        pending.clear()
        size = 0

    try:
        for batch in batches:
            if pending and batch.schema != pending[0].schema:
                flush()
            pending.append(batch)
            size += batch.nbytes
            if size >= FLUSH_BYTES:
                flush()
        flush()
    finally:
        sink.close()
    return appender.rows


def write_arrow_direct(path: str, batches: Iterable[Any], default_topic: str | None) -> int:
    """Append every row of the Arrow ``batches`` to the data directory (direct mode)."""
    return write_arrow(_DirectSink(path), batches, default_topic)


def write_arrow_remote(
    bootstrap: str, batches: Iterable[Any], default_topic: str | None, security: ClientSecurity | None = None
) -> int:
    """Produce every row of the Arrow ``batches`` through the broker (remote mode),
    reached with ``security``."""
    return write_arrow(_RemoteSink(bootstrap, security), batches, default_topic)


def write_rows(options: WriteOptions, batches: Iterable[Any]) -> int:
    """Write every row of the Arrow batches (one Spark task)."""
    if options.path is not None:
        return write_arrow_direct(options.path, batches, options.topic)
    assert options.bootstrap is not None
    return write_arrow_remote(options.bootstrap, batches, options.topic, options.security)
