"""logtrove: a Kafka-compatible message log in which every message can be found.

Subpackages, with dependencies pointing one way (checked by import-linter)::

    records  <-  storage  <-  (query, groups)  <-  (broker, http, spark, cli)

``records`` is the Kafka RecordBatch v2 codec, ``storage`` the segmented partition log.
"""

__version__ = "0.1.0"
