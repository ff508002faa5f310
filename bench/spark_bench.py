"""Spark benchmark: the ``logtrove`` data source next to the same data in Parquet, and a
key lookup through the source's ``key`` option next to a full scan with a filter.

Workload: N records (100-byte JSON values, keys over N / 100 distinct values, headers id
and tag) in 2 partitions of 64 MiB segments; local[2] Spark on this 2-core machine. Full:
10 M records; ``BENCH_QUICK=1``: 200 k; ``SPARK_BENCH_RECORDS=N`` sets N.

* ``scan_source``: ``groupBy(partition).agg(count, sum(length(value)))`` over the topic
  through the data source (batches decoded into Arrow by the columnar decoder,
  :mod:`logtrove.records.columnar`, on the executors).
* ``export_json``: ``logtrove export --parse json`` of the topic (schema given) into a new
  table, in rows/s (Spark's ``from_json`` on the value column).
* ``export_combined_log``: ``logtrove export --parse combined-log`` of a second topic of
  N / 5 access-log lines (Spark's regex functions), in rows/s.
* ``scan_pruned``: the same aggregate through the source with a user schema of the two
  columns it uses (``.schema("partition int, value binary")``: the reader hands Spark only
  those; this checkout only, next to Parquet).
* ``remote_scan``: the full-scan aggregate through the source in remote mode, from a live
  ``logtrove serve`` over the same data directory (raw batches over the Kafka protocol,
  :mod:`logtrove.spark.rawfetch`).
* ``content_full_parse``: the query engine's content search for ``^zzz`` (anchored: the
  raw-batch prefilter cannot reject a batch, every batch is parsed; no record matches)
  over the topic, MB of batches per second (:mod:`logtrove.query.fullparse`).
* ``export``: the same rows written once to Parquet (plain batch write).
* ``scan_parquet``: the same aggregate over that Parquet copy; ``ratio`` is how many times
  faster Parquet is.
* ``key_lookup``: all records of one key, through the ``key`` option (the query
  engine's ``.keyidx`` lookup; the topic is indexed first, as a broker's indexer does
  while records arrive) and through ``WHERE key = …`` over a full scan.

``--writer`` runs only the writer's figures: ``df.write.format("logtrove")`` of
``SPARK_BENCH_WRITE_ROWS`` rows (default 1 M; quick: 200 k) that Spark generates (string
key over 10,000 values, 100-byte JSON value, timestamp, one ``id`` header) into a topic of
2 partitions, in direct mode (a fresh data directory) and in remote mode (a live
``logtrove serve``), and the same rows written to Parquet for reference; with
``BENCH_BASELINE_SRC`` the baseline's and this checkout's children alternate
``REPEAT_WRITER`` times each. Saves ``bench/results/spark_writer.json``.

``BENCH_BASELINE_SRC=DIR`` (the ``src/`` of an earlier checkout, compiled parts built in
place) also measures ``scan_source``, both exports, ``remote_scan`` and
``content_full_parse`` with that code, on the same data (and the same broker) in the same
run: child processes with ``PYTHONPATH=DIR`` or this checkout's ``src``, each
with its own Spark session, run alternately before this process starts its own (the
machine is shared: alternating gives both sides the same load).

Each figure is the best of ``REPEAT`` runs after one warm-up query (Python workers
started); the JVM runs with the C2 JIT, as ``logtrove export`` has it
(:func:`logtrove.spark.session.java_options`). Prints and saves ``bench/results/spark.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import pick, save
from broker_bench import start_logtrove
from logtrove.records import NewRecord, build_batch
from logtrove.spark.export import ExportSpec, export_topic
from logtrove.spark.session import local_session
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer

RECORDS = int(os.environ.get("SPARK_BENCH_RECORDS") or pick(10_000_000, 200_000))
KEYS = max(RECORDS // 100, 1)
BASELINE_SRC = os.environ.get("BENCH_BASELINE_SRC")
ACCESS_RECORDS = max(RECORDS // 5, 1)
ACCESS_LINE = (
    '10.0.%d.%d - %s [14/Nov/2023:22:13:%02d +0000] "%s /api/items/%d?page=%d HTTP/1.1" %d %d '
    '"https://shop.example/list" "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"'
)
MEASURED = ("scan_s", "remote_s", "full_parse_mb_s", "export_json_s", "export_log_s")
JSON_SCHEMA = "n BIGINT, user STRING, path STRING, status INT, ms BIGINT, pad STRING"
PARTITIONS = 2
PER_BATCH = 500
REPEAT = 2
REPEAT_WRITER = 3
WRITER_NOTES = (
    "Before: one NewRecord per row (the Arrow batch through to_pydict, then build_batch;"
    " remote mode one confluent-kafka message per row). After: the columnar encoder"
    " (records/_encoder.c) turns the Arrow buffers into record batches; encoding and"
    " appending run about 2.4 M rows/s on one core outside Spark (0.4 s of the 1 M rows), the"
    " rest is Spark's (generating the rows, Arrow conversion, the Python workers): the writer"
    " is now about as fast as a Parquet write of the same rows in the same session. Direct"
    " mode trails remote mode because its tasks take turns on the data directory's lock."
)
WRITER_MEASURED = ("write_s", "remote_write_s", "parquet_write_s")
WRITE_ROWS = int(os.environ.get("SPARK_BENCH_WRITE_ROWS") or pick(1_000_000, 200_000))
BASE_TS = 1_700_000_000_000


def build(data: Path) -> float:
    """Write the topic; returns the seconds it took."""
    started = time.perf_counter()
    with Storage.open(data) as storage:
        storage.create_topic(
            "bench", PARTITIONS, {"segment.bytes": str(64 * 1024 * 1024), "retention.ms": "-1"}
        )  # records stamped in 2023: no retention (remote mode runs a broker over them)
        logs = [storage.log("bench", p) for p in range(PARTITIONS)]
        for start in range(0, RECORDS, PER_BATCH):
            batch = [
                NewRecord(
                    json_value(i),
                    b"key-%06d" % ((i * 7919) % KEYS),
                    (("id", b"m-%d" % i), ("tag", b"TagA" if i % 3 == 0 else b"TagB")),
                    BASE_TS + i,
                )
                for i in range(start, min(start + PER_BATCH, RECORDS))
            ]
            logs[(start // PER_BATCH) % PARTITIONS].append(build_batch(batch))
        storage.create_topic(
            "access", PARTITIONS, {"segment.bytes": str(64 * 1024 * 1024), "retention.ms": "-1"}
        )
        logs = [storage.log("access", p) for p in range(PARTITIONS)]
        for start in range(0, ACCESS_RECORDS, PER_BATCH):
            lines = [
                NewRecord(access_line(i), timestamp=BASE_TS + i)
                for i in range(start, min(start + PER_BATCH, ACCESS_RECORDS))
            ]
            logs[(start // PER_BATCH) % PARTITIONS].append(build_batch(lines))
    return time.perf_counter() - started


def access_line(i: int) -> bytes:
    """A combined-log line (some with a ``-`` user or size)."""
    user = "-" if i % 3 else f"user{i % 97}"
    size = i % 9000 if i % 11 else 0
    method = "GET" if i % 4 else "POST"
    line = ACCESS_LINE % (
        i % 256,
        i % 199,
        user,
        i % 60,
        method,
        i % 1000,
        i % 7,
        200 if i % 13 else 404,
        size,
    )
    return line.encode()


def json_value(i: int) -> bytes:
    """A 100-byte JSON object of the shape ``JSON_SCHEMA`` describes."""
    head = b'{"n":%d,"user":"u%04d","path":"/api/items/%d","status":%d,"ms":%d,"pad":"' % (
        i,
        i % 9973,
        i % 1000,
        200 if i % 10 else 404,
        i % 517,
    )
    return head + b"x" * (98 - len(head)) + b'"}'


def best(fn: Callable[[], Any], repeat: int = REPEAT) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def aggregate(df: Any) -> list[tuple[int, int, int]]:
    from pyspark.sql import functions as sf

    rows = (
        df.groupBy("partition").agg(sf.count("*").alias("n"), sf.sum(sf.length("value")).alias("b")).collect()
    )
    return sorted((r.partition, r.n, r.b) for r in rows)


def full_parse_mb_s(data: Path, repeat: int) -> float:
    """MB/s of the content search for ``^zzz`` over the ``bench`` topic (every batch parsed)."""
    from logtrove.query import ContentQuery, QueryEngine, Regex

    with Storage.open(data, read_only=True) as storage:
        engine = QueryEngine(storage)

        def search() -> int:
            found, completion = engine.run(
                ContentQuery("bench", Regex("^zzz"), limit=None, budget_bytes=None)
            ).all()
            assert not found
            return int(completion.stats.bytes_scanned)

        took, scanned = best(search, repeat)
    return scanned / took / 1e6


def measure(
    spark: Any,
    data: Path,
    scratch: Path,
    label: str,
    bootstrap: str,
    export: bool = True,
    repeat: int = REPEAT,
) -> dict[str, Any]:
    """The source's full-scan aggregate in direct and remote mode, the content search's
    full parse and (with ``export``) both exports, with the code this process imports."""
    source = spark.read.format("logtrove").options(path=str(data), subscribe="bench").load()
    spark.read.format("logtrove").options(
        path=str(data), subscribe="bench", endingOffsets="earliest"
    ).load().count()
    scan_s, agg = best(lambda: aggregate(source), repeat)
    assert sum(n for _, n, _ in agg) == RECORDS, agg
    print(f"[{label}] source scan {scan_s:.1f} s", flush=True)
    remote = spark.read.format("logtrove").options(bootstrap=bootstrap, subscribe="bench").load()
    remote_s, agg_remote = best(lambda: aggregate(remote), repeat)
    assert agg_remote == agg, (agg_remote, agg)
    print(f"[{label}] remote scan {remote_s:.1f} s", flush=True)
    mb_s = full_parse_mb_s(data, repeat)
    print(f"[{label}] content search, full parse {mb_s:.1f} MB/s", flush=True)
    figures = {
        "scan_s": scan_s,
        "agg": agg,
        "remote_s": remote_s,
        "full_parse_mb_s": mb_s,
        "decoder": decoder(),
    }
    if not export:
        return figures
    runs = iter(range(2 * repeat))

    def export_once(topic: str, parse: str) -> int:
        to = scratch / f"export-{label}-{next(runs)}"
        schema = JSON_SCHEMA if parse == "json" else None
        spec = ExportSpec(topic, to, path=str(data), parse=parse, json_schema=schema)
        return export_topic(spark, spec).rows_added

    export_s, rows = best(lambda: export_once("bench", "json"), repeat)
    assert rows == RECORDS, rows
    print(f"[{label}] export --parse json {export_s:.1f} s", flush=True)
    log_s, rows = best(lambda: export_once("access", "combined-log"), repeat)
    assert rows == ACCESS_RECORDS, rows
    print(f"[{label}] export --parse combined-log {log_s:.1f} s", flush=True)
    return {**figures, "export_json_s": export_s, "export_log_s": log_s}


def writer_frame(spark: Any, rows: int) -> Any:
    """``rows`` rows for the writer, generated by Spark: string key over 10,000 values, a
    100-byte JSON value, a timestamp and one ``id`` header."""
    return spark.range(rows, numPartitions=PARTITIONS).selectExpr(
        "concat('key-', id % 10000) AS key",
        """concat('{"n":', id, ',"pad":"', repeat('x', 85 - length(cast(id AS string))), '"}') AS value""",
        f"timestamp_millis({BASE_TS} + id) AS timestamp",
        "array(named_struct('key', 'id', 'value', cast(concat('m-', id) AS binary))) AS headers",
    )


def sink_end(data: Path) -> int:
    with Storage.open(data, read_only=True) as storage:
        return sum(storage.log("sink", p).log_end_offset for p in range(PARTITIONS))


def write_figures(spark: Any, scratch: Path, label: str, remote: Path, bootstrap: str) -> dict[str, float]:
    """Seconds to write ``WRITE_ROWS`` rows: direct mode into a fresh topic, remote mode
    through the broker at ``bootstrap`` (serving ``remote``), and the same rows to Parquet
    for reference; each after a warm-up write of 1,000 rows."""

    def direct(n: int, name: str) -> float:
        data = scratch / f"write-{label}-{name}"
        with Storage.open(data) as storage:
            storage.create_topic("sink", PARTITIONS, {"segment.bytes": str(64 * 1024 * 1024)})
        started = time.perf_counter()
        writer_frame(spark, n).write.format("logtrove").options(path=str(data), topic="sink").mode(
            "append"
        ).save()
        took = time.perf_counter() - started
        assert sink_end(data) == n, (sink_end(data), n)
        shutil.rmtree(data)
        return took

    def produced(n: int) -> float:
        before = sink_end(remote)
        started = time.perf_counter()
        writer_frame(spark, n).write.format("logtrove").options(bootstrap=bootstrap, topic="sink").mode(
            "append"
        ).save()
        took = time.perf_counter() - started
        assert sink_end(remote) - before == n, (sink_end(remote) - before, n)
        return took

    def parquet(n: int, name: str) -> float:
        to = scratch / f"parquet-{label}-{name}"
        started = time.perf_counter()
        writer_frame(spark, n).write.parquet(str(to))
        took = time.perf_counter() - started
        shutil.rmtree(to)
        return took

    direct(1000, "warm-up")
    produced(1000)
    parquet(1000, "warm-up")
    return {
        "write_s": direct(WRITE_ROWS, "timed"),
        "remote_write_s": produced(WRITE_ROWS),
        "parquet_write_s": parquet(WRITE_ROWS, "timed"),
    }


def writer_child(scratch: Path, label: str, remote: Path, bootstrap: str) -> None:
    spark = local_session(f"logtrove-bench-{label}", master="local[2]")
    try:
        figures = write_figures(spark, scratch, label, remote, bootstrap)
    finally:
        spark.stop()
    print(json.dumps({**figures, "writer": writer_kind()}))


def writer_kind() -> str:
    """Which encoding the writer uses with the code this process imports."""
    try:
        from logtrove.records.encoder import IMPLEMENTATION
    except ImportError:
        return "row-wise Python (NewRecord per row, build_batch)"
    return f"columnar encoder, {IMPLEMENTATION}"


def writer_main() -> None:
    """The writer's rows/s, baseline and this checkout alternating in child processes."""
    import logtrove

    this_src = str(Path(logtrove.__file__).resolve().parents[1])
    sides = (
        [("baseline", BASELINE_SRC), ("this checkout", this_src)]
        if BASELINE_SRC
        else [("this checkout", this_src)]
    )
    scratch = Path(tempfile.mkdtemp(prefix="logtrove-spark-writer-", dir=os.environ.get("BENCH_DIR")))
    remote = scratch / "remote"
    with Storage.open(remote) as storage:  # records stamped in 2023: no retention
        storage.create_topic(
            "sink", PARTITIONS, {"segment.bytes": str(64 * 1024 * 1024), "retention.ms": "-1"}
        )
    samples: dict[str, dict[str, list[float]]] = {side: {k: [] for k in WRITER_MEASURED} for side, _ in sides}
    kinds: dict[str, str] = {}
    load_start = os.getloadavg()[0]
    broker = start_logtrove(remote)
    try:
        for i in range(REPEAT_WRITER):
            for side, src in sides:
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--measure-writer",
                        str(scratch),
                        f"{side[:4]}-{i}",
                        str(remote),
                        broker.bootstrap,
                    ],
                    env={**os.environ, "PYTHONPATH": src},
                    check=True,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                got = json.loads(out.stdout.strip().splitlines()[-1])
                for key in WRITER_MEASURED:
                    samples[side][key].append(got[key])
                kinds[side] = got["writer"]
                print(f"[{side} {i}] " + ", ".join(f"{k} {got[k]:.1f}" for k in WRITER_MEASURED), flush=True)
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    vias = {
        "write_s": "direct mode",
        "remote_write_s": "remote mode (a live logtrove serve)",
        "parquet_write_s": "Parquet, same rows (reference)",
    }
    results = {
        "workload": {
            "rows": WRITE_ROWS,
            "columns": "key string, value string (100 B JSON), timestamp, headers (one id header)",
            "topic": f"{PARTITIONS} partitions",
            "spark": "local[2], C2 JIT, rows generated by spark.range",
            "runs": f"{REPEAT_WRITER} per side, alternating in child processes, best kept",
            "load_average_1min": f"{load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end",
        },
        "writer": [
            {
                "via": f"{vias[key]}, {side}: {kinds[side] if key != 'parquet_write_s' else 'Spark'}",
                "best_s": round(min(samples[side][key]), 2),
                "rows_per_s": round(WRITE_ROWS / min(samples[side][key])),
                "all_s": ", ".join(f"{t:.1f}" for t in samples[side][key]),
            }
            for key in WRITER_MEASURED
            for side, _ in sides
        ],
        "notes": WRITER_NOTES,
    }
    save("spark_writer", results)


def rates(base: dict[str, Any] | None, now: dict[str, Any], key: str, rows: int) -> list[dict[str, Any]]:
    """Rows of a results table: seconds and rows/s of ``key``, the baseline's first."""
    sides = [("baseline", base), ("this checkout", now)] if base else [("this checkout", now)]
    return [
        {"via": via, "seconds": round(got[key], 2), "rows_per_s": round(rows / got[key])}
        for via, got in sides
        if got is not None
    ]


def decoder() -> str:
    """Which decoder full scans use with the code this process imports."""
    try:
        from logtrove.records.columnar import IMPLEMENTATION
    except ImportError:
        return "row-wise Python (decode_batch_into)"
    return f"columnar, {IMPLEMENTATION}"


def in_child(src: str, data: Path, scratch: Path, label: str, bootstrap: str) -> dict[str, Any]:
    """:func:`measure` in a child process importing logtrove from ``src``."""
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(data), str(scratch), label, bootstrap],
        env={**os.environ, "PYTHONPATH": src},
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    *progress, last = out.stdout.strip().splitlines()
    print("\n".join(progress), flush=True)
    figures: dict[str, Any] = json.loads(last)
    return figures


def child(data: Path, scratch: Path, label: str, bootstrap: str) -> None:
    spark = local_session(f"logtrove-bench-{label}", master="local[2]")
    try:
        figures = measure(spark, data, scratch, label, bootstrap, repeat=1)  # the parent repeats children
    finally:
        spark.stop()
    print(json.dumps(figures))


def compare(data: Path, scratch: Path, bootstrap: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The baseline's and this checkout's figures, each the best of ``REPEAT`` children
    run alternately (baseline, this, baseline, this…) so that both see the same load."""
    assert BASELINE_SRC is not None
    import logtrove

    this_src = str(Path(logtrove.__file__).resolve().parents[1])
    best_of: dict[str, dict[str, Any]] = {}
    for i in range(REPEAT):
        for side, src in (("baseline", BASELINE_SRC), ("this", this_src)):
            got = in_child(src, data, scratch, f"{side}-{i}", bootstrap)
            kept = best_of.setdefault(side, got)
            for key in MEASURED:
                kept[key] = max(kept[key], got[key]) if key.endswith("mb_s") else min(kept[key], got[key])
    return best_of["baseline"], best_of["this"]


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        child(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    if sys.argv[1:2] == ["--measure-writer"]:
        writer_child(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5])
        return
    from logtrove.spark.session import java_options

    os.environ["PYSPARK_SUBMIT_ARGS"] = f'--driver-java-options "{java_options(True)}" pyspark-shell'
    if sys.argv[1:2] == ["--writer"]:
        writer_main()
        return
    # the JVM's options (above) as `logtrove export` has them (C2 JIT), for this session and
    # the baseline's alike (an earlier local_session leaves PYSPARK_SUBMIT_ARGS as it finds it)
    scratch = Path(tempfile.mkdtemp(prefix="logtrove-spark-bench-", dir=os.environ.get("BENCH_DIR")))
    data, parquet = scratch / "data", scratch / "parquet"
    spark = broker = None
    try:
        load_start = os.getloadavg()[0]  # other jobs on the machine skew every figure
        build_s = build(data)
        print(f"built {RECORDS:,} records in {build_s:.1f} s", flush=True)
        started = time.perf_counter()
        with Storage.open(data) as storage:
            Indexer(storage).catch_up()  # what a broker's indexer thread does as records arrive
        index_s = time.perf_counter() - started
        print(f"indexed in {index_s:.1f} s", flush=True)
        broker = start_logtrove(data)  # for remote mode; no indexer, the data is indexed
        base, ours = compare(data, scratch, broker.bootstrap) if BASELINE_SRC else (None, None)
        spark = local_session("logtrove-bench", master="local[2]")
        now = measure(spark, data, scratch, "this", broker.bootstrap, export=ours is None)
        alone = dict(now)  # this session's own figures, next to Parquet
        if ours is not None:  # the scan next to Parquet is this session's; the rest the children's
            now.update({k: ours[k] for k in MEASURED if k != "scan_s"})
        scan_s, agg = now["scan_s"], now["agg"]
        if base is not None:
            assert [tuple(x) for x in base["agg"]] == agg, (base["agg"], agg)
            print(f"baseline: { ({k: round(base[k], 1) for k in MEASURED}) }", flush=True)
        source = spark.read.format("logtrove").options(path=str(data), subscribe="bench").load()
        started = time.perf_counter()
        source.select("key", "value", "topic", "partition", "offset", "timestamp", "id", "tag").write.parquet(
            str(parquet)
        )
        export_s = time.perf_counter() - started
        table = spark.read.parquet(str(parquet))
        aggregate(table)
        parquet_s, agg_p = best(lambda: aggregate(table))
        assert agg_p == agg
        print(f"parquet scan {parquet_s:.1f} s", flush=True)
        pruned = (
            spark.read.format("logtrove")
            .schema("partition int, value binary")
            .options(path=str(data), subscribe="bench")
            .load()
        )
        pruned_s, agg_pruned = best(lambda: aggregate(pruned))
        assert agg_pruned == agg
        print(f"source scan with a user schema (partition, value) {pruned_s:.1f} s", flush=True)

        key = f"key-{KEYS // 2:06d}"
        expected = RECORDS // KEYS
        by_option = spark.read.format("logtrove").options(path=str(data), subscribe="bench", key=key).load()
        option_s, n_option = best(by_option.count)
        full_s, n_full = best(lambda: source.where(source.key == key.encode()).count())
        assert n_option == n_full and abs(n_option - expected) <= 1, (n_option, n_full, expected)
        print(f"key lookup option {option_s:.2f} s, full scan {full_s:.2f} s", flush=True)

        results = {
            "workload": {
                "records": RECORDS,
                "access_log_records": ACCESS_RECORDS,
                "keys": KEYS,
                "partitions": PARTITIONS,
                "value_bytes": 100,
                "values": "JSON objects",
                "spark": "local[2], C2 JIT",
                "build_s": round(build_s, 1),
                "index_s": round(index_s, 1),
                "load_average_1min": f"{load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end",
            },
            "full_scan_aggregate": [
                *(
                    [
                        {
                            "via": f"logtrove data source, baseline: {base['decoder']}",
                            "seconds": round(base["scan_s"], 2),
                            "rows_per_s": round(RECORDS / base["scan_s"]),
                        }
                    ]
                    if base
                    else []
                ),
                *(
                    [
                        {
                            "via": f"logtrove data source: {ours['decoder']}, alternating with the baseline",
                            "seconds": round(ours["scan_s"], 2),
                            "rows_per_s": round(RECORDS / ours["scan_s"]),
                        }
                    ]
                    if ours
                    else []
                ),
                {
                    "via": f"logtrove data source: {now['decoder']}, next to Parquet",
                    "seconds": round(scan_s, 2),
                    "rows_per_s": round(RECORDS / scan_s),
                },
                {
                    "via": "logtrove data source with a user schema (partition, value), next to Parquet",
                    "seconds": round(pruned_s, 2),
                    "rows_per_s": round(RECORDS / pruned_s),
                },
                {
                    "via": "Parquet copy",
                    "seconds": round(parquet_s, 2),
                    "rows_per_s": round(RECORDS / parquet_s),
                },
            ],
            "parquet_over_source_ratio": round(scan_s / parquet_s, 1),
            "parquet_over_pruned_source_ratio": round(pruned_s / parquet_s, 1),
            "export_parse_json": [
                *(
                    [
                        {
                            "via": f"baseline: {base['decoder']}",
                            "seconds": round(base["export_json_s"], 2),
                            "rows_per_s": round(RECORDS / base["export_json_s"]),
                        }
                    ]
                    if base
                    else []
                ),
                {
                    "via": now["decoder"],
                    "seconds": round(now["export_json_s"], 2),
                    "rows_per_s": round(RECORDS / now["export_json_s"]),
                },
            ],
            "export_parse_combined_log": rates(base, now, "export_log_s", ACCESS_RECORDS),
            "remote_scan_aggregate": [
                *rates(base, now, "remote_s", RECORDS),
                *(
                    [{**rates(None, alone, "remote_s", RECORDS)[0], "via": "this checkout, next to Parquet"}]
                    if base
                    else []
                ),
            ],
            "content_full_parse_mb_per_s": [
                *([{"via": "baseline", "mb_per_s": round(base["full_parse_mb_s"], 1)}] if base else []),
                {"via": "this checkout", "mb_per_s": round(now["full_parse_mb_s"], 1)},
                *(
                    [
                        {
                            "via": "this checkout, next to Parquet",
                            "mb_per_s": round(alone["full_parse_mb_s"], 1),
                        }
                    ]
                    if base
                    else []
                ),
            ],
            "export_to_parquet_s": round(export_s, 2),
            "key_lookup": [
                {
                    "via": "key option (.keyidx via the query engine)",
                    "seconds": round(option_s, 2),
                    "rows": n_option,
                },
                {"via": "WHERE key = … (full scan)", "seconds": round(full_s, 2), "rows": n_full},
            ],
            "key_lookup_speedup": round(full_s / option_s, 1),
            "notes": (
                "The compiled decoder alone runs 5-10 M records/s on one core (executor side of the"
                " scan: about 0.2 s for 1 M records); the rest of the source's time is Spark's (Arrow"
                " to rows in the JVM, Python workers). Exports run no Python per row (from_json;"
                " combined-log: one regexp_replace into the groups and a split, the pattern run twice"
                " per line): they are bound by Spark's JSON parser, its timestamp parsing, the Parquet"
                " write partitioned by date and hour and the streaming file sink. Remote mode fetches"
                " raw batches from the broker and decodes them like direct mode. The full parse of"
                " the content search decodes candidate batches with the compiled decoder and"
                " searches the values in one call per batch."
            ),
            "plots": [
                {
                    "title": f"Full-scan aggregate over {RECORDS:,} records",
                    "ylabel": "rows/s",
                    "bars": {
                        **({"data source (baseline)": RECORDS / base["scan_s"]} if base else {}),
                        "data source": RECORDS / scan_s,
                        "data source, user schema": RECORDS / pruned_s,
                        "Parquet": RECORDS / parquet_s,
                    },
                }
            ],
        }
        save("spark", results)
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
