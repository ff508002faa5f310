"""Apache Kafka beside logtrove, for differential tests: its JVM programs (the broker,
the command-line tools, the Java client scenarios) run from the jars ``scripts/kafka.sh``
lays in a cache outside the repository, and a KRaft broker or cluster of them on free
127.0.0.1 ports, started and stopped by PID.

A node is combined broker and controller (``process.roles=broker,controller``), its log
directory formatted with ``kafka-storage format`` (``kafka.tools.StorageTool``) before its
first start; a cluster of ``size`` nodes has ``size`` voters. The JVM flags favour a quick
start over peak speed (C1 only, the serial collector, a 512 MiB heap), so three brokers fit
on a small machine beside logtrove and the tests.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from logtrove.testing.broker import free_port
from logtrove.testing.wait import wait_until

JVM_FLAGS = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss1m")
START_TIMEOUT_S = 120  # three JVMs on two busy cores


@dataclass(frozen=True)
class KafkaJars:
    """Where Apache Kafka's jars are (``libs``, every jar a classpath entry) and the log4j2
    configuration its JVMs use."""

    libs: Path
    log4j: Path

    @property
    def version(self) -> str:
        """The Kafka version of these jars (from ``kafka-clients-<version>.jar``)."""
        for jar in self.libs.glob("kafka-clients-*.jar"):
            return jar.name.removeprefix("kafka-clients-").removesuffix(".jar")
        raise FileNotFoundError(f"no kafka-clients jar in {self.libs}")

    def classpath(self, *extra: Path) -> str:
        return os.pathsep.join([*(str(p) for p in extra), f"{self.libs}/*"])

    def command(self, main: str, *args: str, classpath: Sequence[Path] = (), heap: str = "512m") -> list[str]:
        """The ``java`` command line that runs ``main`` (a class name) with ``args``."""
        flags = [f if not f.startswith("-Xmx") else f"-Xmx{heap}" for f in JVM_FLAGS]
        return [
            "java",
            *flags,
            f"-Dlog4j2.configurationFile={self.log4j}",
            "-cp",
            self.classpath(*classpath),
            main,
            *args,
        ]

    def run(
        self,
        main: str,
        *args: str,
        classpath: Sequence[Path] = (),
        timeout: float = 180,
        input_: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``main`` to its end (a tool); its answer, exit code and stderr are returned,
        not checked."""
        return subprocess.run(
            self.command(main, *args, classpath=classpath, heap="256m"),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            input=input_,
        )


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log(self) -> Path:
        return self.directory / "kafka.log"


class KafkaCluster:
    """``size`` KRaft nodes (each broker and controller) under ``root``. ``bootstrap`` lists
    every broker; ``start`` returns when a client's metadata shows all of them and
    ``start_seconds`` says how long that took (formatting included)."""

    def __init__(self, jars: KafkaJars, root: Path, size: int = 1) -> None:
        self.jars = jars
        self.root = root
        self.size = size
        self.cluster_id = _kafka_uuid()
        self.nodes = [
            _Node(
                node_id=i + 1, port=free_port(), controller_port=free_port(), directory=root / f"node-{i + 1}"
            )
            for i in range(size)
        ]
        self.start_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def _write_properties(self, node: _Node) -> None:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        replicas = min(self.size, 3)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(min(replicas, 2)),
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": str(min(replicas, 2)),
            "group.initial.rebalance.delay.ms": "200",
        }
        node.directory.mkdir(parents=True, exist_ok=True)
        node.properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def start(self) -> None:
        began = time.monotonic()
        for node in self.nodes:
            self._write_properties(node)
        formats = [
            subprocess.Popen(
                self.jars.command(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    self.cluster_id,
                    "-c",
                    str(n.properties),
                    heap="256m",
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for n in self.nodes
        ]
        for node, fmt in zip(self.nodes, formats, strict=True):
            out, _ = fmt.communicate(timeout=START_TIMEOUT_S)
            if fmt.returncode != 0:
                raise RuntimeError(f"formatting node {node.node_id} failed: {out.decode(errors='replace')}")
        for node in self.nodes:
            with node.log.open("ab") as log:
                node.proc = subprocess.Popen(
                    self.jars.command("kafka.Kafka", str(node.properties)),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        try:
            wait_until(self._ready, START_TIMEOUT_S, interval_s=0.2, what=self._describe_failure)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began

    def _ready(self) -> bool:
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                raise RuntimeError(f"Kafka node {node.node_id} exited: {node.log.read_text()[-4000:]}")
        return all("Kafka Server started" in n.log.read_text(errors="replace") for n in self.nodes)

    def _describe_failure(self) -> str:
        tails = "\n".join(
            f"node {n.node_id}: {n.log.read_text(errors='replace')[-2000:]}" for n in self.nodes
        )
        return f"Kafka starting ({tails})"

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM every node by PID (a controlled shutdown), SIGKILL after ``timeout``."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                os.kill(node.proc.pid, signal.SIGTERM)
        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(node.proc.pid, signal.SIGKILL)
                node.proc.wait(10)
            node.proc = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kafka_uuid() -> str:
    """A random cluster id in Kafka's spelling: 16 bytes, URL-safe base64, no padding, and
    (as Kafka's own ``Uuid.randomUuid``) never starting with ``-``, which ``kafka-storage
    format -t`` would read as an option (one id in 64 did)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
