"""The Kafka wire protocol, shared by the broker and the clients, with no I/O.

* :mod:`.api_keys`: :class:`ApiKey`, every API key by Kafka's name
* :mod:`.framing`: the size prefix, request and response headers, varints
* :mod:`.entities`: version-independent dicts to kio's dataclasses (:func:`build`)
* :mod:`.requests`: requests to bytes and responses back, and the bodies clients send
* :mod:`.produce`: the Produce request decoder (records as views of the frame) and the
  response encoder, the broker's hottest path
* :mod:`.fetch`: the Fetch response encoder, around record bytes that are not copied
* :mod:`.security`: Kafka's security protocols (PLAINTEXT, SSL, SASL_*)

kio does the encoding and decoding of everything else; the hand-written codecs exist
where kio's copies cost the broker most of its CPU.
"""

from logtrove.wire.api_keys import ApiKey
from logtrove.wire.entities import ZERO_UUID, build
from logtrove.wire.fetch import AbortedRange, FetchedPartition, encode_fetch_response
from logtrove.wire.framing import SIZE, encode, ms, response_header, response_header_size, uvarint
from logtrove.wire.requests import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TOPIC_RESOURCE,
    ResponseError,
    create_topics_body,
    decode_response,
    describe_configs_body,
    encode_request,
    fetch_body,
    find_coordinator_body,
    list_offsets_body,
    metadata_body,
    offset_fetch_body,
    offset_for_leader_epoch_body,
    produce_body,
)
from logtrove.wire.security import SecurityProtocol

__all__ = [
    "EARLIEST",
    "LATEST",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "SIZE",
    "TOPIC_RESOURCE",
    "ZERO_UUID",
    "AbortedRange",
    "ApiKey",
    "FetchedPartition",
    "ResponseError",
    "SecurityProtocol",
    "build",
    "create_topics_body",
    "decode_response",
    "describe_configs_body",
    "encode",
    "encode_fetch_response",
    "encode_request",
    "fetch_body",
    "find_coordinator_body",
    "list_offsets_body",
    "metadata_body",
    "ms",
    "offset_fetch_body",
    "offset_for_leader_epoch_body",
    "produce_body",
    "response_header",
    "response_header_size",
    "uvarint",
]
