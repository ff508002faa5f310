"""What groups have committed and subscribed to, read from ``__consumer_offsets``.

:class:`GroupProgress` replays the topic into memory — offset commits (Kafka's
``OffsetCommitKey``/``Value``, see :mod:`.offsets`) and tag subscriptions (see
:mod:`.subscriptions`) — and on :meth:`~GroupProgress.refresh` reads only what was
appended since, so ``logtrove lag --watch`` stays cheap. It needs no write access: it
works on a data directory opened read-only while the broker appends to it (the caller
refreshes the storage first).
"""

from __future__ import annotations

from logtrove.groups import subscriptions as subs
from logtrove.groups.offsets import (
    OFFSETS_TOPIC,
    CommitKey,
    CommittedOffset,
    OffsetRecordError,
    decode_key,
    decode_value,
)
from logtrove.records import Record
from logtrove.storage import Storage


class GroupProgress:
    """Committed offsets and tag subscriptions of every group."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.commits: dict[CommitKey, CommittedOffset] = {}
        self.subscriptions: dict[subs.SubscriptionKey, subs.TagSubscription] = {}
        self._next: dict[int, int] = {}  # partition → next offset to replay

    def refresh(self) -> None:
        """Replay what was appended to ``__consumer_offsets`` since the last call."""
        if not self.storage.has_topic(OFFSETS_TOPIC):
            return
        for p in range(self.storage.topic(OFFSETS_TOPIC).partitions):
            plog = self.storage.log(OFFSETS_TOPIC, p)
            start = self._next.get(p, 0)
            end = plog.log_end_offset
            if start >= end:
                continue
            for record in plog.records(start, end):
                self._apply(record)
            self._next[p] = end

    def _apply(self, record: Record) -> None:
        if record.key is None:
            return
        if subs.is_subscription_key(record.key):
            try:
                skey = subs.decode_key(record.key)
                if record.value is None:
                    self.subscriptions.pop(skey, None)
                else:
                    self.subscriptions[skey] = subs.decode_value(skey, record.value)
            except subs.SubscriptionRecordError:
                pass
            return
        try:
            key = decode_key(record.key)
            if record.value is None:
                self.commits.pop(key, None)
            else:
                self.commits[key] = decode_value(record.value)
        except OffsetRecordError:
            pass  # group metadata and other record types

    # -- questions -----------------------------------------------------------------------
    def groups(self) -> list[str]:
        """Every group with a commit or a subscription."""
        names = {k.group for k in self.commits} | {k.group for k in self.subscriptions}
        return sorted(names)

    def committed(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        return {(k.topic, k.partition): v for k, v in self.commits.items() if k.group == group}

    def subscription(self, group: str, topic: str) -> subs.TagSubscription | None:
        return self.subscriptions.get(subs.SubscriptionKey(group, topic))

    def subscriptions_of(self, group: str) -> dict[str, subs.TagSubscription]:
        return {k.topic: v for k, v in self.subscriptions.items() if k.group == group}

    def topics_of(self, group: str) -> list[str]:
        """Topics the group committed on or subscribed to."""
        names = {k.topic for k in self.commits if k.group == group}
        names |= {k.topic for k in self.subscriptions if k.group == group}
        return sorted(names)
