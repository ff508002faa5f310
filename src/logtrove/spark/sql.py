"""``logtrove sql``: Spark SQL over topics (as temporary views of the ``logtrove``
source) next to exported Parquet tables.

A topic becomes a view named after it with every character outside ``[A-Za-z0-9_]``
replaced by ``_`` (``access-log`` → ``access_log``). Temporary views are used because
``CREATE TABLE … USING`` passes no options to a Python data source in PySpark 4.3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logtrove.storage import Storage


def view_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def register_topics(
    spark: Any, *, path: str | None = None, bootstrap: str | None = None, client_config: str | None = None
) -> dict[str, str]:
    """A view per topic; returns view name → topic. With ``bootstrap``, ``client_config``
    names a TLS / SASL settings file (the source's ``clientConfig`` option)."""
    if path is not None:
        with Storage.open(path, read_only=True) as storage:
            topics = [t.name for t in storage.topics() if not t.internal]
        location = {"path": path}
    else:
        from logtrove.spark.options import parse_security
        from logtrove.spark.remote import RemoteCatalog

        location = {"bootstrap": str(bootstrap)}
        if client_config:
            location["clientConfig"] = client_config
        catalog = RemoteCatalog(str(bootstrap), security=parse_security(location))
        try:
            topics = [t for t in catalog.topic_names() if not t.startswith("__")]
        finally:
            catalog.close()
    views = {}
    for topic in topics:
        reader = spark.read.format("logtrove").options(**location, subscribe=topic)
        reader.load().createOrReplaceTempView(view_name(topic))
        views[view_name(topic)] = topic
    return views


def register_tables(spark: Any, tables: Mapping[str, Path]) -> None:
    """A view per exported Parquet table (name → directory)."""
    for name, directory in tables.items():
        if not directory.is_dir():
            raise ValueError(f"table {name}: {directory} is not a directory")
        spark.read.parquet(str(directory)).createOrReplaceTempView(view_name(name))


def run_sql(spark: Any, query: str, limit: int | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of a query (``limit`` caps the rows fetched)."""
    df = spark.sql(query)
    rows = df.take(limit) if limit is not None else df.collect()
    return list(df.columns), [tuple(r) for r in rows]
