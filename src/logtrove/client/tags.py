"""Tag-filtered consumption through a running broker (``--bootstrap``, ``--http``),
from any machine.

Matching records come from the broker's HTTP API (:mod:`.http`), which filters next to
the data; every record (``*``) comes over Kafka Fetch, and start positions (ListOffsets)
and commits (OffsetCommit) go over the Kafka protocol.

From Python::

    from logtrove.client import BrokerCommitter, HttpApi, KafkaClient, RemoteTagSource, cluster_id
    from logtrove.groups.consumer import TagConsumer

    with KafkaClient("127.0.0.1:9092") as client:
        api = HttpApi("http://127.0.0.1:8080", cluster_id=cluster_id(client))
        consumer = TagConsumer(RemoteTagSource(client, api), "orders", "TagA || TagB",
                               group="billing", committer=BrokerCommitter(client))
        for c in consumer: ...
        consumer.commit()
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from logtrove.client.admin import list_offsets, require_partitions
from logtrove.client.errors import KafkaProtocolError
from logtrove.client.http import MAX_RECORDS_PER_FETCH, HttpApi, record_of
from logtrove.client.kafka import KafkaClient
from logtrove.client.records import fetch
from logtrove.groups.consumer import StartAt
from logtrove.groups.tags import TagFetch, TagFilter
from logtrove.wire import EARLIEST, LATEST


class RemoteTagSource:
    """:class:`~logtrove.groups.consumer.TagSource` of a running broker: records from its
    HTTP API (filtered there) or, for ``*``, from Kafka Fetch; start offsets from Kafka
    ListOffsets through ``client``.
    A fetch returns at most ``max_bytes`` of keys, values and headers (and at least one
    record). With ``read_committed`` (the default) both ask for committed data only (the
    HTTP ``isolation`` parameter, Kafka's READ_COMMITTED Fetch)."""

    def __init__(
        self, client: KafkaClient, api: HttpApi, *, max_bytes: int = 1 << 20, read_committed: bool = True
    ) -> None:
        self.client = client
        self.api = api
        self.max_bytes = max_bytes
        self.read_committed = read_committed

    def partition_count(self, topic: str) -> int:
        return require_partitions(self.client, topic)

    def start_offset(self, topic: str, partition: int, start: StartAt) -> int:
        def offsets(timestamp: int) -> int:
            found = list_offsets(
                self.client, topic, [partition], timestamp, read_committed=self.read_committed
            )
            return found[partition]

        def by_time(timestamp: int) -> int | None:
            found = offsets(timestamp)
            return found if found >= 0 else None

        return start.pick(offsets(EARLIEST), offsets(LATEST), by_time)

    def fetch(self, topic: str, partition: int, tags: TagFilter, offset: int, max_records: int) -> TagFetch:
        if tags.match_all:
            return self._fetch_all(topic, partition, offset, max_records)
        params: dict[str, str | int] = {
            "tags": str(tags),
            "offset": offset,
            "max_records": min(max_records, MAX_RECORDS_PER_FETCH),
            "max_bytes": self.max_bytes,
            "isolation": "read_committed" if self.read_committed else "read_uncommitted",
        }
        body = self.api.get(self.api.partition_path(topic, partition, "fetch"), params)
        records = [record_of(m) for m in body["messages"]]
        return TagFetch(records, int(body["next_offset"]), int(body["log_end_offset"]))

    def _fetch_all(self, topic: str, partition: int, offset: int, max_records: int) -> TagFetch:
        """Every record (``*``) needs no tag index: a Kafka Fetch, so it works without the
        HTTP API and against any Kafka broker. A position below the log start (retention
        deleted it) moves to the log start, as the HTTP endpoint does."""
        try:
            got = fetch(
                self.client, topic, partition, offset, self.max_bytes, read_committed=self.read_committed
            )
        except KafkaProtocolError as exc:
            start = list_offsets(self.client, topic, [partition], EARLIEST)
            if exc.code != ErrorCode.offset_out_of_range or offset >= start[partition]:
                raise
            offset = start[partition]
            got = fetch(
                self.client, topic, partition, offset, self.max_bytes, read_committed=self.read_committed
            )
        records = got.records[:max_records]
        next_offset = records[-1].offset + 1 if len(got.records) > max_records else got.next_offset
        return TagFetch(records, next_offset, got.log_end_offset)

    def refresh(self) -> None:
        """Nothing to do: every fetch asks the broker."""
