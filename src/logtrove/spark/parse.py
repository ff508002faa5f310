"""Turning record values into columns, as Spark expressions (they run in the JVM, not
per record in Python).

* ``raw`` — the value as a UTF-8 string column ``value``.
* ``json`` — the fields of a JSON object, with a schema given as DDL or inferred from a
  sample of the topic. Fields whose names clash with the record columns get a ``json_``
  prefix. Unparseable values give null fields (the ``value`` column keeps the text).
* ``combined-log`` — the nginx / Apache "combined" format::

    66.249.65.159 - - [06/Nov/2014:19:10:38 +0600] "GET /news/53f8d.html HTTP/1.1" 404 177 "-" "Mozilla/5.0 (… Googlebot/2.1 …)"
    └ remote_addr ┘ │ └ remote_user   └ time_local ┘  └ method/path/protocol ┘     status bytes referer  user_agent
                    ident

  ``time_local`` becomes a UTC timestamp, ``status`` an int, ``bytes`` a long (``-``
  is null); a line that does not match gives nulls and keeps its ``value``.
"""

from __future__ import annotations

from typing import Any

PARSERS = ("raw", "json", "combined-log")

COMBINED_LOG = (
    r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "((?:[^"\\]|\\.)*)" (\d{3}) (\d+|-)'
    r'(?: "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)")?'
)
_REQUEST = r"^(\S+) (\S+)(?: (\S+))?$"
COMBINED_COLUMNS = (
    "remote_addr",
    "ident",
    "remote_user",
    "time_local",
    "method",
    "path",
    "protocol",
    "status",
    "bytes",
    "referer",
    "user_agent",
)
RECORD_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "id", "tag", "value")


def _dash_null(col: Any) -> Any:
    from pyspark.sql import functions as sf

    return sf.when((col == "-") | (col == ""), sf.lit(None)).otherwise(col)


def combined_log_columns(text: Any) -> list[Any]:
    """The combined-log columns extracted from a string column ``text``."""
    from pyspark.sql import functions as sf

    def group(i: int) -> Any:
        return sf.regexp_extract(text, COMBINED_LOG, i)

    matched = text.rlike(COMBINED_LOG)

    def field(i: int) -> Any:
        return sf.when(matched, _dash_null(group(i)))

    request = group(5)
    return [
        field(1).alias("remote_addr"),
        field(2).alias("ident"),
        field(3).alias("remote_user"),
        sf.when(matched, sf.try_to_timestamp(group(4), sf.lit("dd/MMM/yyyy:HH:mm:ss Z"))).alias("time_local"),
        sf.when(matched, _dash_null(sf.regexp_extract(request, _REQUEST, 1))).alias("method"),
        sf.when(matched, _dash_null(sf.regexp_extract(request, _REQUEST, 2))).alias("path"),
        sf.when(matched, _dash_null(sf.regexp_extract(request, _REQUEST, 3))).alias("protocol"),
        sf.when(matched, group(6).cast("int")).alias("status"),
        sf.when(matched, _dash_null(group(7)).cast("long")).alias("bytes"),
        field(8).alias("referer"),
        field(9).alias("user_agent"),
    ]


def infer_json_schema(spark: Any, sample: Any) -> Any:
    """A StructType inferred from the ``value`` strings of a sample DataFrame."""
    texts = [r.value for r in sample.select("value").collect() if r.value]
    if not texts:
        raise ValueError("cannot infer a JSON schema: the topic has no values in range; pass --schema")
    return spark.read.json(spark.sparkContext.parallelize(texts)).schema


def parse_values(df: Any, how: str, json_schema: Any = None) -> Any:
    """Record columns plus parsed columns, from a DataFrame of the ``logtrove`` source."""
    from pyspark.sql import functions as sf

    if how not in PARSERS:
        raise ValueError(f"unknown parser {how!r}: use one of {', '.join(PARSERS)}")
    base = df.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        sf.col("key").cast("string").alias("key"),
        "id",
        "tag",
        sf.col("value").cast("string").alias("value"),
    )
    if how == "raw":
        return base
    if how == "combined-log":
        return base.select("*", *combined_log_columns(sf.col("value")))
    if json_schema is None:
        raise ValueError("json parsing needs a schema (given or inferred)")
    parsed = base.withColumn("_json", sf.from_json("value", json_schema))
    fields = [
        sf.col("_json").getField(f.name).alias(f"json_{f.name}" if f.name in RECORD_COLUMNS else f.name)
        for f in json_schema.fields
    ]
    return parsed.select(*RECORD_COLUMNS, *fields)
