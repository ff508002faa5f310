"""The Kafka Streams word count (``java/StreamsWordCount.java``, exactly_once_v2) run
against a broker, killed with SIGKILL while it works and started again over the same
state directory: what its output topic finally holds, read_committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.testing import wait_until
from logtrove.testing.kafka import KafkaJars

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
LINES = [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(1 + i % 4)) for i in range(400)]
EXPECTED = Counter(word for line in LINES for word in line.split())
HALF = len(LINES) // 2


def _produce(bootstrap: str, topic: str, lines: list[str], first: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(lines, start=first):
        producer.produce(topic, key=str(i).encode(), value=line.encode())
    assert producer.flush(30) == 0


def word_count_killed_and_restarted(
    jars: KafkaJars, classes: Path, bootstrap: str, prefix: str, state: Path
) -> dict[str, object]:
    """Half the lines in, the application counts them; the other half in, the application
    is killed (SIGKILL) as soon as its output moved on, then restarted over the same
    state directory until the output holds every word at its final count. Returns the
    restarted run's answer: ``{"state", "counts"}``, and ``"killed_at"`` (the progress the
    killed run had seen)."""
    source, sink, app = f"{prefix}wc-in", f"{prefix}wc-out", f"{prefix}wc-app"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (source, sink):
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    _produce(bootstrap, source, LINES[:HALF], 0)
    total = sum(EXPECTED.values())
    first_half = sum(len(line.split()) for line in LINES[:HALF])
    args = ["StreamsWordCount", bootstrap, app, source, sink, str(total), str(state)]
    log = state.parent / f"{prefix}streams.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            jars.command(*args, classpath=[classes]), stdout=subprocess.PIPE, stderr=err, text=True
        )
    assert proc.stdout is not None
    progress = 0
    try:

        def moved(threshold: int) -> bool:
            nonlocal progress
            line = proc.stdout.readline() if proc.stdout else ""
            assert line, f"the application ended: {log.read_text()[-3000:]}"
            if line.startswith("progress "):
                progress = int(line.split()[1])
            return progress >= threshold

        wait_until(lambda: moved(first_half), 180, interval_s=0, what="the first half counted")
        _produce(bootstrap, source, LINES[HALF:], HALF)
        wait_until(lambda: moved(first_half + 1), 180, interval_s=0, what="the second half begun")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    again = jars.run(*args, classpath=[classes], timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    answer: dict[str, object] = json.loads(again.stdout.splitlines()[-1])
    answer["killed_at"] = progress
    return answer
