"""The mirror's loop: follow a source cluster's topics into a data directory.

Each round, in one thread (blocking sockets; the local appends are the partitions'
single writer):

1. **Topics** (every ``metadata_interval_ms``, and whenever a leader moved): Metadata
   names the source's topics matching the pattern; a new one is created locally with the
   source's partition count and :data:`~logtrove.mirror.source.MIRRORED_CONFIGS`, marked
   followed (read-only to clients); a grown one gets its new partitions, and changes of
   those configs at the source are applied. A new partition
   whose source log starts past the local end starts there too.
2. **Fetch** from each leader, every followed partition from its local log end, and
   append the answers byte for byte (:func:`~logtrove.mirror.follower.append_fetched`).
   The answer's log start offset moves the local one (retention, DeleteRecords at the
   source). OFFSET_OUT_OF_RANGE is resolved with ListOffsets: below the source's start,
   the local log restarts there; past the source's end, the source lost records it had.
   That, an answer overlapping the local end, and every start, reconnection or leader
   epoch change, are checked with the leader's epochs (:mod:`.truncation`): the local log
   is truncated where it parts from the leader's, as a Kafka follower's is. Where the
   epochs cannot tell (a source without OffsetForLeaderEpoch, a log without epochs), the
   last local batch is compared instead, and a divergence stops the partition, with the
   reason in the log and the status.
3. **Groups** (every ``groups_interval_ms``): the source's commits on followed topics
   are committed locally (:class:`~logtrove.mirror.groups.GroupOffsetMirror`).
4. **Status** (every ``status_interval_ms``): per partition, records and milliseconds
   behind (:mod:`logtrove.storage.follow`). Standalone (``maintenance``), also the
   storage maintenance a broker would run: ``flush.ms`` fsyncs, retention, checkpoints.

Restarting resumes from each log's end: the local log is the only position kept, so
there is no offset file to disagree with it (no gap, no duplicate). ``max_bytes_per_s``
paces the appends (the average over the run stays under it; one batch may exceed it).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.mirror import problems
from logtrove.mirror.follower import DivergedError, append_fetched, last_batch, tail_matches
from logtrove.mirror.groups import CommitSink, GroupOffsetMirror
from logtrove.mirror.source import (
    Fetched,
    FetchWant,
    Source,
    SourceError,
    SourceRefusedError,
    SourceTopic,
)
from logtrove.mirror.state import MirrorConfig, MirrorError, MirrorStats, PartitionState
from logtrove.mirror.topics import LocalTopics
from logtrove.mirror.truncation import check_epochs
from logtrove.records import RecordsError
from logtrove.storage import PartitionLog, Storage, StorageError, TopicError
from logtrove.storage.follow import (
    RETRYING,
    RUNNING,
    STOPPED,
    FollowProblem,
    FollowStatus,
    PartitionFollowStatus,
    remove_status_leftovers,
    write_follow_status,
)
from logtrove.wire import EARLIEST, LATEST

log = logging.getLogger("logtrove.mirror")

MAX_BACKOFF_MS = 30_000  # retries of an unreachable source slow down to one every 30 s
MAX_PARTITION_FETCH = 64 << 20  # a partition's fetch size grows up to this for one big batch
_LEADER_MOVED = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
}


class Mirror:
    """Follows the topics of one source cluster into ``storage`` (module doc)."""

    def __init__(
        self,
        storage: Storage,
        config: MirrorConfig,
        *,
        commit: CommitSink | None = None,
        on_append: Callable[[], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        try:
            self.pattern = re.compile(config.topics)
        except re.error as exc:
            raise MirrorError(f"--topics {config.topics!r} is not a regular expression: {exc}") from exc
        self.storage = storage
        self.config = config
        self.clock = clock
        self.on_append = on_append
        self.source = Source(config.source, security=config.security)
        self.group_offsets = GroupOffsetMirror(self.source, commit, clock=clock) if commit else None
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.stats = MirrorStats()
        self.state = RUNNING  # RETRYING while the source is unreachable, STOPPED for good
        self.problem: FollowProblem | None = None  # why retrying or stopped
        self._topics: dict[str, SourceTopic] = {}
        self.local_topics = LocalTopics(storage, config.source)
        self._metadata_due = 0.0
        self._groups_due = 0.0
        self._status_due = 0.0
        self._maintenance_due = 0.0
        remove_status_leftovers(storage.path)

    def close(self) -> None:
        self.source.close()

    # -- the loop -----------------------------------------------------------------------
    def run(
        self,
        stop: threading.Event,
        *,
        once: bool = False,
        progress: Callable[[Mirror], None] | None = None,
        progress_interval_s: float = 2.0,
    ) -> None:
        """Mirror until ``stop`` is set (or, with ``once``, until every followed partition
        has reached the source's log end and the group commits are copied). A source
        that refuses the mirror (credentials, TLS) raises :class:`MirrorError` at once."""
        failures = 0
        next_progress = time.monotonic() + progress_interval_s
        while not stop.is_set():
            try:
                appended = self.round()
                failures = 0
                if self.state == RETRYING:
                    self.state, self.problem = RUNNING, None
                if once and appended == 0 and self._caught_up():
                    break
            except SourceRefusedError as exc:  # the caller reports it (exit, or a log line)
                self._stop(problems.refused(exc.reason, str(exc), self.clock.now_ms()))
                raise MirrorError(str(exc)) from exc
            except OSError as exc:  # the local data directory (the source's errors are SourceError)
                problem = problems.local_failure(str(self.storage.path), exc, self.clock.now_ms())
                self._stop(problem)
                raise MirrorError(f"{problem.message}; {problem.action}") from exc
            except SourceError as exc:
                failures += 1
                self._metadata_due = 0  # leaders and their epochs may have moved meanwhile
                for state in self.partitions.values():
                    state.verified = False  # the source may have changed while unreachable
                growth = 0 if once else min(failures - 1, 5)  # ``once`` gives up after about 30 s
                backoff_ms = min(self.config.retry_backoff_ms << growth, MAX_BACKOFF_MS)
                since = self.problem.since_ms if self.problem is not None else self.clock.now_ms()
                self.problem = problems.unreachable(self.config.source, str(exc), backoff_ms / 1000, since)
                if once and failures >= self.config.once_max_failures:
                    self._stop(self.problem)
                    raise MirrorError(f"gave up after {failures} failed rounds: {exc}") from exc
                self.state = RETRYING
                log.warning("source %s: %s; retrying in %.1f s", self.config.source, exc, backoff_ms / 1000)
                self.write_status()
                stop.wait(backoff_ms / 1000)
            if progress is not None and time.monotonic() >= next_progress:
                progress(self)
                next_progress = time.monotonic() + progress_interval_s
        self.state = STOPPED  # asked to (or ``once`` caught up): no problem, but not copying
        self.write_status()

    def _stop(self, problem: FollowProblem) -> None:
        """The mirror stops (its caller exits or logs): the reason goes to the status file."""
        self.state, self.problem = STOPPED, problem
        log.error("mirror of %s stopped: %s; %s", self.config.source, problem.message, problem.action)
        self.write_status()

    def round(self) -> int:
        """One round (topics when due, one fetch per leader, groups and status when due);
        returns the bytes appended."""
        now = time.monotonic()
        if now >= self._metadata_due:
            self.sync_topics()
        appended = self._fetch_round()
        if self.group_offsets is not None and time.monotonic() >= self._groups_due:
            self.sync_groups()
        if time.monotonic() >= self._status_due:
            self.write_status()
        if self.config.maintenance and time.monotonic() >= self._maintenance_due:
            self.storage.run_maintenance()  # flush.ms fsyncs, retention, checkpoints
            self._maintenance_due = time.monotonic() + self.config.maintenance_interval_ms / 1000
        self.stats.rounds += 1
        return appended

    def _caught_up(self) -> bool:
        """``once``: whether every followed partition has the source's log end (asked
        anew with ListOffsets, after a fresh look at the topics) and the groups are synced."""
        self.sync_topics()
        for name, topic in self._topics.items():
            ends = self.source.list_offsets(topic, range(topic.partitions), LATEST)
            for p in range(topic.partitions):
                state = self.partitions.get((name, p))
                if state is None or state.failed:
                    continue
                if state.diverged or state.past_end:  # the next round settles it
                    return False
                if p not in ends or self.storage.log(name, p).log_end_offset < ends[p]:
                    return False
        if self.group_offsets is not None:
            self.sync_groups()
        return True

    # -- topics -------------------------------------------------------------------------
    def sync_topics(self) -> None:
        """Create, grow and start following the source's matching topics."""
        found = self.source.topics(self.pattern)
        # a topic deleted here meanwhile is copied anew (from the source's log start)
        self.partitions = {k: v for k, v in self.partitions.items() if self.storage.has_topic(k[0])}
        configs = self.source.configs(found)
        for name, topic in found.items():
            if not self.local_topics.ensure(name, topic, configs.get(name)):
                continue
            for p, epoch in topic.epochs.items():
                state = self.partitions.get((name, p))
                if state is not None and state.source_epoch != epoch:
                    state.source_epoch, state.verified = epoch, False  # a new leader: check again
            new = [p for p in range(topic.partitions) if (name, p) not in self.partitions]
            if new:
                self._start_partitions(topic, new)
        self._topics = {n: t for n, t in found.items() if n not in self.local_topics.skipped}
        self._metadata_due = time.monotonic() + self.config.metadata_interval_ms / 1000

    def _start_partitions(self, topic: SourceTopic, partitions: list[int]) -> None:
        starts = self.source.list_offsets(topic, partitions, EARLIEST)
        now = self.clock.now_ms()
        for p in partitions:
            state = PartitionState(topic.name, p, caught_up_ms=now, max_bytes=self.config.partition_max_bytes)
            state.source_epoch = topic.epochs.get(p, -1)
            start = starts.get(p)
            if start is not None:
                state.source_start = start
                self._follow_start(state, start)
            self.partitions[(topic.name, p)] = state

    def _follow_start(self, state: PartitionState, source_start: int) -> None:
        plog = self.storage.log(state.topic, state.partition)
        if source_start > plog.log_start_offset:
            self.storage.follow_log_start(state.topic, state.partition, source_start)

    # -- fetching -----------------------------------------------------------------------
    def _check_epochs(self) -> None:
        """Check the unverified partitions against their leaders' epochs (:mod:`.truncation`),
        truncating where the logs part; a divergence the epochs cannot resolve stops its
        partition. The last local batch is compared with the source's after this all the
        same (a topic deleted and created again at the source starts at epoch 0 again)."""
        unverified: dict[str, list[PartitionState]] = {}
        for (name, _p), state in self.partitions.items():
            if (
                not state.verified
                and not state.failed
                and name in self._topics
                and self.storage.has_topic(name)
            ):
                unverified.setdefault(name, []).append(state)
        for name, states in unverified.items():
            verdicts = check_epochs(
                self.source, self.storage, self._topics[name], [s.partition for s in states]
            )
            for state in states:
                verdict = verdicts.get(state.partition)
                suspect = state.diverged or state.past_end
                if verdict is not None and (state.diverged is None or verdict.truncated):
                    state.diverged = state.past_end = None  # the last batch is compared next
                elif suspect is not None:
                    why = (
                        "the leader's epochs say the logs agree up to the local end"
                        if verdict is not None
                        else "the source's leader epochs cannot tell where the logs part (it does not "
                        "serve OffsetForLeaderEpoch, or its batches carry no epochs)"
                    )
                    self._fail(
                        state, problems.diverged(state.topic, f"{suspect}; {why}", self.clock.now_ms())
                    )

    def _fetch_round(self) -> int:
        self._check_epochs()
        by_leader: dict[int, list[FetchWant]] = {}
        rate = self.config.max_bytes_per_s
        for (name, p), state in self.partitions.items():
            topic = self._topics.get(name)
            if state.failed or topic is None:
                continue
            if not self.storage.has_topic(name):  # deleted here: picked up again by sync_topics
                self._metadata_due = 0
                continue
            leader = topic.leaders.get(p, -1)
            if leader < 0:
                self._metadata_due = 0
                continue
            size = state.max_bytes if rate is None else min(state.max_bytes, max(rate, 1024))
            plog = self.storage.log(name, p)
            offset = plog.log_end_offset
            if not state.verified:
                last = last_batch(plog)
                if last is None:
                    state.verified = True
                else:
                    offset = last[0].base_offset  # compare it first (see tail_matches)
            by_leader.setdefault(leader, []).append(FetchWant(name, p, offset, size))
        total = 0
        for leader, wants in by_leader.items():
            max_bytes = (
                self.config.fetch_max_bytes if rate is None else min(self.config.fetch_max_bytes, rate)
            )
            for fetched in self.source.fetch(
                leader, wants, max_wait_ms=self.config.max_wait_ms, max_bytes=max(max_bytes, 1024)
            ):
                total += self._apply(fetched)
        if total and self.on_append is not None:
            self.on_append()
        self._pace(total)
        return total

    def _apply(self, fetched: Fetched) -> int:
        """Append one partition's answer; returns the bytes appended."""
        state = self.partitions.get((fetched.topic, fetched.partition))
        if state is None or state.failed:
            return 0
        code = fetched.error_code
        if code == ErrorCode.offset_out_of_range:
            self._out_of_range(state)
            return 0
        if code in _LEADER_MOVED:
            self._metadata_due = 0
            state.verified = False
            return 0
        if code:
            log.warning("fetch %s-%d: error code %d; retrying", state.topic, state.partition, code)
            return 0
        try:
            plog = self.storage.log(state.topic, state.partition)
        except TopicError:  # deleted here during the fetch: sync_topics copies it anew
            self._metadata_due = 0
            return 0
        if fetched.log_start_offset > plog.log_start_offset:
            state.source_start = fetched.log_start_offset
            self._follow_start(state, fetched.log_start_offset)
        if not state.verified and not self._tail_agrees(state, plog, fetched.records):
            return 0
        try:
            appended = append_fetched(plog, fetched.records)
        except DivergedError as exc:  # the next round asks the leader's epochs
            state.diverged, state.verified = str(exc), False
            return 0
        except RecordsError as exc:
            self._fail(state, problems.invalid_batch(str(exc), self.clock.now_ms()))
            return 0
        except StorageError as exc:
            self._fail(state, problems.partition_storage(str(exc), self.clock.now_ms()))
            return 0
        if appended.partial and appended.batches == 0:
            state.max_bytes = min(state.max_bytes * 2, MAX_PARTITION_FETCH)
        if not appended.batches and 0 <= fetched.high_watermark < plog.log_end_offset:
            self._past_end(state, plog.log_end_offset, fetched.high_watermark)  # no out-of-range error
            return 0
        state.source_end = fetched.high_watermark
        if fetched.log_start_offset >= 0:
            state.source_start = fetched.log_start_offset
        if plog.log_end_offset >= fetched.high_watermark:
            state.caught_up_ms = self.clock.now_ms()
        self.stats.records += appended.records
        self.stats.batches += appended.batches
        self.stats.bytes += appended.bytes
        return appended.bytes

    def _tail_agrees(self, state: PartitionState, plog: PartitionLog, records: bytes) -> bool:
        """Compare the source's batch at the local last batch (an answer fetched from its
        base offset); a different one stops the partition (see ``tail_matches``)."""
        last = last_batch(plog)
        if last is not None and tail_matches(last, records, compacted=plog.config.compact) is False:
            why = (
                f"the source's batch at offset {last[0].base_offset} differs from the mirror's: the "
                "source's log diverged (truncated and rewritten, or the topic recreated)"
            )
            self._fail(state, problems.diverged(state.topic, why, self.clock.now_ms()))
            return False
        state.verified = True
        return True

    def _out_of_range(self, state: PartitionState) -> None:
        topic = self._topics[state.topic]
        plog = self.storage.log(state.topic, state.partition)
        start = self.source.list_offsets(topic, [state.partition], EARLIEST).get(state.partition)
        end = self.source.list_offsets(topic, [state.partition], LATEST).get(state.partition)
        leo = plog.log_end_offset
        if start is not None and leo < start:
            log.info("%s: the source's log now starts at %d, past the local end %d", plog.tp, start, leo)
            state.source_start = start
            self._follow_start(state, start)
        elif not state.verified and (start is None or end is None or start <= leo <= end):
            state.verified = True  # the last local batch is below the source's start: nothing to compare
        elif end is not None and leo > end:
            self._past_end(state, leo, end)

    def _past_end(self, state: PartitionState, leo: int, end: int) -> None:
        """The source ends below the local log: it lost records it had (an unclean leader
        change), or its high watermark lags after a leader change. The next round asks
        the leader's epochs."""
        state.past_end = (
            f"the local log ends at {leo}, past the source's end {end}: the source lost records it had"
        )
        state.verified = False

    def _fail(self, state: PartitionState, problem: FollowProblem) -> None:
        state.failed, state.problem = f"{problem.message}; {problem.action}", problem
        log.error("%s-%d is no longer mirrored: %s", state.topic, state.partition, state.failed)

    def _pace(self, appended: int) -> None:
        """Sleep so that the bytes appended since the start stay under ``max_bytes_per_s``."""
        rate = self.config.max_bytes_per_s
        if rate is None or not appended:
            return
        ahead = self.stats.bytes / rate - (time.monotonic() - self.stats.started)
        if ahead > 0:
            time.sleep(ahead)

    # -- groups and status ------------------------------------------------------------------
    def sync_groups(self) -> None:
        """Copy the group commits; a source that cannot list them (or not now) is
        logged and asked again next interval: the records do not wait for the groups."""
        if self.group_offsets is None:
            return
        self._groups_due = time.monotonic() + self.config.groups_interval_ms / 1000
        try:
            self.stats.commits += self.group_offsets.sync(set(self._topics))
        except SourceError as exc:
            log.warning("group commits not copied this round: %s", exc)

    def lag(self) -> list[PartitionFollowStatus]:
        """Per followed partition: the source's start and end as last seen, the local
        end, records behind, and milliseconds since it was last caught up."""
        now = self.clock.now_ms()
        rows = []
        for (name, p), state in sorted(self.partitions.items()):
            if not self.storage.has_topic(name):
                continue
            end = self.storage.log(name, p).log_end_offset
            behind = max(0, state.source_end - end)
            lag_ms = 0 if behind == 0 else max(0, now - state.caught_up_ms)
            rows.append(
                PartitionFollowStatus(
                    name, p, state.source_start, state.source_end, end, behind, lag_ms, state.problem
                )
            )
        return rows

    def write_status(self) -> None:
        status = FollowStatus(
            self.config.source, self.clock.now_ms(), tuple(self.lag()), self.state, self.problem
        )
        try:
            write_follow_status(self.storage.path, status)
        except OSError as exc:
            log.warning("cannot write the mirror status: %s", exc)
        self._status_due = time.monotonic() + self.config.status_interval_ms / 1000

    def failed(self) -> dict[tuple[str, int], str]:
        return {k: s.failed for k, s in self.partitions.items() if s.failed}
