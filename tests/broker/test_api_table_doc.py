"""docs/KAFKA_APIS.md is the user's list of served Kafka APIs: it must name every API key
the protocol library knows, and its served versions must be exactly the broker's table
(what ApiVersions advertises)."""

from __future__ import annotations

import re
from pathlib import Path

from kio.schema.index import api_key_map

from logtrove.broker.apis import build_api_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "KAFKA_APIS.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| ([^|]+) \|")
GONE_FROM_KAFKA = {4, 5, 6, 7}  # ZooKeeper-era broker-to-broker keys kio does not know


def _rows() -> dict[int, tuple[str, str]]:
    rows: dict[int, tuple[str, str]] = {}
    for line in DOC.read_text("utf-8").splitlines():
        match = ROW.match(line)
        if match:
            key = int(match.group(1))
            assert key not in rows, f"API key {key} is listed twice"
            rows[key] = (match.group(2), match.group(3).strip())
    return rows


def test_every_known_api_key_has_a_row() -> None:
    rows = _rows()
    assert set(api_key_map) - rows.keys() == set()
    assert rows.keys() - set(api_key_map) <= GONE_FROM_KAFKA


def test_the_names_are_kios() -> None:
    for key, (name, _) in _rows().items():
        if key in api_key_map:
            assert re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() == api_key_map[key], key


def test_served_versions_are_the_brokers() -> None:
    table = build_api_table()
    documented = {}
    for key, (_, served) in _rows().items():
        if served != "—":
            low, high = (int(v) for v in served.split("–"))
            documented[key] = (low, high)
    assert documented == {key: (api.min_version, api.max_version) for key, api in table.items()}
