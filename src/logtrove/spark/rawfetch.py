"""Remote mode's full scans: raw record batches over the Kafka protocol, decoded by the
columnar decoder as in direct mode (no Python object per record, no client library).

An executor task opens one connection to the broker (the project's own client,
:class:`~logtrove.client.KafkaClient`, under TLS / SASL as the options say:
:mod:`logtrove.spark.connect`) and sends consumer Fetches (v12, replica id
-1, no fetch session) from its range's start until the range's end::

    Fetch(offset = position) ─► records: batch │ batch │ … │ part of a batch (cut by the
                                broker at the size asked for; fetched again next time)
    position = the next offset of the last whole batch

A response holding no whole batch while the first one is bigger than the size asked for
doubles the size, up to :data:`MAX_PARTITION_BYTES`. Every byte of the answer is
checked: its framing by :func:`~logtrove.records.whole_batches` (a length or magic that
cannot be: :class:`~logtrove.records.CorruptBatchError`, the task fails), records by
the decoder (:class:`~logtrove.records.CorruptRecordError`); decompression is bounded.

Read committed: the Fetch asks for READ_COMMITTED (the broker stops at the last stable
offset and lists the aborted transactions of what it returns) and batches of aborted
transactions are dropped as Kafka's consumer drops them
(:class:`~logtrove.client.AbortedFilter`). Control batches are never rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from logtrove.client import AbortedFilter, ClientSecurity, KafkaProtocolError, check
from logtrove.records import BatchHeader, whole_batches
from logtrove.records.columnar import new_decoder
from logtrove.spark.columns import BATCH_BYTES, BATCH_ROWS, add_batch, arrow_batch
from logtrove.spark.connect import open_client
from logtrove.spark.ranges import OffsetRange
from logtrove.wire import ApiKey, fetch_body

FETCH_VERSION = 12
OFFSET_OUT_OF_RANGE = 1
PARTITION_BYTES = 8 << 20
MAX_PARTITION_BYTES = 128 << 20  # a batch larger than this is refused (the broker's default max is 1 MiB)
MAX_WAIT_MS = 500
TIMEOUT_S = 30.0


def _partition(resp: Any, rng: OffsetRange) -> Any:
    check(resp.error_code, None, f"fetch of {rng.topic}")
    for t in resp.responses:
        for p in t.partitions:
            if str(t.topic) == rng.topic and int(p.partition_index) == rng.partition:
                return p
    raise KafkaProtocolError(f"the broker's fetch answer leaves out {rng.topic}-{rng.partition}")


def fetch_batches(
    bootstrap: str,
    rng: OffsetRange,
    *,
    read_committed: bool = True,
    partition_bytes: int = PARTITION_BYTES,
    security: ClientSecurity | None = None,
) -> Iterator[tuple[BatchHeader, bytes]]:
    """The batches holding rows of ``rng`` (with ``read_committed``, committed ones), in
    offset order; the first and last may hold offsets outside it. ``partition_bytes`` is
    the size each Fetch asks for first; ``security`` how to reach the broker."""
    position, want = rng.start, partition_bytes
    with open_client(bootstrap, security, client_id="logtrove-spark", timeout_s=TIMEOUT_S) as client:
        idle_since = time.monotonic()
        while position < rng.end:
            body = fetch_body(
                {rng.topic: [(rng.partition, position, want)]},
                max_wait_ms=MAX_WAIT_MS,
                max_bytes=want,
                isolation_level=1 if read_committed else 0,
            )
            part = _partition(client.request(ApiKey.FETCH, FETCH_VERSION, body), rng)
            if int(part.error_code) == OFFSET_OUT_OF_RANGE and 0 <= position < int(part.log_start_offset):
                position = int(part.log_start_offset)  # retention passed the start: on from the earliest
                continue
            check(part.error_code, None, f"fetch of {rng}")
            records = bytes(part.records or b"")
            batches = whole_batches(records).slices(records)
            if not batches:
                if records and want < MAX_PARTITION_BYTES:
                    want = min(want * 2, MAX_PARTITION_BYTES)
                    continue
                if records:
                    raise KafkaProtocolError(f"a batch of {rng} at offset {position} is over {want} bytes")
                end = int(part.last_stable_offset if read_committed else part.high_watermark)
                if 0 <= end <= position:
                    return  # the range's end was planned past the last record (a compacted tail)
                if time.monotonic() - idle_since > TIMEOUT_S:
                    raise TimeoutError(
                        f"no data from {bootstrap} for {rng} after {TIMEOUT_S:.0f} s at {position}"
                    )
                continue
            idle_since = time.monotonic()
            aborted = [(int(a.first_offset), int(a.producer_id)) for a in part.aborted_transactions or ()]
            shown = AbortedFilter(aborted) if read_committed else None
            for header, batch in batches:  # every batch goes through the filter, in order
                visible = shown.shows(header, batch) if shown is not None else not header.is_control
                if visible and header.next_offset > position and header.base_offset < rng.end:
                    yield header, batch
            position = max(position, batches[-1][0].next_offset)


def read_range_raw(
    bootstrap: str,
    rng: OffsetRange,
    include_headers: bool,
    id_header: str,
    tag_header: str,
    *,
    read_committed: bool = True,
    needles: tuple[bytes, ...] = (),
    security: ClientSecurity | None = None,
) -> Iterator[Any]:
    """Arrow record batches of every row of ``rng``, as :func:`logtrove.spark.direct.read_range`
    makes them from the segment files; with ``needles``, only of the batches whose
    records hold every one (:func:`~logtrove.spark.columns.add_batch`)."""
    decoder = new_decoder(id_header.encode(), tag_header.encode(), include_headers)
    for header, batch in fetch_batches(bootstrap, rng, read_committed=read_committed, security=security):
        add_batch(decoder, batch, header, rng.start, rng.end, needles=needles)
        if decoder.rows >= BATCH_ROWS or decoder.nbytes >= BATCH_BYTES:
            yield arrow_batch(decoder.take(), rng.topic, rng.partition)
    if decoder.rows:
        yield arrow_batch(decoder.take(), rng.topic, rng.partition)
