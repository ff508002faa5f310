"""Remote mode: plan and read over the Kafka protocol from a running broker.

For clusters whose executors do not share the broker's disk. Planning asks the broker
for topics, watermarks and offsets by time (:class:`RemoteCatalog`). A task fetches raw
batches of its offset range and decodes them into Arrow as direct mode does
(:mod:`logtrove.spark.rawfetch`), stopping at the range end. With a filter option the
batches that lack the filter's bytes are not decoded and the decoded rows are tested on
their columns (:mod:`logtrove.spark.filtering`, the meaning direct mode gives the
options); the rare filter the columns cannot answer exactly (a U+FFFD in ``id`` /
``tag``) is tested record by record.

Read committed (the default): the fetches are read_committed (the broker stops them at
the last stable offset; batches of aborted transactions are dropped as Kafka's consumer
drops them), and the planner's ``latest`` is the last stable offset (ListOffsets
READ_COMMITTED), so a task never waits for offsets an open transaction holds back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from logtrove.client import ClientSecurity
from logtrove.records import iter_records
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.spark.columns import BATCH_ROWS, ColumnBuffer
from logtrove.spark.connect import librdkafka_config, open_client
from logtrove.spark.filtering import columnar_exact, keep_rows, needles, record_matches
from logtrove.spark.options import RecordFilter
from logtrove.spark.ranges import OffsetRange
from logtrove.spark.rawfetch import fetch_batches, read_range_raw

TIMEOUT_S = 30.0
_DEFAULT_ID_HEADER = "id"
_DEFAULT_TAG_HEADER = "tag"


def _consumer(bootstrap: str, read_committed: bool, security: ClientSecurity | None) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            **librdkafka_config(bootstrap, security),
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
    """A :class:`~logtrove.spark.ranges.Catalog` backed by a broker's metadata, reached
    with ``security``; :class:`~logtrove.spark.connect.BrokerAccessError` at once when the
    broker cannot be used with it."""

    def __init__(
        self, bootstrap: str, *, read_committed: bool = True, security: ClientSecurity | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.read_committed = read_committed
        self.security = security
        open_client(bootstrap, security, client_id="logtrove-spark", timeout_s=TIMEOUT_S).close()
        self._consumer = _consumer(bootstrap, read_committed, security)
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

        admin = AdminClient(librdkafka_config(self.bootstrap, self.security))
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

        admin = AdminClient(librdkafka_config(self.bootstrap, self.security))
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


def read_range(
    bootstrap: str,
    rng: OffsetRange,
    flt: RecordFilter,
    include_headers: bool,
    id_header: str = _DEFAULT_ID_HEADER,
    tag_header: str = _DEFAULT_TAG_HEADER,
    *,
    read_committed: bool = True,
    security: ClientSecurity | None = None,
) -> Iterator[Any]:
    """Arrow record batches of the rows of ``rng`` that pass ``flt``, from raw batches
    fetched from the broker (reached with ``security``) (:mod:`logtrove.spark.rawfetch`) and decoded by the columnar
    decoder; a filter is applied to the decoded columns
    (:func:`~logtrove.spark.filtering.keep_rows`), after skipping the batches that lack
    its bytes, unless the columns cannot answer it exactly (then record by record)."""
    if not columnar_exact(flt):
        yield from _read_by_record(
            bootstrap, rng, flt, include_headers, id_header, tag_header, read_committed, security
        )
        return
    batches = read_range_raw(
        bootstrap,
        rng,
        include_headers,
        id_header,
        tag_header,
        read_committed=read_committed,
        needles=needles(flt),
        security=security,
    )
    if flt.empty:
        yield from batches
        return
    for batch in batches:
        kept = keep_rows(batch, flt)
        if kept.num_rows:
            yield kept


def _read_by_record(
    bootstrap: str,
    rng: OffsetRange,
    flt: RecordFilter,
    include_headers: bool,
    id_header: str,
    tag_header: str,
    read_committed: bool,
    security: ClientSecurity | None,
) -> Iterator[Any]:
    """:func:`read_range` for a filter the columns cannot answer exactly: each record of
    the fetched batches decoded and tested on its bytes."""
    buf = ColumnBuffer(rng.topic, rng.partition, id_header, tag_header, include_headers)
    for header, batch in fetch_batches(bootstrap, rng, read_committed=read_committed, security=security):
        append_time = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
        for record in iter_records(batch, 0, header):
            if rng.start <= record.offset < rng.end and record_matches(record, flt, id_header, tag_header):
                buf.add(record, append_time)
                if len(buf) >= BATCH_ROWS:
                    yield buf.take_batch()
    if len(buf):
        yield buf.take_batch()
