"""Log compaction (DESIGN.md §4): keep the latest record per key.

The algorithm (:mod:`.clean`) is separate from its scheduling (:mod:`.scheduler`).
"""

from logtrove.storage.cleaner.clean import CleanStats, clean_partition, dirty_ratio, first_uncleanable_offset
from logtrove.storage.cleaner.offset_map import (
    OffsetLookup,
    OffsetMap,
    OffsetMapFile,
    OffsetMapFullError,
    digest_keys,
    join_offset_map_parts,
    key_digest,
    map_entries,
    write_offset_map_digests,
    write_offset_map_file,
)
from logtrove.storage.cleaner.scheduler import Cleaner, CleanStatus, status_of

__all__ = [
    "CleanStats",
    "CleanStatus",
    "Cleaner",
    "OffsetLookup",
    "OffsetMap",
    "OffsetMapFile",
    "OffsetMapFullError",
    "clean_partition",
    "digest_keys",
    "dirty_ratio",
    "first_uncleanable_offset",
    "join_offset_map_parts",
    "key_digest",
    "map_entries",
    "status_of",
    "write_offset_map_digests",
    "write_offset_map_file",
]
