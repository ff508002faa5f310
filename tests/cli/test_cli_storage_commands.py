"""The issue-2 CLI commands (topics, produce, dump-log) against real data directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2
from tests.records.helpers import patch_header
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.checkpoint import INDEX_OFFSET
from logtrove.storage.derived.indexer import Indexer

runner = CliRunner()


def run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.output


def records_of(data: Path, topic: str) -> dict[int, list]:
    with Storage.open(data, read_only=True) as storage:
        info = storage.topic(topic)
        return {p: list(storage.log(topic, p).records()) for p in range(info.partitions)}


def test_topics_lifecycle_with_json_output(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    code, out = run(
        "topics", "create", "orders", "-p", "3", "-c", "retention.ms=60000", "--data", data, "--json"
    )
    assert code == 0, out
    assert json.loads(out)["partitions"] == 3
    code, out = run("topics", "list", "--data", data, "--json")
    assert [t["name"] for t in json.loads(out)] == ["orders"]
    code, out = run(
        "topics", "alter", "orders", "-c", "retention.ms=1000", "--partitions", "4", "--data", data
    )
    assert code == 0, out
    code, out = run("topics", "describe", "orders", "--data", data, "--json")
    described = json.loads(out)
    assert described["configs"]["retention.ms"] == "1000"
    assert len(described["partition_details"]) == 4
    code, out = run("topics", "delete", "orders", "--data", data)
    assert code == 0
    code, out = run("topics", "list", "--data", data, "--json")
    assert json.loads(out) == []


def test_describe_shows_how_far_the_indexer_got(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert run("topics", "create", "t", "-p", "2", "--data", str(data))[0] == 0
    lines = "".join(json.dumps({"key": f"k{i}", "value": "v", "partition": i % 2}) + "\n" for i in range(7))
    assert run("produce", "t", "--data", str(data), input=lines)[0] == 0

    def indexed() -> list[int | None]:
        code, out = run("topics", "describe", "t", "--data", str(data), "--json")
        assert code == 0, out
        return [p["indexed_offset"] for p in json.loads(out)["partition_details"]]

    assert indexed() == [None, None]  # no indexer has run: no figure rather than a wrong 0
    with Storage.open(data) as storage:
        Indexer(storage).catch_up()
    assert indexed() == [4, 3]
    code, out = run("topics", "describe", "t", "--data", str(data))
    assert code == 0 and "indexed" in out
    (data / INDEX_OFFSET).write_text("garbage\n")  # damaged: the indexer rewrites it
    assert indexed() == [None, None]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["topics", "create", "bad name"], "invalid topic name"),
        (["topics", "create", "t", "-c", "no.such.config=1"], "unknown topic config 'no.such.config'"),
        (["topics", "create", "t", "-c", "retention.ms=soon"], "invalid value for retention.ms"),
        (["topics", "create", "t", "-c", "retention.ms"], "NAME=VALUE"),
        (["topics", "describe", "missing"], "unknown topic 'missing'"),
        (["topics", "delete", "missing"], "unknown topic 'missing'"),
    ],
)
def test_topic_errors_are_clear(tmp_path: Path, args: list[str], message: str) -> None:
    assert run("topics", "create", "other", "--data", str(tmp_path / "d"))[0] == 0
    code, out = run(*args, "--data", str(tmp_path / "d"))
    assert code != 0
    assert message in out


def test_read_only_commands_on_a_missing_dir_explain(tmp_path: Path) -> None:
    code, out = run("topics", "list", "--data", str(tmp_path / "nothing"))
    assert code == 1
    assert "not a logtrove data directory" in out


def test_produce_places_records_like_kafkas_default_partitioner(tmp_path: Path) -> None:
    data = tmp_path / "d"
    run("topics", "create", "t", "-p", "4", "--data", str(data))
    keys = [f"user-{i}" for i in range(50)]
    lines = [json.dumps({"key": k, "value": f"v{i}", "headers": {"id": f"m{i}"}}) for i, k in enumerate(keys)]
    lines.append(json.dumps({"value": {"nested": [1, 2]}, "timestamp": 1234, "partition": 3}))
    code, out = run(
        "produce", "t", "--data", str(data), "--compression", "zstd", input="\n".join(lines) + "\n"
    )
    assert code == 0, out
    placed = records_of(data, "t")
    for p, records in placed.items():
        for r in records:
            if r.key is not None:
                assert (murmur2(bytearray(r.key)) & 0x7FFFFFFF) % 4 == p  # kafka-python's default partitioner
    explicit = [r for r in placed[3] if r.key is None]
    assert explicit[0].value == b'{"nested":[1,2]}'
    assert explicit[0].timestamp == 1234
    assert sum(len(v) for v in placed.values()) == 51
    by_key = {r.key: r for rs in placed.values() for r in rs if r.key}
    assert by_key[b"user-7"].headers == (("id", b"m7"),)


def test_produce_keyless_records_round_robin(tmp_path: Path) -> None:
    data = tmp_path / "d"
    run("topics", "create", "t", "-p", "3", "--data", str(data))
    lines = "".join(json.dumps({"value": str(i)}) + "\n" for i in range(9))
    assert run("produce", "t", "--data", str(data), input=lines)[0] == 0
    assert [len(v) for v in records_of(data, "t").values()] == [3, 3, 3]


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ("{not json", "not valid JSON"),
        ('{"key": "k"}', '"value" is required'),
        ('{"value": "v", "key": 5}', '"key" must be a string'),
        ('{"value": "v", "timestamp": "yesterday"}', '"timestamp" must be epoch milliseconds'),
        ('{"value": "v", "partition": 9}', "partition 9 does not exist"),
        ('{"value": "v", "colour": "red"}', "unknown field(s) colour"),
        ('["value"]', "expected a JSON object"),
    ],
)
def test_produce_rejects_a_bad_line_and_writes_nothing(tmp_path: Path, bad_line: str, reason: str) -> None:
    data = tmp_path / "d"
    run("topics", "create", "t", "-p", "2", "--data", str(data))
    good = json.dumps({"key": "a", "value": "1"})
    code, out = run("produce", "t", "--data", str(data), input=f"{good}\n{good}\n{bad_line}\n{good}\n")
    assert code == 1
    assert "line 3" in out and reason in out and "nothing was written" in out
    assert all(not records for records in records_of(data, "t").values())


def test_second_writer_is_told_who_holds_the_lock(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Storage.open(data, holder="logtrove serve"):
        code, out = run("topics", "create", "t", "--data", str(data))
        assert code == 1
        assert "locked by another writer" in out and "logtrove serve" in out
        # read-only commands still work while the writer holds the directory
        assert run("topics", "list", "--data", str(data))[0] == 0


def test_dump_log_prints_batches_records_and_verifies_indexes(tmp_path: Path) -> None:
    data = tmp_path / "d"
    run("topics", "create", "t", "-c", "index.interval.bytes=100", "--data", str(data))
    lines = "".join(json.dumps({"key": f"k{i}", "value": "x" * 50}) + "\n" for i in range(200))
    for _ in range(5):
        run("produce", "t", "--data", str(data), "--batch-records", "10", input=lines)
    log_file = data / "t-0" / "00000000000000000000.log"
    code, out = run("dump-log", str(log_file), "--print-data", "--verify-index", "--json")
    assert code == 0, out
    objects = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    batches = [o for o in objects if "baseOffset" in o]
    records = [o for o in objects if "offset" in o]
    assert len(batches) == 100 and len(records) == 1000
    assert [r["offset"] for r in records] == list(range(1000))
    index_file = log_file.with_suffix(".index")
    code, out = run("dump-log", str(index_file))
    assert code == 0 and "position:" in out
    # corrupt one index entry: verification reports it and exits 1
    raw = bytearray(index_file.read_bytes())
    raw[12:16] = (int.from_bytes(raw[12:16], "big") + 1).to_bytes(4, "big")
    index_file.write_bytes(bytes(raw))
    code, out = run("dump-log", str(log_file), "--verify-index")
    assert code == 1 and "does not point at a batch" in out


def test_dump_log_reports_a_torn_tail(tmp_path: Path) -> None:
    data = tmp_path / "d"
    run("produce", "t", "--data", str(data), input='{"value": "hello"}\n')
    log_file = data / "t-0" / "00000000000000000000.log"
    with log_file.open("ab") as f:
        f.write(b"\x00" * 30)
    code, out = run("dump-log", str(log_file))
    assert code == 1 and "batch at position 73" in out


@pytest.mark.parametrize("flags", [["--verify-index"], ["--print-data"], ["--verify-index", "--json"]])
def test_dump_log_reports_a_batch_with_an_unknown_codec(tmp_path: Path, flags: list[str]) -> None:
    """Issue 13, finding 11: a codec-5 batch (written by something else) used to end
    ``dump-log --verify-index`` with a traceback."""
    with Storage.open(tmp_path / "d") as storage:
        storage.create_topic("c5", 1)
        log = storage.log("c5", 0)
        log.append(build_batch([NewRecord(b"ok")]))
        codec5 = patch_header(build_batch([NewRecord(b"x")]), attributes=5, base_offset=1)
        log.append(bytes(codec5), assign_offsets=False)
    log_file = tmp_path / "d" / "c5-0" / "00000000000000000000.log"
    code = "from logtrove.cli.main import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "dump-log", str(log_file), *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in out, out
    assert out.count("batch at position 70: unknown compression codec id 5") == 1, out


def test_console_script_help_and_bad_flag() -> None:
    exe = Path(sys.executable).with_name("logtrove")
    ok = subprocess.run([exe, "produce", "--help"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "Examples" in ok.stdout
    bad = subprocess.run([exe, "topics", "create", "--bogus"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "No such option" in bad.stderr


def test_compact_says_why_nothing_was_removed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic("users", 1, {"cleanup.policy": "compact"})
        storage.log("users", 0).append(build_batch([NewRecord(b"v1", b"k"), NewRecord(b"v2", b"k")]))
    code, out = run("compact", "users", "--data", str(data))
    assert code == 0, out
    flat = " ".join(out.split())
    assert "users-0: nothing removed: no segment could be cleaned" in flat
    assert "from offset 0 on are in the active segment" in flat
