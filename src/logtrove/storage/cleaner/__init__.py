"""Log compaction (DESIGN.md §4): keep the latest record per key.

The algorithm (:mod:`.clean`) is separate from its scheduling (:mod:`.scheduler`).
"""

from logtrove.storage.cleaner.offset_map import (
    OffsetLookup,
    OffsetMap,
    OffsetMapFile,
    OffsetMapFullError,
    key_digest,
    write_offset_map_digests,
    write_offset_map_file,
)

__all__ = [
    "OffsetLookup",
    "OffsetMap",
    "OffsetMapFile",
    "OffsetMapFullError",
    "key_digest",
    "write_offset_map_digests",
    "write_offset_map_file",
]
