"""The data pipeline on Spark (DESIGN.md §6): the ``logtrove`` PySpark data source,
Parquet export, SQL over topics, and the compaction key → latest-offset job.

pyspark lives in the ``spark`` extra (``pip install 'logtrove[spark]'``) and is imported
only when a function here needs it, so ``import logtrove`` works without it.

Usage::

    from logtrove.spark import register
    register(spark)
    df = (spark.read.format("logtrove")
          .option("path", "./data").option("subscribe", "access_log").load())
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "PySpark is not installed: pip install 'logtrove[spark]'"


class SparkNotInstalledError(ImportError):
    """pyspark (the ``spark`` extra) is missing."""


def require_pyspark() -> None:
    """Raise :class:`SparkNotInstalledError` with the install command if pyspark is missing."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SparkNotInstalledError(INSTALL_HINT) from exc


def register(spark: Any) -> None:
    """Register the ``logtrove`` data source with a SparkSession."""
    require_pyspark()
    from logtrove.spark.source import LogtroveDataSource

    spark.dataSource.register(LogtroveDataSource)


__all__ = ["INSTALL_HINT", "SparkNotInstalledError", "register", "require_pyspark"]
