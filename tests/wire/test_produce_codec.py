"""The zero-copy Produce decoder agrees with kio on every version it serves, and refuses
malformed input instead of guessing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from logtrove.wire import ApiKey, encode_request
from logtrove.wire.produce import MalformedRequestError, decode_produce_request

names = st.text(alphabet="abcxyz.-_", min_size=1, max_size=12)
partitions = st.lists(
    st.fixed_dictionaries(
        {"index": st.integers(0, 2**31 - 1), "records": st.none() | st.binary(max_size=300)}
    ),
    max_size=3,
)
bodies = st.fixed_dictionaries(
    {
        "transactional_id": st.none() | names,
        "acks": st.sampled_from([-1, 0, 1]),
        "timeout": st.integers(0, 2**31 - 1),
        "topic_data": st.lists(
            st.fixed_dictionaries({"name": names, "partition_data": partitions}), max_size=3
        ),
    }
)


@settings(max_examples=200, deadline=None)
@given(version=st.integers(3, 11), body=bodies)
def test_decoder_agrees_with_kio(version: int, body: dict[str, object]) -> None:
    frame = encode_request(ApiKey.PRODUCE, version, 1, "wire-test", body)
    ours = decode_produce_request(frame)
    cls = load_request_schema(ApiKey.PRODUCE, version)
    header, used = entity_reader(cls.__header_schema__)(frame, 0)
    theirs, _ = entity_reader(cls)(frame, used)
    assert ours.client_id == header.client_id
    assert (ours.transactional_id, ours.acks) == (theirs.transactional_id, theirs.acks)
    assert [
        (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
        for t in ours.topic_data
    ] == [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in theirs.topic_data]


@settings(max_examples=200, deadline=None)
@given(version=st.integers(3, 11), body=bodies, cut=st.integers(1, 50))
def test_truncated_requests_are_refused(version: int, body: dict[str, object], cut: int) -> None:
    frame = encode_request(ApiKey.PRODUCE, version, 1, "wire-test", body)
    with pytest.raises(MalformedRequestError):
        decode_produce_request(frame[: max(len(frame) - cut, 0)])
    with pytest.raises(MalformedRequestError):
        decode_produce_request(frame + b"\x00")


@pytest.mark.parametrize("version", range(3, 12))
def test_response_encoder_decodes_with_kio(version: int) -> None:
    from logtrove.wire.produce import PartitionProduceResult, encode_produce_response

    results = [
        (
            "orders",
            [PartitionProduceResult(0, 0, 42, -1, 7), PartitionProduceResult(3, 2, -1, -1, -1, "bad crc")],
        ),
        ("é-topic", [PartitionProduceResult(1, 0, 5, 1_700_000_000_000, 0)]),
    ]
    body = encode_produce_response(version, results)
    cls = load_response_schema(ApiKey.PRODUCE, version)
    decoded, size = entity_reader(cls)(body, 0)
    assert size == len(body)
    got = [
        (t.name, [(p.index, int(p.error_code), p.base_offset) for p in t.partition_responses])
        for t in decoded.responses
    ]
    assert got == [("orders", [(0, 0, 42), (3, 2, -1)]), ("é-topic", [(1, 0, 5)])]
    second = decoded.responses[1].partition_responses[0]
    assert second.log_append_time is not None and second.log_append_time.timestamp() == 1_700_000_000
    if version >= 5:
        assert decoded.responses[0].partition_responses[0].log_start_offset == 7
    if version >= 8:
        assert decoded.responses[0].partition_responses[1].error_message == "bad crc"
