"""Remote mode: plan and read over the Kafka protocol from a running broker.

For clusters whose executors do not share the broker's disk. Planning asks the broker
for topics, watermarks and offsets by time (:class:`RemoteCatalog`). A full scan's task
fetches raw batches of its offset range and decodes them into Arrow as direct mode does
(:mod:`logtrove.spark.rawfetch`); with a filter option a task reads its range with a
plain Kafka consumer (confluent-kafka, no group, no commits) and applies the same
filters as direct mode to the records. Both stop at the range end.

Read committed (the default): the fetches are read_committed (the broker stops them at
the last stable offset; aborted transactions are dropped by librdkafka or, for raw
batches, as Kafka's consumer drops them), and the
planner's ``latest`` is the last stable offset (ListOffsets READ_COMMITTED), so a task
never waits for offsets an open transaction holds back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from logtrove.records import Record
from logtrove.spark.columns import BATCH_ROWS, ColumnBuffer
from logtrove.spark.options import RecordFilter
from logtrove.spark.ranges import OffsetRange
from logtrove.spark.rawfetch import read_range_raw

TIMEOUT_S = 30.0
POLL_S = 0.1
_DEFAULT_ID_HEADER = "id"
_DEFAULT_TAG_HEADER = "tag"


def _consumer(bootstrap: str, read_committed: bool = True) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"logtrove-spark-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
    )


class RemoteCatalog:
    """A :class:`~logtrove.spark.ranges.Catalog` backed by a broker's metadata."""

    def __init__(self, bootstrap: str, *, read_committed: bool = True) -> None:
        self.bootstrap = bootstrap
        self.read_committed = read_committed
        self._consumer = _consumer(bootstrap, read_committed)
        self._metadata = self._consumer.list_topics(timeout=TIMEOUT_S)

    def topic_names(self) -> list[str]:
        return sorted(str(t) for t in self._metadata.topics)

    def partition_count(self, topic: str) -> int:
        return len(self._metadata.topics[topic].partitions)

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
        if self.read_committed:
            return int(low), self._last_stable_offset(topic, partition)
        return int(low), int(high)

    def _last_stable_offset(self, topic: str, partition: int) -> int:
        """ListOffsets latest at READ_COMMITTED: the last stable offset."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.admin._listoffsets import OffsetSpec

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        tp = TopicPartition(topic, partition)
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = admin.list_offsets({tp: latest}, isolation_level=IsolationLevel.READ_COMMITTED)
        return int(futures[tp].result(timeout=TIMEOUT_S).offset)

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        from confluent_kafka import TopicPartition

        [found] = self._consumer.offsets_for_times(
            [TopicPartition(topic, partition, timestamp)], timeout=TIMEOUT_S
        )
        return None if found.offset < 0 else int(found.offset)

    def split_points(self, topic: str, partition: int) -> list[int]:
        return []

    def header_names(self, topic: str) -> tuple[str, str]:
        """From DescribeConfigs; the defaults if the broker does not answer it."""
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.admin._config import ConfigResource

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            entries = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
        except Exception:  # an older broker without DescribeConfigs: the documented defaults
            return _DEFAULT_ID_HEADER, _DEFAULT_TAG_HEADER
        id_entry, tag_entry = entries.get("message.id.header"), entries.get("message.tag.header")
        return (
            id_entry.value if id_entry is not None else _DEFAULT_ID_HEADER,
            tag_entry.value if tag_entry is not None else _DEFAULT_TAG_HEADER,
        )

    def close(self) -> None:
        self._consumer.close()


def _as_record(msg: Any) -> Record:
    _, ts = msg.timestamp()
    headers = tuple((str(k), v) for k, v in (msg.headers() or ()))
    return Record(int(msg.offset()), int(ts), msg.key(), msg.value(), headers)


def _matches(record: Record, flt: RecordFilter, id_header: str, tag_header: str) -> bool:
    if flt.key is not None and record.key != flt.key:
        return False
    if flt.id is not None and record.header(id_header) != flt.id.encode():
        return False
    if flt.tag is not None and record.header(tag_header) != flt.tag.encode():
        return False
    return flt.contains is None or (record.value is not None and flt.contains in record.value)


def fetch_range(
    bootstrap: str, rng: OffsetRange, *, read_committed: bool = True
) -> Iterator[tuple[Record, bool]]:
    """(record, is LogAppendTime) for each record of ``rng`` (with ``read_committed``,
    each committed one), in offset order."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, KafkaException, TopicPartition

    consumer = _consumer(bootstrap, read_committed)
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
        position = rng.start
        idle_since = time.monotonic()
        while position < rng.end:
            # consume() waits for its whole timeout unless num_messages arrive: poll in short steps
            messages = consumer.consume(num_messages=5000, timeout=POLL_S)
            if not messages:
                if time.monotonic() - idle_since > TIMEOUT_S:
                    raise TimeoutError(
                        f"no data from {bootstrap} for {rng} after {TIMEOUT_S:.0f} s at offset {position}"
                    )
                continue
            idle_since = time.monotonic()
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if int(msg.offset()) >= rng.end:
                            return
                        continue
                    raise KafkaException(err)
                offset = int(msg.offset())
                if offset >= rng.end:
                    return
                position = offset + 1
                yield _as_record(msg), msg.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    finally:
        consumer.close()


def read_range(
    bootstrap: str,
    rng: OffsetRange,
    flt: RecordFilter,
    include_headers: bool,
    id_header: str = _DEFAULT_ID_HEADER,
    tag_header: str = _DEFAULT_TAG_HEADER,
    *,
    read_committed: bool = True,
) -> Iterator[Any]:
    """Arrow record batches of the rows of ``rng`` fetched from the broker: raw batches
    decoded by the columnar decoder for a full scan (:mod:`logtrove.spark.rawfetch`),
    a consumer's records tested one by one with a filter option."""
    if flt.empty:
        yield from read_range_raw(
            bootstrap, rng, include_headers, id_header, tag_header, read_committed=read_committed
        )
        return
    buf = ColumnBuffer(rng.topic, rng.partition, id_header, tag_header, include_headers)
    for record, append_time in fetch_range(bootstrap, rng, read_committed=read_committed):
        if flt.empty or _matches(record, flt, id_header, tag_header):
            buf.add(record, append_time)
            if len(buf) >= BATCH_ROWS:
                yield buf.take_batch()
    if len(buf):
        yield buf.take_batch()
