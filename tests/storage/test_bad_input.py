"""Batches a producer must not get into the log: each is refused with its own error, and
the log (offsets and files) is left exactly as it was."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from logtrove.records import (
    CrcMismatchError,
    InvalidLengthError,
    InvalidMagicError,
    InvalidRecordCountError,
    NewRecord,
    OffsetOverflowError,
    RecordsError,
    build_batch,
    read_header,
)
from logtrove.records.batch import CRC_START, HEADER, MAX_OFFSET
from logtrove.storage import PartitionLog, RecordTooLargeError, StorageError
from logtrove.testing import FakeClock

from .helpers import decode_batches, files_of, open_topic


def good_batch(n: int = 3, size: int = 20) -> bytes:
    return build_batch([NewRecord(bytes([i]) * size, b"k", (), 1_000 + i) for i in range(n)])


def with_header(batch: bytes, *, fix_crc: bool = True, **fields: int) -> bytes:
    buf = bytearray(batch)
    HEADER.pack_into(buf, 0, *read_header(batch)._replace(**fields))
    if fix_crc:
        buf[17:21] = crc32c.crc32c(bytes(buf[CRC_START:])).to_bytes(4, "big")
    return bytes(buf)


def wrong_magic(b: bytes) -> bytes:
    return b[:16] + b"\x01" + b[17:]


def bad_crc(b: bytes) -> bytes:
    return b[:-1] + bytes([b[-1] ^ 0x40])


def truncated(b: bytes) -> bytes:
    return b[:-5]


def truncated_header(b: bytes) -> bytes:
    return b[:40]


def length_too_short(b: bytes) -> bytes:
    return with_header(b, batch_length=20)


def count_too_high(b: bytes) -> bytes:
    return with_header(b, record_count=4)


def count_too_low(b: bytes) -> bytes:
    return with_header(b, record_count=2)


def negative_delta(b: bytes) -> bytes:
    return with_header(b, last_offset_delta=-1, record_count=0)


BAD: list[tuple[Callable[[bytes], bytes], type[RecordsError]]] = [
    (wrong_magic, InvalidMagicError),
    (bad_crc, CrcMismatchError),
    (truncated, InvalidLengthError),
    (truncated_header, InvalidLengthError),
    (length_too_short, InvalidLengthError),
    (count_too_high, InvalidRecordCountError),
    (count_too_low, InvalidRecordCountError),
    (negative_delta, InvalidRecordCountError),
]


def prepared_log(tmp_path: Path, **configs: str) -> PartitionLog:
    _storage, log = open_topic(tmp_path / "d", FakeClock(), segment_bytes="1024", **configs)
    for _ in range(12):  # a few segments, so "unchanged" covers more than one file
        log.append(good_batch())
    return log


def assert_refused(
    log: PartitionLog, data: bytes, error: type[Exception], *, then_append: bool = True
) -> None:
    before_files = files_of(log.directory)
    before = (log.log_end_offset, log.size_bytes, len(log.segments))
    with pytest.raises(error):
        log.append(data)
    assert (log.log_end_offset, log.size_bytes, len(log.segments)) == before
    log.flush()
    assert files_of(log.directory) == before_files
    if not then_append:
        return
    # and the log still works
    result = log.append(good_batch())
    assert result.base_offset == before[0]


@pytest.mark.parametrize(("corrupt", "error"), BAD, ids=[c.__name__ for c, _ in BAD])
def test_corrupt_batch_is_refused_and_nothing_appended(
    tmp_path: Path, corrupt: Callable[[bytes], bytes], error: type[RecordsError]
) -> None:
    log = prepared_log(tmp_path)
    assert_refused(log, corrupt(good_batch()), error)


@pytest.mark.parametrize(("corrupt", "error"), BAD, ids=[c.__name__ for c, _ in BAD])
def test_bad_second_batch_of_an_append_refuses_the_first_too(
    tmp_path: Path, corrupt: Callable[[bytes], bytes], error: type[RecordsError]
) -> None:
    log = prepared_log(tmp_path)
    assert_refused(log, good_batch() + corrupt(good_batch()), error)


def test_bad_middle_batch_of_three_refuses_all(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    assert_refused(log, good_batch() + bad_crc(good_batch()) + good_batch(), CrcMismatchError)


def test_trailing_garbage_after_a_batch_is_refused(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    assert_refused(log, good_batch() + b"\x00" * 7, InvalidLengthError)


def test_empty_request_is_refused(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    assert_refused(log, b"", InvalidLengthError)


def test_batch_larger_than_max_message_bytes_is_refused(tmp_path: Path) -> None:
    log = prepared_log(tmp_path, max_message_bytes="2000")
    big = build_batch([NewRecord(b"x" * 2100, None, (), 5)])
    assert_refused(log, big, RecordTooLargeError)
    assert_refused(log, good_batch() + big, RecordTooLargeError)
    assert issubclass(RecordTooLargeError, StorageError)


def test_batch_exactly_max_message_bytes_is_accepted(tmp_path: Path) -> None:
    batch = build_batch([NewRecord(b"x" * 500, None, (), 5)])
    log = prepared_log(tmp_path, max_message_bytes=str(len(batch)))
    assert log.append(batch).record_count == 1


def test_offset_overflow_is_refused_and_nothing_appended(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    near_end = MAX_OFFSET - 5
    log.append(with_header(good_batch(1), base_offset=near_end), assign_offsets=False)
    assert log.log_end_offset == near_end + 1
    # 5 offsets are left: 3 fit, then a batch of 3 would pass int64
    assert_refused(log, good_batch(6), OffsetOverflowError, then_append=False)
    # the first batch fits, the second does not: neither goes in
    assert_refused(log, good_batch(3) + good_batch(3), OffsetOverflowError, then_append=False)
    assert log.append(good_batch(5)).last_offset == MAX_OFFSET


def test_batch_with_overflowing_own_offsets_is_refused(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    raw = with_header(good_batch(3), base_offset=MAX_OFFSET - 1)
    before = files_of(log.directory)
    with pytest.raises(OffsetOverflowError):
        log.append(raw, assign_offsets=False)
    log.flush()
    assert files_of(log.directory) == before


def test_batches_out_of_offset_order_are_refused_whole(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    end = log.log_end_offset
    first = with_header(good_batch(2), base_offset=end + 10)
    second = with_header(good_batch(2), base_offset=end + 5)  # goes backwards
    before = files_of(log.directory)
    with pytest.raises(RecordsError):
        log.append(first + second, assign_offsets=False)
    assert log.log_end_offset == end
    log.flush()
    assert files_of(log.directory) == before


def test_refused_batch_leaves_readable_log(tmp_path: Path) -> None:
    log = prepared_log(tmp_path)
    with pytest.raises(CrcMismatchError):
        log.append(bad_crc(good_batch()))
    offsets = [
        o for _, _, recs in decode_batches(log.read(0, 1 << 20).data()) for o in (r.offset for r in recs)
    ]
    assert offsets[0] == 0
    assert offsets == list(range(offsets[0], offsets[-1] + 1))
    assert struct.unpack(">q", log.read(log.log_end_offset - 3, 100).data()[:8])[0] == log.log_end_offset - 3
