"""One SparkSession for every Spark test (starting one costs 5-13 s on this machine),
with the settings of REFERENCE.md: loopback only, no UI, two shuffle partitions, a JVM
tuned for short runs, and logs at error level.

Under parallel workers every test that uses the session runs on one worker (see
``tests/conftest.py``), so one JVM (about 1 GB) starts, not one per worker."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from tests.broker.secured import secured  # noqa: F401  (a broker with SASL and TLS listeners)

LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from logtrove.spark import register

    conf_dir = tmp_path_factory.mktemp("spark-conf")
    log4j = conf_dir / "log4j2.properties"
    log4j.write_text(LOG4J2)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    java_opts = f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j2.configurationFile=file:{log4j}"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("logtrove-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
