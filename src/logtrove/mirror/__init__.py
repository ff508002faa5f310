"""Follow any Kafka-protocol cluster: an indexed, offset-identical mirror (DESIGN.md §9).

The mirror is a client of the source (:mod:`.source`) and a follower append into local
storage (:mod:`.follower`, :meth:`logtrove.storage.PartitionLog.append_replicated`),
like Kafka's replica fetcher: it never invents offsets. :class:`Mirror` is the loop
(:mod:`.mirror`), with its settings and per-partition state in :mod:`.state` and the
local topics it creates and grows in :mod:`.topics`; :mod:`.truncation` checks a log
against the leader's epochs, :class:`GroupOffsetMirror` copies group commits
(:mod:`.groups`). ``logtrove mirror`` runs it in the foreground; ``serve --follow`` in a
thread beside the broker (:class:`MirrorThread`, :mod:`.thread`).
"""

from logtrove.mirror.follower import Appended, DivergedError, append_fetched
from logtrove.mirror.groups import CommitSink, GroupOffsetMirror
from logtrove.mirror.mirror import Mirror
from logtrove.mirror.source import (
    MIRRORED_CONFIGS,
    Source,
    SourceError,
    SourceRefusedError,
    SourceTopic,
)
from logtrove.mirror.state import MirrorConfig, MirrorError, MirrorStats, PartitionState
from logtrove.mirror.thread import MirrorThread

__all__ = [
    "MIRRORED_CONFIGS",
    "Appended",
    "CommitSink",
    "DivergedError",
    "GroupOffsetMirror",
    "Mirror",
    "MirrorConfig",
    "MirrorError",
    "MirrorStats",
    "MirrorThread",
    "PartitionState",
    "Source",
    "SourceError",
    "SourceRefusedError",
    "SourceTopic",
    "append_fetched",
]
