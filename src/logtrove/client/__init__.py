"""Clients of a running broker (logtrove's, or any Kafka broker serving the versions
used), with no command-line code inside: the CLI's ``--bootstrap`` mode, the mirror and
Python programs use them alike.

* :mod:`.kafka`: :class:`KafkaClient`, one blocking connection, one request at a time
* :mod:`.security`: TLS and SASL (:class:`ClientSecurity`, librdkafka's property names)
* :mod:`.admin`: topics: Metadata, ListOffsets, Create/DeleteTopics, CreatePartitions,
  Describe/IncrementalAlterConfigs
* :mod:`.records`: Fetch decoded into records (read_committed as Kafka's consumer:
  :class:`AbortedFilter`), and Produce of record batches
* :mod:`.groups`: ListGroups, OffsetFetch/Commit, tag subscriptions
* :mod:`.lag`: consumer lag through the broker, by the local lag's formula
* :mod:`.http`: the broker's HTTP API (tag counts and filtered records)
* :mod:`.tags`: :class:`RemoteTagSource`, tag-filtered consumption of a broker
* :mod:`.local`: the broker's data directory read beside it, when it is on this machine
* :mod:`.errors`: the exceptions, drawn as a tree
"""

from logtrove.client.admin import cluster_id, list_offsets, topic_partitions
from logtrove.client.errors import ClientConfigError, HttpApiError, KafkaProtocolError, check
from logtrove.client.groups import BrokerCommitter
from logtrove.client.http import HttpApi, HttpTagCounter, http_url
from logtrove.client.kafka import KafkaClient, parse_bootstrap
from logtrove.client.lag import TagCounter, remote_lag
from logtrove.client.local import StorageTagCounter, open_brokers_data
from logtrove.client.records import AbortedFilter
from logtrove.client.security import ClientSecurity
from logtrove.client.tags import RemoteTagSource

__all__ = [
    "AbortedFilter",
    "BrokerCommitter",
    "ClientConfigError",
    "ClientSecurity",
    "HttpApi",
    "HttpApiError",
    "HttpTagCounter",
    "KafkaClient",
    "KafkaProtocolError",
    "RemoteTagSource",
    "StorageTagCounter",
    "TagCounter",
    "check",
    "cluster_id",
    "http_url",
    "list_offsets",
    "open_brokers_data",
    "parse_bootstrap",
    "remote_lag",
    "topic_partitions",
]
