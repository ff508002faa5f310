"""A read-only view of another process's partition log, brought up to date by listing
its directory again (:meth:`~logtrove.storage.log.PartitionLog.refresh`).

Readers in other processes (the CLI, Spark, a read-only HTTP server) open the writer's
files read-only and follow them while the writer appends, rolls, cleans and deletes::

    listed     [ 0 ][ 120 ][ 377 ]                 the view's list before the refresh
    on disk         [ 120'][ 377+ ][ 502 ]         0 deleted, 120 cleaned (a new file),
                                                   377 grown, 502 rolled
    refreshed       [ 120'][ 377+ ][ 502 ]

A refresh drops the segments gone from the listing or replaced by a new file under the
same name (another inode: a cleaner swap, or a roll that deleted and recreated it),
extends the last segment in place when its file has grown
(:meth:`~logtrove.storage.segment.Segment.extend_read_only` reads only the new batch
headers and index tails; reopening read both indexes whole, about 6 ms a partition
under a producer's load), reopens it when it shrank or was rewritten in place (a fresh
object, so a thread reading the old one is not disturbed), and opens the segments
listed that it does not hold. Dropped and replaced objects stay open for a minute in the log's
graveyard, for readers still holding them; a view only closes them, never unlinks.

Invariant: the log end offset of a view never goes back. A listing taken while the
writer rolls and deletes may name a segment that is gone by the time it is opened, and
then misses the newer ones: that pass reports itself incomplete and the listing is taken
again, up to :data:`REFRESH_ATTEMPTS` times.
"""

from __future__ import annotations

from pathlib import Path

from logtrove.clock import Clock
from logtrove.storage.config import TopicConfig
from logtrove.storage.loader import open_listed_segment, segment_bases
from logtrove.storage.segment import Segment
from logtrove.storage.segments import LogSegments

REFRESH_ATTEMPTS = 10  # listings a reader takes while the writer deletes segments under it
_KEEP_MS = 60_000  # how long a dropped segment object stays open for readers holding it


def refresh_listing(
    listed: LogSegments,
    directory: Path,
    config: TopicConfig,
    graveyard: list[tuple[int, Segment]],
    clock: Clock,
) -> None:
    """Bring ``listed`` up to date with ``directory`` (module doc); dropped segment
    objects go to ``graveyard`` as ``(close after ms, segment)``."""
    for _attempt in range(REFRESH_ATTEMPTS):
        if _refresh_once(listed, directory, config, graveyard, clock):
            return


def _refresh_once(
    listed: LogSegments,
    directory: Path,
    config: TopicConfig,
    graveyard: list[tuple[int, Segment]],
    clock: Clock,
) -> bool:
    """One pass over a directory listing. False when a listed segment was gone by the
    time it was opened: the writer rolled and deleted it meanwhile, so the listing misses
    newer segments and must be taken again (else the log end offset would go back)."""
    on_disk = set(segment_bases(directory, read_only=True))
    for seg in list(listed.segments):
        if seg.base_offset not in on_disk or not seg.is_current_file():
            listed.remove(seg)
            graveyard.append((clock.now_ms() + _KEEP_MS, seg))
    known = set(listed.bases)
    if listed.segments and not listed.active.extend_read_only():
        last = listed.pop_last()  # shrunk or rewritten in place: reopened below
        graveyard.append((clock.now_ms() + _KEEP_MS, last))
        known.discard(last.base_offset)
    complete = True
    for base in sorted(on_disk - known):
        opened = open_listed_segment(directory, config, base, read_only=True, recover=False)
        if opened is None:
            complete = False
        else:
            listed.add(opened)
    listed.sort()
    return complete
