"""``logtrove query`` and ``logtrove index`` on a real data directory: every flag, JSON
lines, and clear errors with a non-zero exit code for bad input."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.query import MessageIdGenerator
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.derived import keyindex
from logtrove.storage.derived.blockfile import read_blocks
from logtrove.storage.derived.paths import derived_path
from logtrove.testing import FakeClock
from logtrove.testing.old_formats import rewrite_as_version_3

runner = CliRunner()
T0 = 1_763_800_000_000


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli") / "data"
    clock = FakeClock(T0)
    ids = MessageIdGenerator(1, clock=clock)
    with Storage.open(path, clock=clock) as storage:
        storage.create_topic("orders", 2, {"index.headers": "shop"})
        for i in range(200):
            clock.advance(1000)
            value = json.dumps({"order": {"id": i, "status": "failed" if i % 10 == 0 else "ok"}}).encode()
            if i == 150:
                value = b"\xff\xfe binary"
            headers = (("id", ids.next_id().encode()), ("shop", b"s%d" % (i % 4)))
            record = NewRecord(value, b"customer-%d" % (i % 7), headers, clock.now_ms())
            storage.log("orders", i % 2).append(build_batch([record]))
    return str(path)


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_index_command_indexes_every_topic(data: str) -> None:
    code, out, _ = run("index", "--data", data)
    assert code == 0 and "indexed 200 records" in out


def test_by_offset_prints_the_record_as_json(data: str) -> None:
    code, out, _ = run("query", "orders", "--partition", "1", "--offset", "3", "--json", "--data", data)
    assert code == 0
    (m,) = lines(out)
    assert (m["partition"], m["offset"], m["key"]) == (1, 3, "customer-0")
    assert json.loads(str(m["value"]))["order"]["id"] == 7
    assert m["headers"][1] == {"key": "shop", "value": "s3"}  # type: ignore[index]
    assert str(m["id"]).startswith("L")


def test_key_lookup_newest_first_with_limit_and_cursor(data: str) -> None:
    code, out, err = run("query", "orders", "--key", "customer-3", "--limit", "5", "--json", "--data", data)
    assert code == 0
    first = lines(out)
    assert len(first) == 5 and all(m["key"] == "customer-3" for m in first)
    assert [m["timestamp"] for m in first] == sorted((m["timestamp"] for m in first), reverse=True)  # type: ignore[type-var]
    cursor = json.loads(err)["cursor"]
    code, out, _ = run(
        "query", "orders", "--key", "customer-3", "--cursor", cursor, "--limit", "0", "--json", "--data", data
    )
    rest = lines(out)
    assert len(first) + len(rest) == sum(1 for i in range(200) if i % 7 == 3)


def test_time_range_and_time_lookup_accept_iso_8601(data: str) -> None:
    code, out, _ = run(
        "query",
        "orders",
        "--from",
        "2025-11-22T08:26:50Z",
        "--to",
        "2025-11-22T08:27:00Z",
        "--json",
        "--data",
        data,
    )
    assert code == 0
    got = lines(out)
    start, end = 1_763_800_010_000, 1_763_800_020_000
    assert len(got) == sum(1 for i in range(200) if start <= T0 + (i + 1) * 1000 < end)
    code, out, _ = run("query", "orders", "--time", str(T0 + 100_500), "--json", "--data", data)
    assert sorted(m["offset"] for m in lines(out)) == [50, 50]


def test_id_header_and_content_flags(data: str) -> None:
    _, out, _ = run("query", "orders", "-p", "0", "--offset", "10", "--json", "--data", data)
    client_id = lines(out)[0]["headers"][0]["value"]  # type: ignore[index]
    _, out, _ = run("query", "orders", "--id", str(client_id), "--json", "--data", data)
    assert [m["offset"] for m in lines(out)] == [10]
    _, out, _ = run("query", "orders", "--header", "shop=s2", "--limit", "0", "--json", "--data", data)
    assert len(lines(out)) == 50
    _, out, _ = run(
        "query", "orders", "--json-field", "order.status=failed", "--limit", "0", "--json", "--data", data
    )
    assert sorted(json.loads(str(m["value"]))["order"]["id"] for m in lines(out)) == [
        i for i in range(0, 200, 10) if i != 150
    ]
    _, out, _ = run("query", "orders", "--regex", r'"id": 19\d', "--limit", "0", "--json", "--data", data)
    assert len(lines(out)) == 10
    _, out, _ = run("query", "orders", "--contains", "binary", "--json", "--data", data)
    (m,) = lines(out)
    assert base64.b64decode(str(m["value_b64"])) == b"\xff\xfe binary" and "value" not in m


def test_human_output_is_a_table_with_the_completion_reason(data: str) -> None:
    code, out, _ = run("query", "orders", "--key", "customer-1", "--limit", "2", "--data", data)
    assert code == 0
    assert "orders: 2 messages" in out and "limit reached" in out and "--cursor" in out


def test_query_works_while_a_writer_holds_the_directory(data: str) -> None:
    with Storage.open(data) as writer:
        writer.log("orders", 0).append(build_batch([NewRecord(b"late arrival", b"late")]))
        code, out, _ = run("query", "orders", "--key", "late", "--json", "--data", data)
        assert code == 0 and [m["value"] for m in lines(out)] == ["late arrival"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", "nope", "--key", "x"], "unknown topic"),
        (["query", "orders", "-p", "9", "--offset", "0"], "no partition 9"),
        (["query", "orders", "-p", "0", "--offset", "100000"], "past the end"),
        (["query", "orders", "--from", "yesterday-ish"], "cannot read time"),
        (["query", "orders", "--from", "²"], "cannot read time '²'"),
        (["query", "orders", "--to", "٣"], "cannot read time '٣'"),
        (["query", "orders", "--time", "-5"], "outside the range of epoch milliseconds"),
        (["query", "orders", "--regex", "(unclosed"], "invalid regular expression"),
        (["query", "orders", "--json-field", "a..b=1"], "bad JSON path"),
        (["query", "orders", "--json-field", "no-equals"], "PATH=VALUE"),
        (["query", "orders", "--key", "a", "--id", "b"], "one question at a time"),
        (["query", "orders", "--offset", "3"], "--offset needs --partition"),
        (["query", "orders", "--key", "a", "--cursor", "garbage!"], "malformed cursor"),
        (["query", "orders", "--from", "2000", "--to", "1000"], "empty time range"),
        (["query", "orders"], "say what to find"),
    ],
)
def test_bad_input_gives_a_clear_error_and_nonzero_exit(data: str, args: list[str], message: str) -> None:
    code, out, err = run(*args, "--data", data)
    assert code != 0
    assert message in (out + err).replace("\n", " ")


def test_index_upgrade_rewrites_an_older_key_index_layout_and_lookups_stay_exact(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with Storage.open(path) as storage:
        storage.create_topic("t", 2, {"segment.bytes": "20000", "index.headers": "shop"})
        for i in range(600):
            record = NewRecord(b"v%d" % i, b"k%d" % (i % 13), (("shop", b"s%d" % (i % 5)),), T0 + i)
            storage.log("t", i % 2).append(build_batch([record]))
    assert run("index", "--data", str(path))[0] == 0
    with Storage.open(path, read_only=True) as storage:
        segments = [seg for p in (0, 1) for seg in storage.log("t", p).segments]
        assert len(segments) >= 4
        for seg in segments:  # as an older logtrove left them
            rewrite_as_version_3(derived_path(seg, keyindex.SUFFIX), seg.base_offset)
        expected = [r.offset for r in storage.log("t", 1).records() if r.key == b"k4"][::-1]

    def versions() -> set[int]:
        with Storage.open(path, read_only=True) as storage:
            return {
                b.version
                for p in (0, 1)
                for seg in storage.log("t", p).segments
                for b in read_blocks(derived_path(seg, keyindex.SUFFIX), keyindex.KIND, seg.base_offset)
            }

    def found() -> list[int]:
        code, out, _ = run("query", "t", "--key", "k4", "--partition", "1", "--json", "--data", str(path))
        assert code == 0
        return [int(str(m["offset"])) for m in lines(out)]

    assert run("index", "--data", str(path))[0] == 0 and versions() == {3}  # read, kept as it is
    assert found() == expected
    code, out, _ = run("index", "--upgrade", "--data", str(path))
    assert code == 0 and f"rewrote the indexes of {len(segments)} segments" in out
    assert versions() == {4} and found() == expected
    code, out, _ = run("index", "t", "--upgrade", "--data", str(path))
    assert code == 0 and "rewrote the indexes of 0 segments" in out
