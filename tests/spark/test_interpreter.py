"""A PySpark script run with the venv's interpreter by its path, the venv not activated:
``register()`` makes Spark's Python workers run that interpreter, so they import logtrove
(Spark would otherwise start ``python3`` from ``PATH``, which has no logtrove)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.spark.helpers import BASE_TS, make_topic, stored

from logtrove.records import NewRecord

JOB = """
import sys
from pyspark.sql import SparkSession
from logtrove.spark import register

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
register(spark)
read = spark.read.format("logtrove").option("path", sys.argv[1]).option("subscribe", "orders").load()
print("read", read.count())
rows = spark.createDataFrame([("k", "written by the job")], "key string, value string")
rows.write.format("logtrove").option("path", sys.argv[1]).option("topic", "orders").mode("append").save()
spark.stop()
"""


@pytest.mark.slow  # a JVM of its own: 30-90 s on a shared machine
def test_a_script_run_by_the_venvs_python_without_activating_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "orders", [NewRecord(b"a", timestamp=BASE_TS), NewRecord(b"b", timestamp=BASE_TS)])
    (tmp_path / "job.py").write_text(JOB)
    # no VIRTUAL_ENV, no PYSPARK_PYTHON, and a PATH whose python3 is not the venv's
    env = {"HOME": str(Path.home()), "PATH": "/usr/bin:/bin", "SPARK_LOCAL_IP": "127.0.0.1"}
    assert sys.prefix != sys.base_prefix, "the tests run in the project's venv"
    done = subprocess.run(
        [sys.executable, str(tmp_path / "job.py"), str(data)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "read 2" in done.stdout
    assert [value for _, _, value in stored(data, "orders")] == [b"a", b"b", b"written by the job"]
