"""The one cache of what readers load from derived files, shared by every reader.

Blocks are written once and never changed, so what a reader decodes from them stays true
while the files it came from are the same. Readers keep it in :data:`READERS`, each kind
of entry least-recently-used first out within its own budget, behind one lock:

==========================  =====================================  ===================
kind                        key                                    budget
==========================  =====================================  ===================
:data:`.views.VIEWS`        a segment's file and its three         4,096 views
                            derived files' (inode, size)
:data:`.views.CHECKED`      a segment's file (path, inode)         4,096 block lists
:data:`.tagblocks.          a ``.tagidx`` file's version and its   4,096 lists
TAG_FILES`                  segment's file
:data:`.tagblocks.          a ``.tagidx`` block: file, inode,      16 M entries
TAG_BLOCKS`                 payload place, offsets                 (8 bytes each)
:data:`.slottables.         a ``.keyidx`` block: file, inode,      256 MiB
SLOT_TABLES`                payload place, CRC                     (4 bytes a slot)
==========================  =====================================  ===================

A kind never evicts its newest entry, so one oversized block is still cached. Slot
tables are admitted differently (:meth:`ReaderCache.put_if_room`): every key lookup
probes every block, newest first, so past its budget an LRU would evict each table just
before it is next needed and read a whole table per probe; instead a table is cached
only when it fits once stale tables (of files deleted or replaced) are dropped, and a
lookup probes the blocks that did not fit through the file, as without the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

V = TypeVar("V")


@dataclass(frozen=True)
class Kind(Generic[V]):
    """One kind of cached entry (values of type ``V``), by a name of its own, and its
    budget of weight."""

    name: str
    budget: int


class ReaderCache:
    """Entries by kind and key, each kind an LRU within its budget of weight."""

    def __init__(self) -> None:
        self._entries: dict[str, OrderedDict[Hashable, tuple[Any, int]]] = {}
        self._weights: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, kind: Kind[V], key: Hashable) -> V | None:
        """The entry, made the most recently used; ``None`` when absent."""
        with self._lock:
            entries = self._entries.get(kind.name)
            if entries is None or key not in entries:
                return None
            entries.move_to_end(key)
            return cast(V, entries[key][0])

    def put(
        self,
        kind: Kind[V],
        key: Hashable,
        value: V,
        weight: int = 1,
        *,
        replaces: Callable[[V], bool] | None = None,
    ) -> None:
        """Cache ``value``, then drop the least recently used entries of its kind past
        the kind's budget. ``replaces``, given the entry already cached under ``key``,
        says whether ``value`` takes its place (by default it does)."""
        with self._lock:
            entries = self._entries.setdefault(kind.name, OrderedDict())
            total = self._weights.get(kind.name, 0)
            current = entries.get(key)
            if current is not None:
                if replaces is not None and not replaces(current[0]):
                    return
                total -= current[1]
            entries[key] = (value, weight)
            entries.move_to_end(key)
            total += weight
            while total > kind.budget and len(entries) > 1:
                _, (_, dropped) = entries.popitem(last=False)
                total -= dropped
            self._weights[kind.name] = total

    def put_if_room(
        self, kind: Kind[V], key: Hashable, value: V, weight: int, *, stale: Callable[[Hashable], bool]
    ) -> bool:
        """Cache ``value`` if it fits in the kind's budget once the least recently used
        entries that ``stale`` (given their key) says will never be asked for again are
        dropped, oldest first up to the first live one; no live entry is evicted. True
        when cached."""
        with self._lock:
            entries = self._entries.setdefault(kind.name, OrderedDict())
            total = self._weights.get(kind.name, 0)
            if key in entries:
                return True
            while total + weight > kind.budget and entries:
                oldest = next(iter(entries))
                if not stale(oldest):
                    break
                total -= entries.pop(oldest)[1]
            self._weights[kind.name] = total
            if total + weight > kind.budget:
                return False
            entries[key] = (value, weight)
            self._weights[kind.name] = total + weight
            return True

    def keys(self, kind: Kind[V]) -> list[Hashable]:
        """The keys cached for ``kind``, least recently used first."""
        with self._lock:
            return list(self._entries.get(kind.name, ()))

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._weights.clear()


READERS = ReaderCache()
"""The cache every reader of derived files uses."""
