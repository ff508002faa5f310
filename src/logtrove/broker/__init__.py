"""The Kafka-compatible broker (DESIGN.md §2): an asyncio server over storage.

:class:`Broker` serves one data directory; :func:`run` runs it until SIGINT / SIGTERM.
One module per API family:

* :mod:`.topics`: Metadata, CreateTopics, DeleteTopics, CreatePartitions
* :mod:`.produce`: Produce, InitProducerId (:mod:`logtrove.wire.produce` decodes Produce
  without copying the records)
* :mod:`.fetch`: Fetch (long polls; record bytes sent as they lie in the segment)
* :mod:`.offsets`: ListOffsets, DeleteRecords
* :mod:`.groups_api`: FindCoordinator and the group APIs, over :mod:`logtrove.groups`
* :mod:`.configs_api`: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (the
  broker's own settings are :class:`BrokerConfig`, :mod:`.config`)
* :mod:`.apis`: ApiVersions and the table of what is served
* :mod:`.listeners`: listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and TLS
* :mod:`.sasl_api`: SaslHandshake, SaslAuthenticate, over the session states and
  mechanisms of :mod:`.sasl` (PLAIN, SCRAM-SHA-256/512)
* :mod:`.users_api`: Describe/AlterUserScramCredentials over the SCRAM users of
  :mod:`logtrove.acl.credentials`

Every handler is ``async def handle_x(broker: BrokerContext, request: Request) -> Reply``:
:mod:`.context` is what handlers see of the broker (storage, coordinators, ACLs, the
listeners' endpoints, the wake-up of long polls) and :mod:`.requests` what they take and
give. :mod:`.connections` reads frames, decodes them and frames the replies;
:mod:`.server` owns the listeners, the maintenance thread, the cleaner and the indexer;
:mod:`.config` holds :class:`BrokerConfig`. :mod:`logtrove.wire` has the framing, the API
keys and the dict-to-kio glue; :mod:`.errors` maps storage errors to Kafka error codes.
The clients are in :mod:`logtrove.client`.
"""

from logtrove.broker.server import Broker, BrokerConfig, run

__all__ = ["Broker", "BrokerConfig", "run"]
