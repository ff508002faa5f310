"""A local SparkSession for the CLI commands (``logtrove export`` / ``logtrove sql``),
configured for a small machine: loopback only, no UI, few shuffle partitions, logs at
error level (none from the streaming engine: a failed export's stack trace would bury
the one line the CLI prints). On a cluster, call :func:`logtrove.spark.register` on your own session."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.stream.name = org.apache.spark.sql.execution.streaming
logger.stream.level = off
"""


def java_options(full_jit: bool) -> str:
    """The JVM's options: serial GC, our log4j2 file, and C1 only (``TieredStopAtLevel=1``)
    unless ``full_jit``.

    C1 alone starts a session and runs a small query a second or more sooner; C2 runs
    long jobs several times faster (measured on 1 M JSON records, local[2]: parsing and
    writing them to Parquet by date and hour 33.8 s under C1, 11.4 s with C2; a plain
    Parquet write 15.0 s against 2.6 s). ``logtrove sql`` keeps C1, ``logtrove export``
    asks for C2.
    """
    conf_dir = Path(tempfile.gettempdir()) / "logtrove-spark"
    conf_dir.mkdir(exist_ok=True)
    log4j = conf_dir / "log4j2.properties"
    log4j.write_text(LOG4J2)
    quick = "" if full_jit else "-XX:TieredStopAtLevel=1 "
    return f"{quick}-XX:+UseSerialGC -Dlog4j2.configurationFile=file:{log4j}"


def local_session(app_name: str = "logtrove", *, master: str = "local[*]", full_jit: bool = False) -> Any:
    """A local SparkSession with the ``logtrove`` source registered; ``full_jit`` for
    long jobs (see :func:`java_options`). The JVM's options apply to the first session of
    the process (and not at all if ``PYSPARK_SUBMIT_ARGS`` is set)."""
    from pyspark.sql import SparkSession

    from logtrove.spark import register

    java_opts = java_options(full_jit)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The driver JVM starts before the builder's config applies: its options go on the command line.
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f'--driver-java-options "{java_opts}" pyspark-shell')
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # the CLI prints one line itself
        logging.getLogger(name).setLevel(logging.CRITICAL)
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
