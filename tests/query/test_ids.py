"""Client message IDs (time-ordered, unique) and broker position IDs."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from logtrove.query import MessageIdGenerator, decode_position_id, id_time, position_id
from logtrove.testing import FakeClock


def test_ids_are_unique_and_sort_by_time_even_within_a_millisecond() -> None:
    clock = FakeClock(1_763_800_000_000)
    gen = MessageIdGenerator(7, clock=clock)
    ids = []
    for i in range(20_000):
        ids.append(gen.next_id())
        if i % 5_000 == 0:
            clock.advance(1)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def test_id_time_reads_back_the_clock() -> None:
    clock = FakeClock(1_763_800_123_456)
    mid = MessageIdGenerator(clock=clock).next_id()
    assert id_time(mid) == 1_763_800_123_456
    assert id_time("not-an-id") is None
    assert id_time("order-4711-xy") is None  # 13 characters, but '-' is not base 32


def test_ids_keep_increasing_when_the_clock_steps_back() -> None:
    clock = FakeClock(1_763_800_000_000)
    gen = MessageIdGenerator(1, clock=clock)
    first = gen.next_id()
    clock.advance(-60_000)
    assert gen.next_id() > first


def test_ids_are_unique_across_threads() -> None:
    gen = MessageIdGenerator(2)
    out: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        mine = [gen.next_id() for _ in range(2_000)]
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == 8_000


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=249),
    st.integers(0, 10_000),
    st.integers(0, 2**63 - 1),
)
def test_position_ids_round_trip(topic: str, partition: int, offset: int) -> None:
    assert decode_position_id(position_id(topic, partition, offset)) == (topic, partition, offset)


@given(st.text(max_size=60))
def test_random_text_is_not_a_position_id(text: str) -> None:
    decoded = decode_position_id(text)
    assert decoded is None or position_id(*decoded) == text
