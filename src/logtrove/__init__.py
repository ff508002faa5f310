"""logtrove: a Kafka-compatible message log in which every message can be found.

Subpackages, with dependencies pointing one way (checked by import-linter)::

    clock <- (records, wire) <- storage <- (query, groups, acl) <- (txn, client)
          <- (broker, http, spark) <- mirror <- cli <- testing

``records`` is the Kafka RecordBatch v2 codec, ``wire`` the Kafka protocol without I/O,
``storage`` the segmented partition log, ``client`` the clients of a running broker.
README's code map has a line for each package.
"""

__version__ = "0.1.0"
