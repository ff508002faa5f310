"""A read-only query engine following a writer answers exactly what an engine on a fresh
read-only opening answers, after every step of the writer: appends (the steady state, in
which only the active segments grow and are extended in place without listing the
directories), rolls, cleaner swaps, truncations, topic config changes and new topics
(which take the full refresh)."""

from __future__ import annotations

import random
from pathlib import Path

from logtrove.query import KeyQuery, OffsetQuery, QueryEngine, TimeQuery
from logtrove.query.model import Message
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.truncate import truncate_partition
from logtrove.testing import FakeClock

NOW = 1_700_000_000_000
TOPIC = "t"
PARTITIONS = 2


def batch(rng: random.Random, count: int) -> bytes:
    return build_batch(
        [
            NewRecord(
                rng.randbytes(rng.randint(0, 40)), b"k%d" % rng.randint(0, 5), (), NOW + rng.randint(0, 9_000)
            )
            for _ in range(count)
        ]
    )


def answers(engine: QueryEngine, rng: random.Random) -> object:
    def seen(query: object) -> object:
        try:
            found: list[Message] = engine.run(query).all()[0]  # type: ignore[arg-type]
        except Exception as e:  # an offset past the end: the same error, the same message
            return type(e).__name__, str(e)
        return [(m.partition, m.offset, m.value) for m in found]

    keys = [seen(KeyQuery(TOPIC, b"k%d" % k)) for k in range(6)]
    times = [seen(TimeQuery(TOPIC, NOW + t)) for t in (0, rng.randint(0, 9_000), 9_000)]
    offsets = [seen(OffsetQuery(TOPIC, p, rng.randint(0, 200))) for p in range(PARTITIONS)]
    return keys, times, offsets


def test_a_following_engine_answers_what_a_fresh_opening_answers(tmp_path: Path) -> None:
    rng = random.Random(5)
    storage = Storage.open(tmp_path, clock=FakeClock())
    storage.create_topic(
        TOPIC,
        PARTITIONS,
        {"segment.bytes": "2048", "cleanup.policy": "compact", "index.interval.bytes": "200"},
    )
    following = QueryEngine(Storage.open(tmp_path, read_only=True))
    cleaner = Cleaner(storage, map_budget_bytes=24 * 64)
    try:
        for step in range(80):
            partition = rng.randrange(PARTITIONS)
            log = storage.log(TOPIC, partition)
            action = rng.random()
            if action < 0.06 and log.log_end_offset > 3:
                truncate_partition(
                    storage, TOPIC, partition, rng.randint(log.log_start_offset, log.log_end_offset - 1)
                )
            elif action < 0.12:
                log.roll()
                cleaner.clean(log)
            elif action < 0.15:
                storage.alter_topic_configs(TOPIC, {"message.id.header": f"id{step}"})
            elif action < 0.17:
                storage.create_topic(f"other{step}", 1)
            else:
                for _ in range(rng.randint(1, 4)):
                    log.append(batch(rng, rng.randint(1, 4)))
            if rng.random() < 0.5:
                log.flush()
            fresh_storage = Storage.open(tmp_path, read_only=True)
            try:
                check = random.Random(step)
                expected = answers(QueryEngine(fresh_storage), check)
            finally:
                fresh_storage.close()
            assert answers(following, random.Random(step)) == expected, f"step {step}"
    finally:
        following.storage.close()
        storage.close()
