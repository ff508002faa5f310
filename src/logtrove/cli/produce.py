"""``logtrove produce TOPIC``: write JSON lines to a topic.

Input, one JSON object per line (blank lines are skipped)::

    {"key": "user-1", "value": "hello", "headers": {"id": "m-1"}, "timestamp": 1700000000000, "partition": 0}

Only ``value`` is required (``null`` writes a tombstone). A non-string value is stored
as its compact JSON text. ``headers`` is an object, or a list of ``[name, value]`` pairs
when a name repeats. Without ``partition``, keyed records go where Kafka's default
partitioner puts them (murmur2 of the key) and keyless ones round-robin.

All or nothing: the whole input is parsed and checked before anything is written, so a
malformed line (reported with its line number) leaves the topic untouched.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.table import Table

from logtrove.cli import remote
from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, JsonOption, console, err_console, fail, open_storage
from logtrove.cli.remote import BootstrapOption
from logtrove.client.admin import ensure_topic
from logtrove.client.records import produce_batches
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.records.partitioner import partition_for_key
from logtrove.storage import Storage

MAX_BATCH_BYTES = 900 * 1024  # stays under the default max.message.bytes (1 MiB + 12)


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One parsed input line."""

    line: int
    record: NewRecord
    partition: int | None


class InputError(ValueError):
    """A malformed input line; the message starts with the line number."""


def parse_lines(lines: Iterable[str]) -> list[InputRecord]:
    """Parse JSON lines; raises :class:`InputError` at the first bad one."""
    out: list[InputRecord] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        out.append(_parse_object(obj, number))
    return out


def _parse_object(obj: Any, number: int) -> InputRecord:
    def bad(reason: str) -> InputError:
        return InputError(f"line {number}: {reason}")

    if not isinstance(obj, dict):
        raise bad('expected a JSON object like {"key": "k", "value": "v"}')
    unknown = set(obj) - {"key", "value", "headers", "timestamp", "partition"}
    if unknown:
        raise bad(
            f"unknown field(s) {', '.join(sorted(unknown))}; fields are key, value, headers, timestamp, partition"
        )
    if "value" not in obj:
        raise bad('"value" is required (use null for a tombstone)')
    value = obj["value"]
    value_bytes = (
        None
        if value is None
        else _utf8(
            value if isinstance(value, str) else json.dumps(value, separators=(",", ":")), '"value"', bad
        )
    )
    key = obj.get("key")
    if key is not None and not isinstance(key, str):
        raise bad('"key" must be a string or null')
    key_bytes = None if key is None else _utf8(key, '"key"', bad)
    timestamp = obj.get("timestamp")
    if timestamp is not None and (
        isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0
    ):
        raise bad('"timestamp" must be epoch milliseconds (a non-negative integer)')
    partition = obj.get("partition")
    if partition is not None and (
        isinstance(partition, bool) or not isinstance(partition, int) or partition < 0
    ):
        raise bad('"partition" must be a non-negative integer')
    headers = _parse_headers(obj.get("headers"), bad)
    return InputRecord(number, NewRecord(value_bytes, key_bytes, headers, timestamp), partition)


def _utf8(text: str, what: str, bad: Callable[[str], InputError]) -> bytes:
    """``text`` as UTF-8; JSON can spell a lone surrogate (``"\\ud800"``), UTF-8 cannot."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise bad(f"{what} is not valid Unicode text: it holds a lone surrogate such as \\ud800") from None


def _parse_headers(raw: Any, bad: Callable[[str], InputError]) -> tuple[tuple[str, bytes | None], ...]:
    if raw is None:
        return ()
    items = raw.items() if isinstance(raw, dict) else raw
    if not isinstance(items, Iterable) or isinstance(items, str):
        raise bad('"headers" must be an object or a list of [name, value] pairs')
    out = []
    for item in items:
        if not (isinstance(item, list | tuple) and len(item) == 2):
            raise bad('"headers" list entries must be [name, value] pairs')
        name, value = item
        if not isinstance(name, str) or not (value is None or isinstance(value, str)):
            raise bad("header names must be strings and values strings or null")
        _utf8(name, f"header name {name!r}", bad)
        out.append((name, None if value is None else _utf8(value, f"header {name!r}", bad)))
    return tuple(out)


def assign_partitions(records: list[InputRecord], partitions: int) -> dict[int, list[NewRecord]]:
    """Group records by partition: explicit, else murmur2(key), else round robin."""
    groups: dict[int, list[NewRecord]] = {}
    next_rr = 0
    for item in records:
        if item.partition is not None:
            if item.partition >= partitions:
                raise InputError(
                    f"line {item.line}: partition {item.partition} does not exist (topic has {partitions})"
                )
            p = item.partition
        elif item.record.key is not None:
            p = partition_for_key(item.record.key, partitions)
        else:
            p = next_rr % partitions
            next_rr += 1
        groups.setdefault(p, []).append(item.record)
    return groups


def chunk_batches(records: list[NewRecord], max_records: int, max_bytes: int) -> Iterable[list[NewRecord]]:
    """Split records into batches by count and (approximate) encoded size."""
    batch: list[NewRecord] = []
    size = 0
    for r in records:
        r_size = (
            32
            + len(r.key or b"")
            + len(r.value or b"")
            + sum(len(k) + len(v or b"") + 4 for k, v in r.headers)
        )
        if batch and (len(batch) >= max_records or size + r_size > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(r)
        size += r_size
    if batch:
        yield batch


@app.command("produce")
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to (created with --partitions if missing).")],
    file: Annotated[Path | None, typer.Option("--file", "-f", help="JSON-lines file; default stdin.")] = None,
    data: DataOption = DEFAULT_DATA,
    compression: Annotated[str, typer.Option(help="none, gzip, snappy, lz4 or zstd.")] = "none",
    batch_records: Annotated[int, typer.Option(min=1, help="Most records per batch.")] = 10_000,
    partitions: Annotated[int, typer.Option(min=1, help="Partitions if the topic is created.")] = 1,
    as_json: JsonOption = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Write JSON lines to a topic, in batches. All or nothing: the input is checked first.

    Examples:

      echo '{"key": "k1", "value": "hello"}' | logtrove produce orders

      logtrove produce orders --file events.jsonl --compression zstd
    """
    try:
        codec = Compression.parse(compression)
    except ValueError as exc:
        fail(str(exc), 2)
    try:
        source: TextIO = file.open(encoding="utf-8") if file else sys.stdin
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    try:
        with source:
            records = parse_lines(source)
    except (InputError, UnicodeDecodeError) as exc:
        fail(f"{exc}; nothing was written")
    if not records:
        fail("no input records; nothing was written")
    started = time.perf_counter()
    if bootstrap:
        summary = _write_remote(bootstrap, topic, records, partitions, codec, batch_records)
    else:
        with open_storage(data, read_only=False) as storage:
            if not storage.has_topic(topic):
                storage.create_topic(topic, partitions)
                err_console.print(f"created topic {topic} with {partitions} partition(s)")
            try:
                groups = assign_partitions(records, storage.topic(topic).partitions)
            except InputError as exc:
                fail(f"{exc}; nothing was written")
            summary = _write(storage, topic, groups, codec, batch_records)
    elapsed = time.perf_counter() - started
    total = sum(s["records"] for s in summary)
    if as_json:
        console.print_json(
            json.dumps({"topic": topic, "records": total, "seconds": elapsed, "partitions": summary})
        )
        return
    table = Table("partition", "records", "batches", "first offset", "last offset")
    for s in summary:
        table.add_row(
            *(str(s[k]) for k in ("partition", "records", "batches", "first_offset", "last_offset"))
        )
    console.print(table)
    console.print(f"Wrote {total:,} records to [bold]{topic}[/] in {elapsed:.2f} s.")


def _write_remote(
    bootstrap: str,
    topic: str,
    records: list[InputRecord],
    partitions: int,
    codec: Compression,
    batch_records: int,
) -> list[dict[str, int]]:
    """Through a running broker (``--bootstrap``): Produce requests with acks=all."""
    with remote.connect(bootstrap) as client:
        count, created = ensure_topic(client, topic, partitions)
        if created:
            err_console.print(f"created topic {topic} with {partitions} partition(s)")
        try:
            groups = assign_partitions(records, count)
        except InputError as exc:
            fail(f"{exc}; nothing was written")
        batches = {p: list(chunk_batches(recs, batch_records, MAX_BATCH_BYTES)) for p, recs in groups.items()}
        return produce_batches(client, topic, batches, codec)


def _write(
    storage: Storage, topic: str, groups: dict[int, list[NewRecord]], codec: Compression, batch_records: int
) -> list[dict[str, int]]:
    summary = []
    for p in sorted(groups):
        log = storage.log(topic, p)
        first = last = -1
        batches = 0
        for chunk in chunk_batches(groups[p], batch_records, MAX_BATCH_BYTES):
            result = log.append(build_batch(chunk, compression=codec))
            first = result.base_offset if first < 0 else first
            last = result.last_offset
            batches += 1
        summary.append(
            {
                "partition": p,
                "records": len(groups[p]),
                "batches": batches,
                "first_offset": first,
                "last_offset": last,
            }
        )
    return summary
