"""``logtrove dump-log FILE``: print a segment's batches, records or index entries, like
Kafka's DumpLogSegments. Reads files directly and never takes the data dir lock."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from logtrove.cli.app import app
from logtrove.cli.common import console, fail, format_time
from logtrove.clock import ascii_int
from logtrove.records import (
    BatchHeader,
    RecordsError,
    UnsupportedCompressionError,
    iter_records,
    peek_batch_size,
    validate_batch,
)
from logtrove.storage.index import OffsetIndex, TimeIndex
from logtrove.storage.segmentnames import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX

_CHUNK = 4 * 1024 * 1024


@app.command("dump-log")
def dump_log(
    file: Annotated[
        Path, typer.Argument(help="A .log, .index or .timeindex file.", exists=True, dir_okay=False)
    ],
    print_data: Annotated[bool, typer.Option("--print-data", help="Also print every record.")] = False,
    verify_index: Annotated[
        bool, typer.Option("--verify-index", help="Check the segment's index entries against its log.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print the batches (and records) of a segment file, or the entries of an index.

    Examples:

      logtrove dump-log data/orders-0/00000000000000000000.log --print-data

      logtrove dump-log data/orders-0/00000000000000000000.index --verify-index
    """
    base = _base_offset(file)
    log_path = file.with_name(f"{base:020d}{LOG_SUFFIX}")
    problems: list[str] = []
    if file.suffix == LOG_SUFFIX:
        problems += _dump_batches(file, base, print_data, as_json)
    elif file.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        _dump_index(file, base, as_json)
    else:
        fail(f"{file.name}: expected a .log, .index or .timeindex segment file", 2)
    if verify_index:
        if not log_path.exists():
            fail(f"cannot verify: {log_path.name} is missing")
        problems += verify_indexes(log_path, base)
        if not problems:
            console.print(f"[green]index entries of {base:020d} agree with the log[/]")
    for problem in problems:
        console.print(f"[red]{problem}[/]", highlight=False)
    if problems:
        raise typer.Exit(1)


def _base_offset(file: Path) -> int:
    base = ascii_int(file.name.split(".", 1)[0])
    if base is None:
        fail(f"{file.name}: segment files are named by their base offset, e.g. 00000000000000000000.log", 2)
    return base


def walk_log(path: Path) -> Iterator[tuple[int, BatchHeader | None, bytes | str]]:
    """(position, header, batch bytes) for each valid batch; a last item with header
    ``None`` and a reason string when the file ends with an invalid or partial batch."""
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        size = peek_batch_size(data, pos)
        if size is None or size > len(data) - pos:
            yield pos, None, f"partial batch at position {pos} ({len(data) - pos} bytes left)"
            return
        try:
            header = validate_batch(memoryview(data)[pos : pos + size])
        except RecordsError as exc:
            yield pos, None, f"invalid batch at position {pos}: {exc}"
            return
        yield pos, header, data[pos : pos + size]
        pos += size


def _dump_batches(path: Path, base: int, print_data: bool, as_json: bool) -> list[str]:
    if not as_json:
        console.print(f"Dumping {path}  (base offset {base})", highlight=False)
    problems: list[str] = []
    for position, header, payload in walk_log(path):
        if header is None:
            assert isinstance(payload, str)
            return [*problems, payload]
        assert isinstance(payload, bytes)
        try:
            compression = header.compression.name.lower()
        except UnsupportedCompressionError as exc:  # written by something other than logtrove
            compression = f"unknown ({header.attributes & 0x07})"
            problems.append(f"batch at position {position}: {exc}")
        info = {
            "baseOffset": header.base_offset,
            "lastOffset": header.last_offset,
            "count": header.record_count,
            "position": position,
            "size": header.size,
            "baseTimestamp": header.base_timestamp,
            "maxTimestamp": header.max_timestamp,
            "compression": compression,
            "producerId": header.producer_id,
            "producerEpoch": header.producer_epoch,
            "baseSequence": header.base_sequence,
            "isTransactional": header.is_transactional,
            "isControl": header.is_control,
            "crc": header.crc,
            "isValid": not compression.startswith("unknown"),
        }
        _emit(info, as_json, _batch_line(info))
        if print_data and info["isValid"]:
            try:
                for record in iter_records(payload, 0, header):
                    rec = {
                        "offset": record.offset,
                        "timestamp": record.timestamp,
                        "key": _text(record.key),
                        "value": _text(record.value),
                        "headers": {k: _text(v) for k, v in record.headers},
                    }
                    _emit(rec, as_json, "| " + "  ".join(f"{k}: {v}" for k, v in rec.items()))
            except RecordsError as exc:
                return [*problems, f"batch at position {position} has undecodable records: {exc}"]
    return problems


def _batch_line(info: dict[str, Any]) -> str:
    return (
        f"baseOffset: {info['baseOffset']} lastOffset: {info['lastOffset']} count: {info['count']} "
        f"position: {info['position']} size: {info['size']} maxTimestamp: {format_time(info['maxTimestamp'])} "
        f"compression: {info['compression']} producerId: {info['producerId']} crc: {info['crc']} "
        f"isValid: {str(info['isValid']).lower()}"
    )


def _dump_index(path: Path, base: int, as_json: bool) -> None:
    entry = struct.Struct(">II" if path.suffix == INDEX_SUFFIX else ">qI")
    data = path.read_bytes()
    usable = len(data) - len(data) % entry.size
    for a, b in entry.iter_unpack(data[:usable]):
        if path.suffix == INDEX_SUFFIX:
            _emit({"offset": base + a, "position": b}, as_json, f"offset: {base + a} position: {b}")
        else:
            _emit({"timestamp": a, "offset": base + b}, as_json, f"timestamp: {a} offset: {base + b}")
    if usable != len(data):
        console.print(f"[yellow]{len(data) - usable} trailing bytes do not form a whole entry[/]")


def verify_indexes(log_path: Path, base: int) -> list[str]:
    """Check every offset-index entry points at a batch start with that base offset, and
    every time-index entry (T, O) has T = the running max timestamp first reached at O."""
    starts: dict[int, int] = {}
    running: list[tuple[int, int]] = []  # (max so far, offset where first reached) per batch
    max_ts, max_at = -1, base
    for position, header, _ in walk_log(log_path):
        if header is None:
            break
        starts[position] = header.base_offset
        if header.max_timestamp > max_ts:
            max_ts, max_at = header.max_timestamp, header.base_offset
        running.append((max_ts, max_at))
    problems = []
    offset_index = OffsetIndex(log_path.with_suffix(INDEX_SUFFIX), base)
    offset_index.load(2**63, strict=False)
    for offset, position in offset_index.entries():
        if starts.get(position) != offset:
            problems.append(
                f"offset index entry ({offset}, {position}) does not point at a batch with base offset {offset}"
            )
    time_index = TimeIndex(log_path.with_suffix(TIME_INDEX_SUFFIX), base)
    time_index.load(2**63, strict=False)
    reached = {off: ts for ts, off in running}
    for ts, offset in time_index.entries():
        if reached.get(offset) != ts:
            problems.append(f"time index entry ({ts}, {offset}) is not a running maximum of the log")
    return problems


def _emit(obj: dict[str, Any], as_json: bool, line: str) -> None:
    if as_json:
        print(json.dumps(obj))  # plain JSON lines, no rich markup
    else:
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
