"""`logtrove consume`, `lag` and `groups` on a data directory (no broker), in process,
and `consume --follow` as a subprocess while a writer appends."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.lag.helpers import TOPIC, MixedTopic, write_mixed_topic
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def mixed(tmp_path: Path) -> MixedTopic:
    return write_mixed_topic(tmp_path / "data", partitions=2, batches_per_partition=4, per_batch=50)


def _lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_consume_start_positions_and_formats(mixed: MixedTopic) -> None:
    data = str(mixed.path)
    code, out = run("consume", TOPIC, "-d", data, "-p", "0", "--count", "3")
    assert code == 0, out
    assert [line.split("\t")[0] for line in out.splitlines()] == ["0:0", "0:1", "0:2"]
    assert "tag=" in out.splitlines()[0] or mixed.tags[0][0] is None
    code, out = run("consume", TOPIC, "-d", data, "-o", "-5", "--json")
    got = _lines(out)
    assert sorted((m["partition"], m["offset"]) for m in got) == [
        (p, o) for p in (0, 1) for o in range(195, 200)
    ]
    with Storage.open(mixed.path, read_only=True) as storage:
        ts = [r.timestamp for r in storage.log(TOPIC, 1).records()]
    code, out = run("consume", TOPIC, "-d", data, "-p", "1", "-o", f"s@{ts[120]}", "--count", "1", "--json")
    assert _lines(out)[0]["offset"] == min(o for o, t in enumerate(ts) if t >= ts[120])
    code, out = run("consume", TOPIC, "-d", data, "-o", "end")
    assert code == 0 and out == ""
    code, out = run(
        "consume", TOPIC, "-d", data, "-o", "13", "-p", "0", "--tags", "TagD", "--json", "--count", "2"
    )
    assert [m["offset"] for m in _lines(out)] == [
        o for o, t in enumerate(mixed.tags[0]) if t == b"TagD" and o >= 13
    ][:2]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["consume", TOPIC, "--tags", "A ||"], 2, "invalid tag expression"),
        (["consume", TOPIC, "-o", "yesterday"], 2, "cannot read offset"),
        (["consume", TOPIC, "-o", "-²"], 2, "cannot read offset '-²'"),
        (["consume", TOPIC, "-o", "s@²"], 2, "cannot read time '²'"),
        (["consume", "nope"], 1, "unknown topic"),
        (["lag", "nobody"], 1, "no committed offsets"),
        (["groups", "subscribe", "g", TOPIC, "--tags", "||"], 2, "invalid tag expression"),
        (["groups", "subscribe", "g", "nope", "--tags", "A"], 1, "unknown topic"),
    ],
)
def test_bad_input_is_one_clear_line(mixed: MixedTopic, args: list[str], code: int, message: str) -> None:
    got, out = run(*args, "-d", str(mixed.path))
    assert got == code, out
    assert message in out


def test_group_consumption_by_tag_brings_lag_to_zero(mixed: MixedTopic) -> None:
    data = str(mixed.path)
    assert run("groups", "subscribe", "ops", TOPIC, "--tags", "TagC||TagB", "-d", data)[0] == 0
    code, out = run("lag", "ops", "-d", data, "--json")
    (before,) = json.loads(out)
    assert before["never_committed_partitions"] == 2 and before["topics"][0]["tags"] == "TagC || TagB"
    code, out = run(
        "consume", TOPIC, "-d", data, "--group", "ops", "--tags", "TagC || TagB", "--count", "7", "--json"
    )
    assert len(_lines(out)) == 7
    code, out = run("lag", "ops", "-d", data, "--json")
    (middle,) = json.loads(out)
    wanted = sum(t in (b"TagB", b"TagC") for p in (0, 1) for t in mixed.tags[p])
    in_p0 = sum(t in (b"TagB", b"TagC") for t in mixed.tags[0])
    assert middle["tag_lag"] == in_p0 - 7, "partition 0 served first; 1 still never committed"
    assert middle["never_committed_partitions"] == 1
    code, out = run("consume", TOPIC, "-d", data, "--group", "ops", "--tags", "TagC || TagB", "--json")
    assert len(_lines(out)) == wanted - 7, "resumed after the commit"
    code, out = run("lag", "ops", "-d", data, "--json")
    (after,) = json.loads(out)
    assert (after["lag"], after["tag_lag"], after["never_committed_partitions"]) == (0, 0, 0)
    code, out = run("lag", "-d", data)
    assert code == 0 and "ops" in out and "TagC || TagB" in out
    code, out = run("groups", "list", "-d", data, "--json")
    assert json.loads(out)[0]["subscriptions"] == {TOPIC: "TagC || TagB"}
    assert run("groups", "unsubscribe", "ops", TOPIC, "-d", data)[0] == 0
    code, out = run("groups", "list", "-d", data, "--json")
    assert json.loads(out)[0]["subscriptions"] == {}


def test_follow_prints_records_appended_later(mixed: MixedTopic) -> None:
    end = len(mixed.tags[1])  # start there explicitly: the append may come before the start-up ends
    args = [
        "consume",
        TOPIC,
        "-d",
        str(mixed.path),
        "-p",
        "1",
        "-o",
        str(end),
        "--follow",
        "--json",
        "--tags",
        "Late",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from logtrove.cli.main import main; main()", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        time.sleep(1.0)  # usually started by now; if not, it finds the records at once
        with Storage.open(mixed.path) as storage:
            records = [
                NewRecord(b"late-%d" % i, None, (("tag", b"Late" if i % 2 else b"Early"),), 0)
                for i in range(6)
            ]
            storage.log(TOPIC, 1).append(build_batch(records))
        values = [json.loads(lines.get(timeout=30))["value"] for _ in range(3)]
        assert values == ["late-1", "late-3", "late-5"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_lag_watch_refreshes_as_commits_move_and_stops_on_sigint(mixed: MixedTopic) -> None:
    import signal

    from logtrove.groups.consumer import StoreCommitter

    with Storage.open(mixed.path) as storage:
        StoreCommitter(storage).commit("watcher", TOPIC, {0: 10, 1: 20})
    args = ["lag", "watcher", "-d", str(mixed.path), "--watch", "--json", "--interval", "0.2"]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from logtrove.cli.main import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def next_lag() -> int:
        (group,) = json.loads(lines.get(timeout=30))
        assert group["group"] == "watcher"
        return int(group["lag"])

    ends = len(mixed.tags[0]), len(mixed.tags[1])
    try:
        first = next_lag()
        assert first == (ends[0] - 10) + (ends[1] - 20)
        assert next_lag() == first  # a second refresh, nothing changed yet
        with Storage.open(mixed.path) as storage:
            StoreCommitter(storage).commit("watcher", TOPIC, {0: 150, 1: ends[1]})
        later = [next_lag() for _ in range(3)]
        while later[-1] == first and len(later) < 100:  # refreshes that began before the commit
            later.append(next_lag())
        assert later[-1] == ends[0] - 150
        assert set(later) <= {first, ends[0] - 150}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_lag_watch_piped_prints_one_line_per_sample(mixed: MixedTopic) -> None:
    from logtrove.groups.consumer import StoreCommitter

    with Storage.open(mixed.path) as storage:
        StoreCommitter(storage).commit("watcher", TOPIC, {0: 10, 1: 20})
    lag = (len(mixed.tags[0]) - 10) + (len(mixed.tags[1]) - 20)
    args = ["lag", "watcher", "-d", str(mixed.path), "--watch", "--interval", "0.2"]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from logtrove.cli.main import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    try:
        samples = [lines.get(timeout=30) for _ in range(3)]  # each arrives as it is taken
    finally:
        proc.terminate()
        proc.wait(10)
    for line in samples:
        assert f"  watcher: lag {lag} (" in line and "┃" not in line, samples
