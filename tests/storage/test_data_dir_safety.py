"""Issue 13, findings 1, 2 and 9 at the storage level: topic names follow Kafka's rule on
the whole name, a data directory written by an older version with an illegal topic name
still opens (and the topic can be deleted), a data directory is logtrove's only when it
holds ``meta.json``, only directories marked for deletion are ever removed, and
checkpoints survive concurrent writers."""

from __future__ import annotations

import json
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.storage.data_dirs import batch, old_version_data_dir, user_files

from logtrove.storage import (
    DataDirError,
    InvalidTopicError,
    Storage,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from logtrove.storage.checkpoint import RECOVERY_POINT, CheckpointFile
from logtrove.storage.derived.indexer import Indexer


def values(storage: Storage, topic: str, partition: int = 0) -> list[bytes | None]:
    return [r.value for r in storage.log(topic, partition).records()]


# -- finding 1: topic names ------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["orders\n", "orders\r\n", "\norders", "orders\x00", "a" * 249 + "\n"], ids=repr
)
def test_a_name_with_a_final_newline_or_control_character_is_refused(tmp_path: Path, name: str) -> None:
    with Storage.open(tmp_path) as storage:
        with pytest.raises(InvalidTopicError):
            storage.create_topic(name)
        assert storage.topics() == []
        assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == ["topics"]


def test_data_dir_with_an_illegal_topic_name_opens_and_reports_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad_id = old_version_data_dir(tmp_path)
    with Storage.open(tmp_path) as storage:
        assert [t.name for t in storage.topics()] == ["audit"]
        assert values(storage, "audit") == [b"a1", b"a2"]
        [bad] = storage.invalid_topics()
        assert (bad.name, bad.shown, bad.topic_id) == ("orders\n", "orders\\n", bad_id)
        storage.create_topic("orders")
        storage.log("orders", 0).append(batch(b"o1"))
        storage.log("audit", 0).append(batch(b"a3"))
    # the messages, not caplog.text: once PySpark ran in this process its JSON formatter
    # escapes the backslash a second time
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "orders\\n" in logged and "logtrove topics delete" in logged
    assert CheckpointFile(tmp_path / RECOVERY_POINT).read() == {("audit", 0): 3, ("orders", 0): 1}
    with Storage.open(tmp_path, read_only=True) as reader:
        assert [t.name for t in reader.topics()] == ["audit", "orders"]
        assert values(reader, "audit") == [b"a1", b"a2", b"a3"]
        assert len(reader.invalid_topics()) == 1
    assert (tmp_path / "orders\n-0").is_dir(), "an invalid topic is reported, not deleted"


@pytest.mark.parametrize("how", ["exact name", "escaped name", "topic id"])
def test_an_illegal_topic_is_deleted_by_name_escaped_name_or_id(tmp_path: Path, how: str) -> None:
    bad_id = old_version_data_dir(tmp_path)
    ident = {"exact name": "orders\n", "escaped name": "orders\\n", "topic id": str(bad_id)}[how]
    with Storage.open(tmp_path) as storage:
        assert storage.delete_topic(ident) == bad_id
        assert storage.invalid_topics() == []
        with pytest.raises(UnknownTopicError):
            storage.delete_topic(ident)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["audit-0", "topics"]
    assert [p.name for p in (tmp_path / "topics").iterdir()] == ["audit.json"]
    with Storage.open(tmp_path) as storage:
        assert values(storage, "audit") == [b"a1", b"a2"]


def test_a_topic_file_holding_another_topic_is_reported_and_deleting_it_spares_that_topic(
    tmp_path: Path,
) -> None:
    old_version_data_dir(tmp_path)
    (tmp_path / "topics" / "copy.json").write_text((tmp_path / "topics" / "audit.json").read_text())
    (tmp_path / "topics" / "broken.json").write_text("{not json")
    with Storage.open(tmp_path) as storage:
        assert sorted(b.stem for b in storage.invalid_topics()) == ["broken", "copy", "orders\n"]
        storage.delete_topic("copy")
        storage.delete_topic("broken")
        assert values(storage, "audit") == [b"a1", b"a2"]
    assert sorted(p.name for p in (tmp_path / "topics").iterdir()) == ["audit.json", "orders\n.json"]


def test_checkpoint_reader_skips_bad_lines_and_writer_refuses_illegal_names(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT
    path.write_text("0\n4\na 0 5\norders\n 0 7\nb x 1\nc 1 9\n")
    assert CheckpointFile(path).read() == {("a", 0): 5, ("c", 1): 9}
    path.write_text("garbage")
    assert CheckpointFile(path).read() == {}
    before = path.read_bytes()
    with pytest.raises(StorageError, match="illegal topic name"):
        CheckpointFile(path).write({("ok", 0): 1, ("bad\n", 0): 2})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [RECOVERY_POINT], "no temporary file is left"


# -- finding 2: a data directory is logtrove's only when it says so ---------------------------
def test_writer_refuses_a_non_empty_directory_without_meta_json(tmp_path: Path) -> None:
    files = user_files(tmp_path)
    with pytest.raises(DataDirError, match=r"not a logtrove data directory.*--data") as caught:
        Storage.open(tmp_path)
    assert str(tmp_path) in str(caught.value) and "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2024-01", "photos-2023"], "nothing was written"
    assert {name: (tmp_path / name).read_bytes() for name in files} == files


def test_empty_or_missing_directory_is_initialised(tmp_path: Path) -> None:
    for path in (tmp_path / "empty", tmp_path / "missing" / "deeper"):
        if path.name == "empty":
            path.mkdir()
        with Storage.open(path) as storage:
            storage.create_topic("t")
        assert (path / "meta.json").is_file()


def test_user_folders_in_a_data_dir_survive_topic_create_delete_and_restarts(tmp_path: Path) -> None:
    Storage.open(tmp_path).close()  # a logtrove data directory (meta.json)
    files = user_files(tmp_path)
    for _round in range(2):
        with Storage.open(tmp_path) as storage:
            for name in ("photos", "2024"):
                storage.create_topic(name, 2)
                storage.log(name, 1).append(batch(b"x"))
            storage.delete_topic("photos")
            storage.delete_topic("2024")
    assert {name: (tmp_path / name).read_bytes() for name in files} == files


def test_partition_dir_without_topic_file_is_kept_and_not_taken_by_a_new_topic(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("orders", 1)
        storage.log("orders", 0).append(batch(b"x"))
    (tmp_path / "topics" / "orders.json").unlink()  # not logtrove's deletion: nothing marks it
    with Storage.open(tmp_path) as storage:
        assert storage.topics() == []
        with pytest.raises(TopicExistsError, match="no topic owns it"):
            storage.create_topic("orders")  # a new topic never takes on old records
        assert storage.topics() == []
    assert (tmp_path / "orders-0" / "00000000000000000000.log").stat().st_size > 0


def test_files_named_with_other_scripts_digits_are_left_alone(tmp_path: Path) -> None:
    """Only ASCII digits name a segment or a snapshot: "²" passes str.isdigit() but not
    int(), and "٣" would read as 3."""
    with Storage.open(tmp_path) as storage:
        storage.create_topic("orders", 1)
        storage.log("orders", 0).append(batch(b"x"))
    strays = dict.fromkeys(("²².log", "٣.log", "٣.snapshot"), b"not ours")
    for name, content in strays.items():
        (tmp_path / "orders-0" / name).write_bytes(content)
    for _round in range(2):
        with Storage.open(tmp_path) as storage:
            storage.log("orders", 0).append(batch(b"y"))
            assert values(storage, "orders") == [b"x"] + [b"y"] * (_round + 1)
    assert {name: (tmp_path / "orders-0" / name).read_bytes() for name in strays} == strays


@pytest.mark.parametrize("step", ["flagged", "flagged and marked", "marked only"])
def test_interrupted_topic_deletion_is_finished_on_open(tmp_path: Path, step: str) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("keep")
        storage.create_topic("gone", 2)
        storage.log("gone", 1).append(batch(b"x"))
        info = storage.topic("gone")
    topic_file = tmp_path / "topics" / "gone.json"
    topic_file.write_text(json.dumps(dict(info.to_json(), deleting=True)))  # step 1 of a delete
    from logtrove.storage.store import marked_dir_name

    if step != "flagged":  # step 2: partition directories renamed to Kafka's marked form
        for p in range(2):
            (tmp_path / f"gone-{p}").rename(tmp_path / marked_dir_name("gone", p))
    if step == "marked only":  # step 3: the topic file removed
        topic_file.unlink()
    with Storage.open(tmp_path, read_only=True) as reader:
        assert [t.name for t in reader.topics()] == ["keep"], "a topic being deleted is gone for readers"
    with Storage.open(tmp_path) as storage:
        assert [t.name for t in storage.topics()] == ["keep"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["keep-0", "topics"]
    assert [p.name for p in (tmp_path / "topics").iterdir()] == ["keep.json"]


def test_marked_names_fit_255_bytes_and_never_look_like_a_partition(tmp_path: Path) -> None:
    from logtrove.storage.store import is_marked_dir_name, marked_dir_name

    long_name = "t" * 249
    name = marked_dir_name(long_name, 9999)
    assert len(name.encode()) <= 255 and is_marked_dir_name(name) and name.endswith("-delete")
    assert not is_marked_dir_name("photos-2023") and not is_marked_dir_name("orders-0")
    with Storage.open(tmp_path) as storage:
        storage.create_topic(long_name, 2)
        storage.delete_topic(long_name)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["topics"]


# -- finding 9: concurrent writers ---------------------------------------------------------------
def run_for(seconds: float, *loops: Callable[[], object]) -> list[BaseException]:
    """Run each callable in its own thread, over and over, for ``seconds``; the errors."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def loop(step: Callable[[], object]) -> None:
        while not stop.is_set():
            try:
                step()
            except BaseException as exc:  # reported by the test
                errors.append(exc)
                stop.set()

    threads = [threading.Thread(target=loop, args=(step,)) for step in loops]
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(30)
    return errors


def test_topic_deletion_and_maintenance_write_checkpoints_concurrently(tmp_path: Path) -> None:
    storage = Storage.open(tmp_path)
    storage.create_topic("steady", 1, {"flush.ms": "0"})
    counter = iter(range(10**9))

    def churn() -> None:
        name = f"t{next(counter)}"
        storage.create_topic(name, 2)
        storage.log(name, 0).append(batch(b"x"))
        storage.delete_topic(name)

    def maintain() -> None:
        storage.log("steady", 0).append(batch(b"s"))
        storage.run_maintenance()
        storage.write_checkpoints()

    try:
        errors = run_for(3.0, churn, maintain, maintain)
        assert errors == [], "".join(traceback.format_exception(errors[0]))
    finally:
        storage.close()
    with Storage.open(tmp_path) as again:
        assert [t.name for t in again.topics()] == ["steady"]
        end = again.log("steady", 0).log_end_offset
    assert end > 0
    assert CheckpointFile(tmp_path / RECOVERY_POINT).read() == {("steady", 0): end}
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_reader_and_its_indexer_ride_out_topics_deleted_under_them(tmp_path: Path) -> None:
    writer = Storage.open(tmp_path)
    reader = Storage.open(tmp_path, read_only=True)
    indexer = Indexer(reader, sole_indexer=True, block_records=1)
    counter = iter(range(10**9))

    def churn() -> None:
        name = f"t{next(counter)}"
        writer.create_topic(name, 2)
        for _ in range(3):
            writer.log(name, 1).append(batch(b"x"))
        writer.delete_topic(name)

    try:
        errors = run_for(3.0, churn, lambda: indexer.run_once(flush_tail=True))
        assert errors == [], "".join(traceback.format_exception(errors[0]))
    finally:
        reader.close()
        writer.close()
