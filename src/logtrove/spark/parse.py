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

# The quoted fields' loops are possessive (``*+``): a quoted field can only end at its first
# unescaped quote, so giving back characters never finds another match, and Java's regex
# engine, which recurses per iteration of an alternation, runs it about 3x faster so.
COMBINED_LOG = (
    r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "((?:[^"\\]|\\.)*+)" (\d{3}) (\d+|-)'
    r'(?: "((?:[^"\\]|\\.)*+)" "((?:[^"\\]|\\.)*+)")?'
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


_SEP = "\x00"
_GROUPS = 9
# the groups of one match joined by NUL: the pattern, then the rest of the value, replaced
_JOINED = _SEP.join(f"${i}" for i in range(1, _GROUPS + 1))


def _combined_groups(text: Any) -> Any:
    """``text`` plus ``_matched`` and ``_groups`` (the 9 groups of :data:`COMBINED_LOG`, or
    null when the value does not match), with the pattern run twice per value.

    One ``regexp_replace`` turns a matching value into its groups joined by NUL and
    ``split`` cuts them apart; a value whose groups themselves hold a NUL gives more than
    9 pieces and falls back to one ``regexp_extract`` per group. Each step is its own
    projection, and since every one of ``_matched`` / ``_pieces`` is used twice, Spark's
    optimizer does not inline them (it never duplicates an expensive expression): written
    as one ``regexp_extract`` per use, Spark ran the pattern about 35 times per value.
    """
    from pyspark.sql import functions as sf

    df = text.select("*", sf.col("value").rlike(COMBINED_LOG).alias("_matched"))
    replaced = sf.regexp_replace("value", COMBINED_LOG + "(?s:.*)", _JOINED)
    df = df.select("*", sf.when(sf.col("_matched"), sf.split(replaced, _SEP)).alias("_pieces"))
    each = sf.array(*(sf.regexp_extract("value", COMBINED_LOG, i) for i in range(1, _GROUPS + 1)))
    groups = sf.when(sf.size("_pieces") == _GROUPS, sf.col("_pieces")).when(sf.col("_matched"), each)
    df = df.select("*", groups.alias("_groups")).drop("_pieces")
    request = sf.col("_groups")[4]
    return df.select("*", sf.when(request.rlike(_REQUEST), sf.split(request, " ")).alias("_request"))


def combined_log_columns() -> list[Any]:
    """The combined-log columns, over a DataFrame made by :func:`_combined_groups`."""
    from pyspark.sql import functions as sf

    groups, request = sf.col("_groups"), sf.col("_request")

    def field(i: int) -> Any:
        return _dash_null(groups[i - 1])

    def part(i: int) -> Any:  # the request's method, path, protocol; null past its 2 or 3 words
        return _dash_null(sf.try_element_at(request, sf.lit(i)))

    return [
        field(1).alias("remote_addr"),
        field(2).alias("ident"),
        field(3).alias("remote_user"),
        sf.try_to_timestamp(groups[3], sf.lit("dd/MMM/yyyy:HH:mm:ss Z")).alias("time_local"),
        part(1).alias("method"),
        part(2).alias("path"),
        part(3).alias("protocol"),
        groups[5].cast("int").alias("status"),
        _dash_null(groups[6]).cast("long").alias("bytes"),
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
        return _combined_groups(base).select(*RECORD_COLUMNS, *combined_log_columns())
    if json_schema is None:
        raise ValueError("json parsing needs a schema (given or inferred)")
    parsed = base.withColumn("_json", sf.from_json("value", json_schema))
    fields = [
        sf.col("_json").getField(f.name).alias(f"json_{f.name}" if f.name in RECORD_COLUMNS else f.name)
        for f in json_schema.fields
    ]
    return parsed.select(*RECORD_COLUMNS, *fields)
