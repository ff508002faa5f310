"""The Kafka-compatible broker (DESIGN.md §2): an asyncio server over storage.

:class:`Broker` serves one data directory; :func:`run` runs it until SIGINT / SIGTERM.
One module per API family: :mod:`.topics` (Metadata, CreateTopics, DeleteTopics,
CreatePartitions),
:mod:`.produce` (Produce, InitProducerId), :mod:`.fetch`, :mod:`.offsets` (ListOffsets,
DeleteRecords), :mod:`.groups_api` (the group APIs), :mod:`.configs`, and :mod:`.apis`
(ApiVersions and the table of what is served).
"""

from logtrove.broker.server import Broker, BrokerConfig, run

__all__ = ["Broker", "BrokerConfig", "run"]
