"""The read_committed filter over a Fetch answer's batches
(:class:`logtrove.client.AbortedFilter`, used by the client's Fetch and Spark's remote
reader): against a model of interleaved transactions, whose aborted ones are known."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from logtrove.client import AbortedFilter
from logtrove.records import NewRecord, build_batch, whole_batches
from logtrove.txn import marker_batch

PRODUCERS = (1, 2, 3)


def _at(batch: bytes, offset: int) -> bytes:
    buf = bytearray(batch)
    buf[0:8] = offset.to_bytes(8, "big")
    return bytes(buf)


@st.composite
def transactions(draw: st.DrawFn) -> tuple[list[bytes], list[tuple[int, int]], list[int]]:
    """A log of interleaved transactions of a few producers, plain batches among them, every
    transaction ended by its marker; its aborted transactions as a Fetch lists them, and
    the base offsets of the batches a read_committed consumer sees."""
    log: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    shown: list[int] = []
    open_at: dict[int, int] = {}  # producer → its open transaction's first offset
    members: dict[int, list[int]] = {}  # producer → the base offsets of its open transaction
    offset = 0

    def end(pid: int, commit: bool) -> None:
        nonlocal offset
        log.append(_at(marker_batch(pid, 0, commit, coordinator_epoch=0, now_ms=0), offset))
        offset += 1
        first = open_at.pop(pid)
        if commit:
            shown.extend(members.pop(pid))
        else:
            members.pop(pid)
            aborted.append((first, pid))

    for pid, action in draw(st.lists(st.tuples(st.sampled_from((-1, *PRODUCERS)), st.integers(0, 3)))):
        if pid > 0 and pid in open_at and action == 0:
            end(pid, commit=draw(st.booleans()))
            continue
        size = action + 1
        records = [NewRecord(b"v")] * size
        if pid < 0:
            log.append(build_batch(records, base_offset=offset))
            shown.append(offset)
        else:
            log.append(
                build_batch(
                    records, base_offset=offset, producer_id=pid, producer_epoch=0, transactional=True
                )
            )
            open_at.setdefault(pid, offset)
            members.setdefault(pid, []).append(offset)
        offset += size
    for pid in sorted(open_at):
        end(pid, commit=draw(st.booleans()))
    return log, aborted, sorted(shown)


@given(transactions(), st.randoms())
def test_the_batches_shown_are_those_of_no_aborted_transaction_and_no_marker(
    case: tuple[list[bytes], list[tuple[int, int]], list[int]], rnd: random.Random
) -> None:
    log, aborted, expected = case
    listed = list(aborted)
    rnd.shuffle(listed)  # the broker's order is not promised
    data = b"".join(log)
    shown = AbortedFilter(listed)
    assert [h.base_offset for h, b in whole_batches(data).slices(data) if shown.shows(h, b)] == expected


def test_an_aborted_transaction_ends_at_its_producers_abort_marker_only() -> None:
    """Producer 1 aborts (0-1, marker 2), producer 2 commits across it (3, marker 4), then
    producer 1's next transaction (5) is not aborted; a plain batch (6) always shows."""

    def data(offset: int, pid: int) -> bytes:
        return build_batch(
            [NewRecord(b"v")], base_offset=offset, producer_id=pid, producer_epoch=0, transactional=True
        )

    log = [
        data(0, 1),
        data(1, 1),
        _at(marker_batch(1, 0, False, coordinator_epoch=0, now_ms=0), 2),
        data(3, 2),
        _at(marker_batch(2, 0, True, coordinator_epoch=0, now_ms=0), 4),
        data(5, 1),
        build_batch([NewRecord(b"v")], base_offset=6),
    ]
    raw = b"".join(log)
    shown = AbortedFilter([(0, 1)])
    assert [h.base_offset for h, b in whole_batches(raw).slices(raw) if shown.shows(h, b)] == [3, 5, 6]
