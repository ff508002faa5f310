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
    """Register the ``logtrove`` data source with a SparkSession, and make Spark's Python
    workers run this interpreter unless ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``)
    names one (see :func:`use_this_interpreter`)."""
    require_pyspark()
    from logtrove.spark.source import LogtroveDataSource

    use_this_interpreter(spark)
    spark.dataSource.register(LogtroveDataSource)


def use_this_interpreter(spark: Any) -> None:
    """Point Spark's Python workers at ``sys.executable`` when nothing else names one.

    Spark starts its workers (the ones that plan and read a Python data source) with
    ``PYSPARK_PYTHON``, else ``spark.pyspark.python``, else ``python3`` from ``PATH``. A
    script run as ``.venv/bin/python job.py`` without activating the venv would get the
    system's ``python3``, which has no logtrove. The session's live configuration (read
    when a worker starts) and the interpreter PySpark records with each Python function
    are both set, so this works after the session exists. Spark Connect sessions have no
    context here and are left alone.
    """
    import os
    import sys

    context = getattr(spark, "_sc", None)
    conf = getattr(context, "_conf", None)
    if context is None or conf is None or os.environ.get("PYSPARK_PYTHON"):
        return
    if conf.contains("spark.pyspark.python"):
        return
    conf.set("spark.pyspark.python", sys.executable)
    if not os.environ.get("PYSPARK_DRIVER_PYTHON") and not conf.contains("spark.pyspark.driver.python"):
        conf.set("spark.pyspark.driver.python", sys.executable)
    context.pythonExec = sys.executable


__all__ = ["INSTALL_HINT", "SparkNotInstalledError", "register", "require_pyspark", "use_this_interpreter"]
