"""Consumer groups: the group coordinator, committed offsets and lag (DESIGN.md §5).

:class:`GroupCoordinator` runs Kafka's classic group protocol (join, sync, heartbeat,
leave, session timeouts) on the broker's event loop; :class:`ConsumerGroups` the consumer
group protocol of KIP-848 (server-side assignment, :mod:`.assignors`); :class:`OffsetStore` keeps committed
offsets as records of the compacted topic ``__consumer_offsets``. :class:`LagMonitor`
computes lag per group × topic × partition (messages, time, and exact tag-aware lag from
``.tagidx``); tag subscriptions live in the same topic (:mod:`.subscriptions`), and
:class:`TagConsumer` reads only the records of the wanted tags (:mod:`.consumer`).
"""

from logtrove.groups.consumer import StartAt, StoreCommitter, TagConsumer
from logtrove.groups.consumer_protocol import ConsumerGroups, Heartbeat, HeartbeatResult
from logtrove.groups.coordinator import GroupCoordinator
from logtrove.groups.lag import GroupLag, LagMonitor, PartitionLag, TopicLag
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
from logtrove.groups.progress import GroupProgress
from logtrove.groups.subscriptions import TagSubscription, append_subscription
from logtrove.groups.tags import InvalidTagExpressionError, TagFilter, count_matching, fetch_matching

__all__ = [
    "OFFSETS_TOPIC",
    "CommitKey",
    "CommittedOffset",
    "ConsumerGroups",
    "GroupCoordinator",
    "GroupLag",
    "GroupProgress",
    "Heartbeat",
    "HeartbeatResult",
    "InvalidTagExpressionError",
    "LagMonitor",
    "OffsetRecordError",
    "OffsetStore",
    "PartitionLag",
    "StartAt",
    "StoreCommitter",
    "TagConsumer",
    "TagFilter",
    "TagSubscription",
    "TopicLag",
    "append_subscription",
    "count_matching",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "fetch_matching",
]
