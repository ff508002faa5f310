"""The HTTP API keeps a mirrored (followed) topic read-only as the Kafka port does: its
source configs get 409, its local configs may be changed, and produce is refused."""

from __future__ import annotations

from pathlib import Path

import httpx
from tests.http.support import assert_problem

from logtrove.http import start_in_thread
from logtrove.storage import Storage


def test_source_configs_and_produce_of_a_mirrored_topic_are_refused(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic("copied", 1, {"retention.ms": "86400000"}, followed_from="source.example:9092")
        server = start_in_thread(storage, "127.0.0.1:0")
        try:
            with httpx.Client(base_url=server.url, timeout=30) as c:
                refused = assert_problem(
                    c.patch("/api/v1/topics/copied/configs", json={"set": {"retention.ms": "1000"}}),
                    409,
                    "followed-topic",
                )
                assert "source.example:9092" in str(refused["detail"])
                assert_problem(
                    c.patch("/api/v1/topics/copied/configs", json={"delete": ["retention.ms"]}),
                    409,
                    "followed-topic",
                )
                local = c.patch("/api/v1/topics/copied/configs", json={"set": {"segment.bytes": "1048576"}})
                assert local.status_code == 200, local.text
                produced = c.post("/api/v1/topics/copied/messages", json={"records": [{"value": "x"}]})
                assert produced.status_code == 422, produced.text
        finally:
            server.stop()
        assert storage.topic("copied").overrides == {"retention.ms": "86400000", "segment.bytes": "1048576"}
        assert storage.log("copied", 0).log_end_offset == 0
