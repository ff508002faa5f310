"""Consumer groups: the group coordinator and committed offsets (DESIGN.md §5).

:class:`GroupCoordinator` runs Kafka's classic group protocol (join, sync, heartbeat,
leave, session timeouts) on the broker's event loop; :class:`OffsetStore` keeps committed
offsets as records of the compacted topic ``__consumer_offsets``.
"""

from logtrove.groups.coordinator import GroupCoordinator
from logtrove.groups.offsets import (
    OFFSETS_TOPIC,
    CommitKey,
    CommittedOffset,
    OffsetRecordError,
    OffsetStore,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

__all__ = [
    "OFFSETS_TOPIC",
    "CommitKey",
    "CommittedOffset",
    "GroupCoordinator",
    "OffsetRecordError",
    "OffsetStore",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]
