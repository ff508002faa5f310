"""Records through a running broker: Fetch decoded into records (with Kafka consumers'
read_committed filtering), and Produce of record batches, acks=all.

Record batches go out as :func:`~logtrove.records.build_batch` encodes them and come
back as the broker sends them; a batch that does not decode is skipped, as the indexer
skips it, so a reader never stalls on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from logtrove.client.errors import KafkaProtocolError, check
from logtrove.client.kafka import KafkaClient
from logtrove.groups.tags import TagFetch
from logtrove.records import (
    Compression,
    NewRecord,
    Record,
    RecordsError,
    build_batch,
    iter_records,
    read_header,
)
from logtrove.records.batch import HEADER_SIZE
from logtrove.storage.txnview import marker_kind
from logtrove.wire import READ_COMMITTED, READ_UNCOMMITTED, ApiKey, fetch_body, produce_body

FETCH_WAIT_MS = 100


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
    and the records of those are dropped as Kafka's consumer does: a producer's batches are
    aborted from its aborted transaction's first offset until its ABORT marker.

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
    pos, next_offset = 0, offset
    aborted = sorted((a.first_offset, a.producer_id) for a in (part.aborted_transactions or ()))
    aborting: set[int] = set()  # producers whose batches are now those of an aborted transaction
    while pos + HEADER_SIZE <= len(data):
        header = read_header(data, pos)
        if pos + header.size > len(data):
            break
        while aborted and aborted[0][0] <= header.last_offset:
            aborting.add(aborted.pop(0)[1])
        hidden = read_committed and header.is_transactional and header.producer_id in aborting
        if header.is_control and hidden and marker_kind(data[pos : pos + header.size], header) == 0:
            aborting.discard(header.producer_id)  # its ABORT marker ends the aborted transaction
        if not header.is_control and not hidden:
            with contextlib.suppress(RecordsError):  # an undecodable batch: skipped, as the indexer does
                out += [r for r in iter_records(data, pos, header) if r.offset >= offset]
        next_offset = max(next_offset, header.last_offset + 1)
        pos += header.size
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
