"""Records through a running broker: Fetch decoded into records (with Kafka consumers'
read_committed filtering), and Produce of record batches, acks=all.

Record batches go out as :func:`~logtrove.records.build_batch` encodes them and come
back as the broker sends them, split by :func:`~logtrove.records.whole_batches` (a torn
last batch is fetched again from its offset). A batch whose records do not decode is
skipped, as the indexer skips it, so a reader never stalls on it; bytes that cannot be
framed at all (a batch length smaller than a header, a magic other than 2) raise
:class:`~logtrove.records.CorruptBatchError`, since no offset past them is known.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from logtrove.client.errors import KafkaProtocolError, check
from logtrove.client.kafka import KafkaClient
from logtrove.groups.tags import TagFetch
from logtrove.records import (
    BatchHeader,
    Compression,
    MarkerType,
    NewRecord,
    Record,
    RecordsError,
    build_batch,
    iter_records,
    marker_type,
    whole_batches,
)
from logtrove.wire import READ_COMMITTED, READ_UNCOMMITTED, ApiKey, fetch_body, produce_body

FETCH_WAIT_MS = 100


@dataclass
class AbortedFilter:
    """Kafka's read_committed consumer over the batches of one Fetch answer, given in
    offset order to :meth:`shows`. ``aborted`` are the answer's aborted transactions as
    (first offset, producer id) pairs (the list is sorted in place).

    A producer's transactional batches are those of an aborted transaction from the
    first offset listed for it until its ABORT marker (a control batch): hidden. Control
    batches are never shown; batches of no producer (id -1) always are."""

    aborted: list[tuple[int, int]]

    def __post_init__(self) -> None:
        self.aborted.sort(reverse=True)  # popped from the end, lowest first offset first
        self._aborting: set[int] = set()  # producers now inside an aborted transaction

    def shows(self, header: BatchHeader, batch: bytes) -> bool:
        """Whether ``batch`` holds records a read_committed consumer sees: not a control
        batch, nor one of an aborted transaction."""
        pid = header.producer_id
        if pid >= 0:
            while self.aborted and self.aborted[-1][0] <= header.last_offset:
                self._aborting.add(self.aborted.pop()[1])
            if header.is_control:
                if marker_type(batch, header) == MarkerType.ABORT:
                    self._aborting.discard(pid)  # its ABORT marker ends the aborted transaction
            elif header.is_transactional and pid in self._aborting:
                return False
        return not header.is_control


def fetch(
    client: KafkaClient,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int = 1 << 20,
    *,
    read_committed: bool = False,
) -> TagFetch:
    """The records of the first batches at ``offset`` or after (none at the end), as a
    fetch of every tag: ``next_offset`` is past the last whole batch in the answer
    (control batches and undecodable ones included, so a reader never stalls on them;
    ``offset`` itself when the answer held no whole batch), ``log_end_offset`` the
    partition's high watermark.

    At the log end the broker holds the answer up to ``FETCH_WAIT_MS`` for new records,
    the long poll of Kafka consumers (with a wait of 0, some brokers, tansu among them,
    answer without the partition at all).

    With ``read_committed`` the Fetch asks for READ_COMMITTED: the broker answers up to the
    last stable offset (then ``log_end_offset``) with the partition's aborted transactions,
    and the records of those are dropped as Kafka's consumer does (:class:`AbortedFilter`).

    Raises :class:`KafkaProtocolError` (code 1, OFFSET_OUT_OF_RANGE) for an offset below
    the log start or past the end, as Kafka does.
    """
    body = fetch_body(
        {topic: [(partition, offset, max_bytes)]},
        max_wait_ms=FETCH_WAIT_MS,
        max_bytes=max_bytes,
        isolation_level=READ_COMMITTED if read_committed else READ_UNCOMMITTED,
    )
    answer = client.request(ApiKey.FETCH, 12, body).responses
    if not answer or not answer[0].partitions:
        raise KafkaProtocolError(f"fetch {topic}-{partition}: the broker's answer left the partition out")
    part = answer[0].partitions[0]
    check(part.error_code, None, f"fetch {topic}-{partition}")
    data = bytes(part.records or b"")
    out: list[Record] = []
    next_offset = offset
    aborted = [(int(a.first_offset), int(a.producer_id)) for a in part.aborted_transactions or ()]
    shown = AbortedFilter(aborted) if read_committed else None
    for header, batch in whole_batches(data).slices(data):  # every batch through the filter, in order
        if shown.shows(header, batch) if shown is not None else not header.is_control:
            with contextlib.suppress(RecordsError):  # an undecodable batch: skipped, as the indexer does
                out += [r for r in iter_records(batch, 0, header) if r.offset >= offset]
        next_offset = max(next_offset, header.next_offset)
    end = int(part.last_stable_offset) if read_committed and part.last_stable_offset >= 0 else None
    return TagFetch(out, next_offset, int(part.high_watermark) if end is None else end)


def produce(
    client: KafkaClient,
    topic: str,
    partition: int,
    records: Sequence[NewRecord],
    *,
    compression: Compression = Compression.NONE,
) -> int:
    """Append ``records`` as one batch (acks=all); returns the base offset."""
    body = produce_body(topic, partition, build_batch(list(records), compression=compression))
    part = client.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    check(part.error_code, part.error_message, f"produce to {topic}-{partition}")
    return int(part.base_offset)


def produce_batches(
    client: KafkaClient,
    topic: str,
    batches: Mapping[int, Sequence[Sequence[NewRecord]]],
    compression: Compression = Compression.NONE,
) -> list[dict[str, int]]:
    """Send every batch (acks=all, one request each, in order per partition); per
    partition, how many records and batches went and their first and last offsets."""
    summary = []
    for p in sorted(batches):
        first = last = -1
        for chunk in batches[p]:
            base = produce(client, topic, p, chunk, compression=compression)
            first = base if first < 0 else first
            last = base + len(chunk) - 1
        summary.append(
            {
                "partition": p,
                "records": sum(len(c) for c in batches[p]),
                "batches": len(batches[p]),
                "first_offset": first,
                "last_offset": last,
            }
        )
    return summary
