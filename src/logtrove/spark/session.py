"""A local SparkSession for the CLI commands (``logtrove export`` / ``logtrove sql``),
configured for a small machine: loopback only, no UI, few shuffle partitions, logs at
error level. On a cluster, call :func:`logtrove.spark.register` on your own session."""

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
"""


def local_session(app_name: str = "logtrove", *, master: str = "local[*]") -> Any:
    """A local SparkSession with the ``logtrove`` source registered."""
    from pyspark.sql import SparkSession

    from logtrove.spark import register

    conf_dir = Path(tempfile.gettempdir()) / "logtrove-spark"
    conf_dir.mkdir(exist_ok=True)
    log4j = conf_dir / "log4j2.properties"
    log4j.write_text(LOG4J2)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    java_opts = f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j2.configurationFile=file:{log4j}"
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
