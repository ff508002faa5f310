"""``logtrove compact TOPIC``: run compaction rounds now, with progress and a summary."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, JsonOption, console, fail, open_storage
from logtrove.storage.cleaner import Cleaner, CleanStats, OffsetMapFile


@app.command("compact")
def compact(
    topic: Annotated[str, typer.Argument(help="A topic whose cleanup.policy includes compact.")],
    partition: Annotated[int | None, typer.Option("--partition", "-p", help="Only this partition.")] = None,
    data: DataOption = DEFAULT_DATA,
    map_budget_mb: Annotated[
        float, typer.Option("--map-budget-mb", min=0.0001, help="Memory for the key → offset map per round.")
    ] = 64.0,
    offset_map: Annotated[
        Path | None,
        typer.Option("--offset-map", help="A precomputed key → latest-offset map file (e.g. from Spark)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Compact a topic now: keep the latest record per key, drop expired tombstones.

    Runs rounds until each partition's dirty section is cleaned (several rounds when the
    map budget is smaller than the number of keys). Needs the data dir's writer lock:
    stop the broker first, or let the broker's own cleaner do it.

    Examples:

      logtrove compact users

      logtrove compact users --partition 0 --map-budget-mb 8
    """
    busy = (
        f"A broker compacts {topic} itself in the background (its last clean: logtrove topics "
        f"describe {topic}); to compact now, stop the broker and run this again."
    )
    with open_storage(data, read_only=False, when_locked=busy) as storage:
        info = storage.topic(topic)
        if not info.config.compact:
            fail(
                f"{topic} has cleanup.policy={info.config.cleanup_policy}; compaction needs 'compact' "
                f"(logtrove topics alter {topic} --config cleanup.policy=compact)"
            )
        partitions = [partition] if partition is not None else list(range(info.partitions))
        cleaner = Cleaner(storage, map_budget_bytes=int(map_budget_mb * 1024 * 1024))
        results: dict[int, list[CleanStats]] = {}
        sizes: dict[int, tuple[int, int]] = {}
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=as_json,
        ) as bar:
            for p in partitions:
                log = storage.log(topic, p)
                task = bar.add_task(f"{topic}-{p}", total=None)
                size_before = log.size_bytes

                def progress(phase: str, done: int, total: int, task: TaskID = task, p: int = p) -> None:
                    bar.update(task, completed=done, total=max(total, 1), description=f"{topic}-{p} {phase}")

                if offset_map is not None:
                    lookup = OffsetMapFile(offset_map)
                    try:
                        results[p] = [cleaner.clean(log, offset_map=lookup, progress=progress)]
                    finally:
                        lookup.close()
                else:
                    results[p] = cleaner.clean_until_caught_up(log, progress=progress)
                bar.remove_task(task)
                sizes[p] = (size_before, log.size_bytes)
    _report(topic, results, sizes, as_json)


def _report(
    topic: str, results: dict[int, list[CleanStats]], sizes: dict[int, tuple[int, int]], as_json: bool
) -> None:
    if as_json:
        out = {
            str(p): {
                "bytes_before": sizes[p][0],
                "bytes_after": sizes[p][1],
                "rounds": [asdict(s) for s in rounds],
            }
            for p, rounds in results.items()
        }
        console.print_json(json.dumps(out))
        return
    table = Table(
        "partition",
        "rounds",
        "bytes before",
        "bytes after",
        "live keys kept",
        "records removed",
        "tombstones removed",
    )
    for p, rounds in results.items():
        table.add_row(
            str(p),
            str(len(rounds)),
            f"{sizes[p][0]:,}",
            f"{sizes[p][1]:,}",
            f"{rounds[-1].live_keys_kept:,}",
            f"{sum(r.records_removed for r in rounds):,}",
            f"{sum(r.tombstones_removed for r in rounds):,}",
        )
    console.print(table)
    for p, rounds in results.items():
        reason = nothing_removed_reason(rounds)
        if reason:
            console.print(f"{topic}-{p}: nothing removed: {reason}", highlight=False)
    console.print(f"Compacted [bold]{topic}[/].")


def nothing_removed_reason(rounds: list[CleanStats]) -> str | None:
    """Why compaction removed no record from a partition (``None`` if it removed some)."""
    if any(r.records_removed or r.tombstones_removed or r.markers_removed for r in rounds):
        return None
    if not any(r.segments_cleaned for r in rounds):
        start = rounds[-1].first_uncleanable if rounds else 0
        return (
            f"no segment could be cleaned: only closed segments are compacted, and the records from "
            f"offset {start} on are in the active segment (it closes at segment.bytes or segment.ms), "
            "younger than min.compaction.lag.ms, or in an open transaction"
        )
    return (
        "each key in the cleaned segments has only its latest value (no older values or expired tombstones)"
    )
