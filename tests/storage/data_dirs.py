"""Data directories as something else left them, for the storage and broker tests of
issue 13: one written by the version before topic names were checked, and a folder of a
user's own files that must never be taken for (or deleted as) a data directory."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.checkpoint import LOG_START_OFFSET, RECOVERY_POINT


def batch(value: bytes, ts: int = 1000) -> bytes:
    return build_batch([NewRecord(value, None, (), ts)])


def old_version_data_dir(path: Path) -> uuid.UUID:
    """A data directory as the version before this fix wrote it after a producer wrote to
    ``"orders\\n"``: topic ``audit`` with two records, topic file ``topics/orders\\n.json``,
    its partition directory ``orders\\n-0`` with a record, and checkpoints whose line for
    it is split in two. Returns the illegal topic's id."""
    with Storage.open(path) as storage:
        storage.create_topic("audit")
        now = int(time.time() * 1000)  # recent: a broker's retention keeps them
        storage.log("audit", 0).append(batch(b"a1", now))
        storage.log("audit", 0).append(batch(b"a2", now))
    bad_id = uuid.uuid4()
    topic = {"name": "orders\n", "topic_id": str(bad_id), "partitions": 1, "configs": {}, "created_ms": 1}
    (path / "topics" / "orders\n.json").write_text(json.dumps(topic, indent=2) + "\n")
    shutil.copytree(path / "audit-0", path / "orders\n-0")
    (path / RECOVERY_POINT).write_text("0\n2\naudit 0 2\norders\n 0 2\n")
    (path / LOG_START_OFFSET).write_text("0\n2\naudit 0 0\norders\n 0 0\n")
    return bad_id


def user_files(path: Path) -> dict[str, bytes]:
    (path / "photos-2023").mkdir(parents=True)
    (path / "photos-2023" / "img.jpg").write_bytes(b"\xff\xd8jpeg")
    (path / "2024-01").mkdir()
    (path / "2024-01" / "sales.csv").write_bytes(b"month,total\n2024-01,7\n")
    return {"photos-2023/img.jpg": b"\xff\xd8jpeg", "2024-01/sales.csv": b"month,total\n2024-01,7\n"}
