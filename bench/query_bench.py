"""Query benchmark: latency of each query type against consume-and-filter, content-search
throughput and skipping, and indexer throughput against append throughput.

Workload: N records over 4 partitions (64 MiB segments), 100 k distinct keys, a client
message ID (snowflake) and an indexed ``user`` header on every record, ~110-byte JSON or
text values, timestamps 1 ms apart with ±2 s client jitter; one record in a million carries
a rare token. Full: 10 M records; ``BENCH_QUICK=1``: 200 k; ``BENCH_QUERY_RECORDS=N``
overrides both.

Latencies take ``BENCH_QUERY_SAMPLES`` warm samples per query type (default 1,000; 200
under ``BENCH_QUICK``) after 50 unmeasured warm-up queries, and report p50 / p99 / p999 /
max with the load average before and after each type (the machine may be shared), and
the queries' own CPU time (p50 / p99) with the share of queries, and of the slowest 1 %,
during which the kernel gave the query's core to another process (an involuntary context
switch): a wall-time tail far above the CPU-time tail is time spent waiting for a core.
``BENCH_QUERY_DATA=DIR`` builds the data set in DIR once and reuses it on later runs (so
two code versions can be measured back to back on the same files);
``BENCH_QUERY_LATENCY_ONLY=1`` skips the baselines and content sections, and
``BENCH_QUERY_NAME`` names the result file (default ``query``).

Under load (``BENCH_QUERY_LOAD=1``): the lookups are measured twice in the same run on a
copy of the data set served by a broker (``logtrove serve``, indexer on): first with the
broker idle (``latency_us``), then while a producer process (confluent-kafka) writes
``BENCH_QUERY_LOAD_RATE`` messages/s (default 100 k) of ~110 bytes into the queried topic
(``latency_us_loaded``, ``BENCH_QUERY_LOAD_SAMPLES`` per type, default as many as idle),
the queries reading the directory read-only as the CLI does; then once more with the
producer process at nice 19 (``latency_us_loaded_generator_niced``): on 2 cores the load
generator itself takes most of a core, where a real producer runs on another machine.
The broker and its indexer are never niced; the stored rate of each phase is reported, so
a generator that fell behind shows.
The producer's keys (``load-N``) and timestamps (now) differ from the data set's, so
every question has the same answer with and without load. The copy is deleted after.

* append: prebuilt batches (200 records) appended through ``PartitionLog.append``
  (validation + CRC + write, opaque batches), records/s;
* indexer: ``Indexer.catch_up`` over everything, one thread, records/s and its share of
  the append rate;
* queries (indexes caught up, engine warm): p50 / p99 over repeated random arguments;
* baseline: the same question answered the way UI tools do, consuming every record from
  the start and filtering (a few runs; it is slow), and the speed-up ratio;
* content: MB/s for a search that must read everything (no token to skip on, the raw
  prefilter rejects every batch), MB/s with record parsing (a regex that matches often),
  and the share of blocks skipped for a rare token.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import QUICK, percentile, pick, save, summary_us
from logtrove.query import (
    Contains,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    KeyQuery,
    MessageIdGenerator,
    OffsetQuery,
    Query,
    QueryEngine,
    RangeQuery,
    Regex,
    TimeQuery,
)
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer
from logtrove.storage.derived.views import index_view
from logtrove.testing import FakeClock

N = int(os.environ.get("BENCH_QUERY_RECORDS", "0")) or pick(10_000_000, 200_000)
PARTITIONS = 4
KEYS = 100_000
PER_BATCH = 200
T0 = 1_763_800_000_000
RARE = "zqxjrare"
SAMPLES = int(os.environ.get("BENCH_QUERY_SAMPLES", "0")) or pick(1000, 200)
WARMUP = 50
DATA = os.environ.get("BENCH_QUERY_DATA", "")
LATENCY_ONLY = os.environ.get("BENCH_QUERY_LATENCY_ONLY", "") not in ("", "0")
NAME = os.environ.get("BENCH_QUERY_NAME", "query")
LOAD = os.environ.get("BENCH_QUERY_LOAD", "") not in ("", "0")
LOAD_RATE = int(os.environ.get("BENCH_QUERY_LOAD_RATE", "0")) or 100_000
LOAD_SAMPLES = int(os.environ.get("BENCH_QUERY_LOAD_SAMPLES", "0")) or SAMPLES
LOAD_SETTLE_S = 3.0  # producer running before the loaded samples start
QUERY_NOTES = (
    "append is the storage layer's ceiling (prebuilt 200-record batches into the page cache, "
    "no network); real produce arrives through the broker, about 0.55 M msg/s here, and the "
    "indexer section shows the indexer keeping up with that. Baselines consume every record "
    "from the start and filter, as Kafka UIs do."
)
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "order", "failed", "paid", "shipped", "refund"]


def workload(rng: random.Random, n: int) -> Iterator[NewRecord]:
    """The benchmark's records: a key out of KEYS, a snowflake ``id`` header, an indexed
    ``user`` header, a JSON or text value (one in a million with the rare token), and a
    client timestamp 1 ms after the previous one, ±2 s."""
    clock = FakeClock(T0)
    gen = MessageIdGenerator(1, clock=clock)
    for i in range(n):
        clock.advance(1)
        mid = gen.next_id()
        if i % 2:
            value = json.dumps({"order": {"id": i, "status": rng.choice(WORDS)}, "amount": i % 997}).encode()
        else:
            value = (" ".join(rng.choice(WORDS) for _ in range(8)) + f" {i}").encode()
        if i % 1_000_000 == 500_000:
            value += f" {RARE} ".encode()
        headers = (("id", mid.encode()), ("user", b"user-%d" % (i % 5000)))
        ts = clock.now_ms() + rng.randrange(-2000, 2000)
        yield NewRecord(value, b"key-%d" % rng.randrange(KEYS), headers, ts)


def build_batches(rng: random.Random, n: int = N) -> tuple[list[tuple[int, bytes]], list[str]]:
    """Prebuilt (partition, batch) pairs of :func:`workload` and every 1000th client ID."""
    batches = []
    ids = []
    records: list[NewRecord] = []
    for i, record in enumerate(workload(rng, n)):
        if i % 1000 == 0:
            ids.append(dict(record.headers)["id"].decode())
        records.append(record)
        if len(records) == PER_BATCH:
            batches.append((rng.randrange(PARTITIONS), build_batch(records)))
            records = []
    if records:
        batches.append((rng.randrange(PARTITIONS), build_batch(records)))
    return batches, ids


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def latencies(engine: QueryEngine, make: Callable[[random.Random], Query], runs: int) -> dict[str, Any]:
    """``runs`` timed queries with random arguments after :data:`WARMUP` untimed ones."""
    rng = random.Random(3)
    for _ in range(min(WARMUP, runs)):
        engine.run(make(rng)).all()
    load_before = os.getloadavg()[0]
    samples, cpu, preempted = [], [], []
    for _ in range(runs):
        q = make(rng)
        switches, cpu_start = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw, time.process_time()
        took, _ = timed(lambda q=q: engine.run(q).all())
        cpu.append(time.process_time() - cpu_start)
        preempted.append(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw > switches)
        samples.append(took)
    out: dict[str, Any] = summary_us(samples)
    out["p999_us"] = round(percentile([s * 1e6 for s in samples], 99.9), 1)
    out["max_us"] = round(max(samples) * 1e6, 1)
    # the query's own CPU time, and how often the kernel took its core away mid-query
    # (an involuntary context switch): wall time past the CPU time is waiting for a core
    out["cpu_p50_us"] = round(percentile([c * 1e6 for c in cpu], 50), 1)
    out["cpu_p99_us"] = round(percentile([c * 1e6 for c in cpu], 99), 1)
    slowest = sorted(range(runs), key=samples.__getitem__)[-max(1, runs // 100) :]
    out["preempted_share"] = round(sum(preempted) / runs, 3)
    out["preempted_share_slowest_1pct"] = round(sum(preempted[i] for i in slowest) / len(slowest), 3)
    out["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return out


def consume_and_filter(storage: Storage, keep: Callable[[Any], bool], limit: int | None) -> float:
    """What kafka-ui / AKHQ / Kafdrop do: read every record from the start, filter."""
    t = time.perf_counter()
    found = 0
    for p in range(PARTITIONS):
        for record in storage.log("q", p).records():
            if keep(record):
                found += 1
                if limit is not None and found >= limit:
                    return time.perf_counter() - t
    return time.perf_counter() - t


def build(data: Path, results: dict[str, Any]) -> list[str]:
    """Write the data set into ``data``, index it, and return the client IDs to ask for;
    append and indexer rates go into ``results``."""
    rng = random.Random(1)
    build_s, (batches, ids) = timed(lambda: build_batches(rng))
    print(f"built {N} records in {build_s:.1f} s", flush=True)
    storage = Storage.open(data)
    storage.create_topic(
        "q",
        PARTITIONS,
        # old timestamps: a broker serving the data set (the load section) must not delete them
        {"segment.bytes": str(64 << 20), "index.headers": "user", "retention.ms": "-1"},
    )
    logs = [storage.log("q", p) for p in range(PARTITIONS)]
    cpu0 = time.process_time()
    append_s, _ = timed(lambda: [logs[p].append(b) for p, b in batches])
    append_cpu_s = time.process_time() - cpu0
    size = sum(log.size_bytes for log in logs)
    batches.clear()  # free the memory before indexing
    results["append"] = {
        "records_per_s": round(N / append_s),
        "mb_per_s": round(size / append_s / 1e6, 1),
        "records_per_cpu_s": round(N / append_cpu_s),
    }
    cpu0 = time.process_time()
    index_s, indexed = timed(lambda: Indexer(storage).catch_up())
    index_cpu_s = time.process_time() - cpu0
    assert indexed == N, indexed
    results["indexer"] = {
        "records_per_s": round(N / index_s),
        "mb_per_s": round(size / index_s / 1e6, 1),
        "share_of_append_rate": round((N / index_s) / (N / append_s), 3),
        "records_per_cpu_s": round(N / index_cpu_s),  # the machine may be shared
    }
    print(f"append {N / append_s:,.0f} rec/s, indexer {N / index_s:,.0f} rec/s", flush=True)
    storage.close()
    return ids


def lookup_queries(ids: list[str]) -> dict[str, Callable[[random.Random], Query]]:
    """The query types timed, each a maker of random questions."""
    t_end = T0 + N
    return {
        "offset": lambda r: OffsetQuery("q", r.randrange(PARTITIONS), r.randrange(N // PARTITIONS // 2)),
        "time": lambda r: TimeQuery("q", r.randrange(T0, t_end)),
        "time_range_1s_limit_100": lambda r: RangeQuery(
            "q", (a := r.randrange(T0, t_end)), a + 1000, limit=100
        ),
        "key_all_matches": lambda r: KeyQuery("q", b"key-%d" % r.randrange(KEYS)),
        "client_id": lambda r: IdQuery("q", r.choice(ids)),
        "header_limit_100": lambda r: HeaderQuery("q", "user", b"user-%d" % r.randrange(5000), limit=100),
        "content_rare_token": lambda r: ContentQuery("q", Contains(f" {RARE} "), budget_bytes=None),
        "content_common_limit_100": lambda r: ContentQuery("q", Contains("refund"), limit=100),
    }


def measure(engine: QueryEngine, ids: list[str], label: str = "", samples: int = SAMPLES) -> dict[str, Any]:
    """Latencies of every query type (content types skipped under LATENCY_ONLY)."""
    out: dict[str, Any] = {}
    for name, make in lookup_queries(ids).items():
        if LATENCY_ONLY and name.startswith("content"):
            continue
        rounds = samples if not name.startswith("content") else max(5, samples // 20)
        out[name] = latencies(engine, make, rounds)
        print(label, name, out[name], flush=True)
    return out


def produce_load(bootstrap: str, rate: int) -> None:
    """The load process: ``rate`` messages/s into topic ``q`` until SIGTERM, then one
    JSON line with what was sent and acknowledged."""
    from confluent_kafka import Producer

    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "acks": "1",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    acked = [0, 0]

    def on_delivery(err: object, _msg: object) -> None:
        acked[0 if err is None else 1] += 1

    rng = random.Random(7)
    values = [
        json.dumps(
            {"order": {"id": i, "status": rng.choice(WORDS)}, "amount": i % 997, "pad": "x" * 40}
        ).encode()
        for i in range(1000)
    ]
    sent = 0
    started = time.monotonic()
    while not stop[0]:
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            try:
                producer.produce(
                    "q", values[sent % 1000], b"load-%d" % (sent % 50_000), on_delivery=on_delivery
                )
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    elapsed = time.monotonic() - started
    producer.flush(30)
    print(json.dumps({"sent": sent, "acked": acked[0], "failed": acked[1], "seconds": round(elapsed, 2)}))


def measure_under_load(work: Path, ids: list[str]) -> dict[str, Any]:
    """Lookups on a copy of the data set served by a broker with its indexer: idle, then
    while a producer writes LOAD_RATE messages/s into the queried topic."""
    from broker_bench import start_logtrove

    copy = work / "loaded"
    shutil.rmtree(copy, ignore_errors=True)
    took, _ = timed(lambda: shutil.copytree(work / "data", copy / "data"))
    synced, _ = timed(os.sync)  # else the idle phase runs during the copy's writeback
    print(f"copied the data set in {took:.1f} s, written back in {synced:.1f} s", flush=True)
    with Storage.open(copy / "data") as writable:  # its timestamps are old: no retention
        writable.alter_topic_configs("q", {"retention.ms": "-1", "retention.bytes": "-1"})
    broker = start_logtrove(copy / "data", ["--indexer"])
    out: dict[str, Any] = {"load_rate_target": LOAD_RATE}
    try:
        reader = Storage.open(copy / "data", read_only=True)
        engine = QueryEngine(reader)
        starts = [reader.log("q", p).log_start_offset for p in range(PARTITIONS)]
        found = engine.run(KeyQuery("q", b"key-1")).all()[1].results
        if starts != [0] * PARTITIONS or found < 10:
            raise RuntimeError(
                f"the served copy lost records: log starts {starts}, key-1 found {found} times"
            )
        out["idle"] = measure(engine, ids, "idle")
        load = subprocess.Popen(
            [sys.executable, __file__, "--load", broker.bootstrap, str(LOAD_RATE)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(LOAD_SETTLE_S)
            for phase in ("loaded", "loaded_generator_niced"):
                if phase == "loaded_generator_niced":  # as if the producer ran on another machine
                    os.setpriority(os.PRIO_PROCESS, load.pid, 19)
                    time.sleep(LOAD_SETTLE_S)
                reader.refresh()
                end_before = sum(reader.log("q", p).log_end_offset for p in range(PARTITIONS))
                t0 = time.monotonic()
                out[phase] = measure(engine, ids, phase.replace("_", " "), LOAD_SAMPLES)
                reader.refresh()
                written = sum(reader.log("q", p).log_end_offset for p in range(PARTITIONS)) - end_before
                out[f"stored_rate_{phase}"] = round(written / (time.monotonic() - t0))
        finally:
            load.send_signal(signal.SIGTERM)
            report, _ = load.communicate(timeout=60)
        sent = json.loads(report.strip().splitlines()[-1])
        out["producer"] = {**sent, "rate": round(sent["acked"] / max(sent["seconds"], 1e-9))}
        stored = {k: v for k, v in out.items() if k.startswith("stored_rate")}
        print("producer", out["producer"], "stored", stored, flush=True)
        reader.close()
    finally:
        broker.stop()
        shutil.rmtree(copy, ignore_errors=True)
    return out


def main() -> None:
    keep = bool(DATA)
    work = Path(DATA) if keep else Path(tempfile.mkdtemp(prefix="query-bench-"))
    results: dict[str, Any] = {"records": N, "partitions": PARTITIONS}
    ids_file = work / "ids.json"
    try:
        if keep and ids_file.exists():
            ids = json.loads(ids_file.read_text())
            print(f"reusing the data set in {work}", flush=True)
        else:
            work.mkdir(parents=True, exist_ok=True)
            ids = build(work / "data", results)
            ids_file.write_text(json.dumps(ids))
        reader = Storage.open(work / "data", read_only=True)
        size = sum(reader.log("q", p).size_bytes for p in range(PARTITIONS))
        results["log_mb"] = round(size / 1e6, 1)
        reader = Storage.open(work / "data", read_only=True)
        engine = QueryEngine(reader)
        if LOAD:
            loaded = measure_under_load(work, ids)
            results["latency_us"] = loaded.pop("idle")
            results["latency_us_loaded"] = loaded.pop("loaded")
            results["latency_us_loaded_generator_niced"] = loaded.pop("loaded_generator_niced")
            results["load"] = loaded
        else:
            results["latency_us"] = measure(engine, ids)

        if LATENCY_ONLY:
            reader.close()
            results["quick"] = QUICK
            results["samples"] = SAMPLES
            save(NAME, results)
            return
        baseline_runs = pick(2, 3)
        key = b"key-4242"
        mid = ids[len(ids) // 2].encode()
        compare: dict[str, tuple[Callable[[Any], bool], Query, int | None]] = {
            "key_all_matches": (lambda r: r.key == key, KeyQuery("q", key), None),
            "client_id": (
                lambda r: ("id", mid) in r.headers,
                IdQuery("q", mid.decode(), exhaustive=True),
                None,
            ),
            "content_rare_token": (
                lambda r: r.value is not None and f" {RARE} ".encode() in r.value,
                ContentQuery("q", Contains(f" {RARE} "), budget_bytes=None),
                None,
            ),
        }
        results["vs_consume_and_filter"] = {}
        for name, (keep, q, limit) in compare.items():
            base = min(consume_and_filter(reader, keep, limit) for _ in range(baseline_runs))
            ours = min(timed(lambda q=q: engine.run(q).all())[0] for _ in range(3))
            results["vs_consume_and_filter"][name] = {
                "baseline_s": round(base, 3),
                "logtrove_s": round(ours, 5),
                "speedup": round(base / ours, 1),
            }
            print(name, results["vs_consume_and_filter"][name], flush=True)

        scan = {}
        # "qqq" bounds no token (it may sit inside a longer word): every block is read and
        # the raw prefilter rejects every batch.
        took, (_, c) = timed(lambda: engine.run(ContentQuery("q", Contains("qqq"), budget_bytes=None)).all())
        scan["prefilter_only_mb_per_s"] = round(c.stats.bytes_scanned / took / 1e6, 1)
        took, (_, c) = timed(
            # an anchored regex cannot prefilter the raw batch: every record is parsed
            lambda: engine.run(ContentQuery("q", Regex(r"^zzz"), limit=None, budget_bytes=None)).all()
        )
        scan["parsing_regex_mb_per_s"] = round(c.stats.bytes_scanned / took / 1e6, 1)
        _, c = engine.run(ContentQuery("q", Contains(f" {RARE} "), budget_bytes=None)).all()
        blocks = sum(
            len(index_view(seg).skip_blocks) for p in range(PARTITIONS) for seg in reader.log("q", p).segments
        )
        scan["rare_token"] = {
            "results": c.results,
            "blocks_skipped": c.stats.blocks_skipped,
            "blocks_total": blocks,
            "share_of_blocks_skipped": round(c.stats.blocks_skipped / max(blocks, 1), 3),
            "bytes_read_mb": round(c.stats.bytes_scanned / 1e6, 2),
            "share_of_log_read": round(c.stats.bytes_scanned / size, 4),
        }
        results["content"] = scan
        print(scan, flush=True)
        reader.close()
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    results["quick"] = QUICK
    results["samples"] = SAMPLES
    results["notes"] = QUERY_NOTES
    save(NAME, results)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--load"]:
        produce_load(sys.argv[2], int(sys.argv[3]))
    else:
        main()
