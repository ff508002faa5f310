"""The differential harness: Kafka's Java client runs one scenario (``java/
ClientScenarios.java``) against Apache Kafka and against logtrove, and what it observed
is compared value by value.

An observation is a JSON line ``{"scenario", "what", "value"}``; a difference is named by
its path, ``scenario/what/key/…`` (list items by index), so it names exactly the value
that differs. :func:`normalise` is the one place where
what differs by nature between two clusters is made equal (node ids); everything else
that differs is a finding, and each finding must be listed, with its reason, in the
"Differences from Apache Kafka" table of ``docs/KAFKA_APIS.md`` (rows are glob patterns
over paths).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logtrove.testing.kafka import KafkaJars

JAVA = Path(__file__).resolve().parent / "java"
DOC = Path(__file__).resolve().parents[2] / "docs" / "KAFKA_APIS.md"
TABLE_TITLE = "## Differences from Apache Kafka"
ABSENT = "(absent)"
NODE_KEYS = {"leader", "coordinator"}  # node ids: Kafka's KRaft nodes count from 1, logtrove is 0


def compile_java(jars: KafkaJars, cache: Path) -> Path:
    """The scenario classes, compiled once per source text into ``cache``."""
    sources = sorted(JAVA.glob("*.java"))
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in sources)).hexdigest()[:16]
    out = cache / f"classes-{digest}"
    if not (out / ".complete").exists():
        out.mkdir(parents=True, exist_ok=True)
        command = ["javac", "-J-XX:TieredStopAtLevel=1", "-cp", jars.classpath(), "-d", str(out)]
        result = subprocess.run([*command, *map(str, sources)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr + result.stdout
        (out / ".complete").touch()
    return out


def recent_t0() -> int:
    """The scenario's first timestamp: a whole second an hour ago. Records far older
    would be removed by retention (7 days) while the scenario runs; newer ones would
    pass the broker's clock."""
    return (int(time.time()) - 3600) * 1000


def observe(
    jars: KafkaJars, classes: Path, bootstrap: str, prefix: str, t0: int
) -> dict[tuple[str, str], Any]:
    """Run the scenario against ``bootstrap`` (topics and groups named ``prefix…``, record
    timestamps from ``t0``) and return its observations by (scenario, what)."""
    done = jars.run("ClientScenarios", bootstrap, prefix, str(t0), classpath=[classes], timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    observations: dict[tuple[str, str], Any] = {}
    for line in done.stdout.splitlines():
        item = json.loads(line)
        observations[(item["scenario"], item["what"])] = item["value"]
    assert observations, done.stderr[-4000:]
    return observations


def normalise(value: Any, key: str = "") -> Any:
    """What legitimately differs between two clusters, made equal: node ids."""
    if key in NODE_KEYS and isinstance(value, int):
        return "node"
    if isinstance(value, Mapping):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


@dataclass(frozen=True)
class Finding:
    path: str
    kafka: Any
    logtrove: Any

    def __str__(self) -> str:
        return f"{self.path}: Kafka {json.dumps(self.kafka)}, logtrove {json.dumps(self.logtrove)}"


def compare(kafka: Mapping[tuple[str, str], Any], logtrove: Mapping[tuple[str, str], Any]) -> list[Finding]:
    """Every normalised value that differs, at the deepest path where both sides still
    have it (a config only one side has is one finding, not one per field)."""
    findings: list[Finding] = []
    for scenario, what in sorted(set(kafka) | set(logtrove)):
        ours = normalise(kafka.get((scenario, what), ABSENT))
        theirs = normalise(logtrove.get((scenario, what), ABSENT))
        _diff(ours, theirs, f"{scenario}/{what}", findings)
    return findings


def _diff(a: Any, b: Any, path: str, findings: list[Finding]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            _diff(a.get(key, ABSENT), b.get(key, ABSENT), f"{path}/{key}", findings)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            _diff(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT, f"{path}/{i}", findings)
    elif a != b:
        findings.append(Finding(path, a, b))


def documented() -> dict[str, str]:
    """The table's rows: path pattern → reason."""
    text = DOC.read_text()
    assert TABLE_TITLE in text, f"{DOC} has no {TABLE_TITLE!r} section"
    section = text.split(TABLE_TITLE, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = match.group(2).split("|")[-1].strip()
    return rows


def unexplained(findings: Iterable[Finding], rows: Iterable[str]) -> list[Finding]:
    patterns = list(rows)
    return [f for f in findings if not any(fnmatch.fnmatchcase(f.path, p) for p in patterns)]


def unused(findings: Iterable[Finding], rows: Iterable[str]) -> list[str]:
    paths = [f.path for f in findings]
    return [p for p in rows if not any(fnmatch.fnmatchcase(path, p) for path in paths)]
