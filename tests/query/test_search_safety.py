"""Content search cannot be made to hang or crash: user regexes run on RE2 (linear time),
what RE2 cannot run is refused with a one-line reason, the time budget ends a search with
"budget exhausted" and a cursor, and a JSON value nested too deep is simply no match."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from logtrove.query import ContentQuery, InvalidQueryError, JsonField, QueryEngine, Reason, Regex
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

CLI = "from logtrove.cli.main import main; main()"
EVIL = "(a+)+$"


def logtrove(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess; a hang fails the test at the timeout."""
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def traps(tmp_path: Path) -> Path:
    """A topic whose values make Python's ``re`` backtrack for minutes on ``(a+)+$``."""
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic("traps", 1)
        trap = NewRecord(b"a" * 32 + b"!")
        storage.log("traps", 0).append(build_batch([trap, NewRecord(b"aaaa"), trap]))
    return data


def test_cli_catastrophic_regex_ends_with_the_match(traps: Path) -> None:
    done = logtrove("query", "traps", "--regex", EVIL, "--json", "--data", str(traps))
    assert done.returncode == 0, done.stderr
    assert '"value": "aaaa"' in done.stdout and '"range exhausted"' in done.stderr


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("a{99999999999}", "repetition count 99999999999 is over the limit of 1000"),
        (r"(\w)\1", "backreferences are not supported"),
        ("(?<!x)a", "lookaround"),
    ],
)
def test_cli_regex_refused_with_one_line_and_exit_2(traps: Path, pattern: str, reason: str) -> None:
    done = logtrove("query", "traps", "--regex", pattern, "--data", str(traps))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: invalid regular expression") and reason in line


@pytest.mark.parametrize(
    ("pattern", "value", "hit"),
    [
        (r"\{99999\}", b"x{99999}", True),  # escaped and class braces are text
        (r"[{]1{2}", b"{11", True),
        (r"\Qa{99999}\E", b"a{99999}", True),
        ("a.c", b"a\xffc", True),  # over bytes, as a Python bytes pattern
        (r"^\d{3}-\d{4}\z", b"555-1234", True),
        ("é+", "ééé".encode(), True),
        ("x{2,}y", b"xy", False),
    ],
)
def test_regex_is_matched_over_the_value_bytes(pattern: str, value: bytes, hit: bool) -> None:
    assert Regex(pattern).matches(value) is hit


def test_regex_that_is_not_unicode_text_is_refused() -> None:
    with pytest.raises(InvalidQueryError, match="lone surrogate"):
        Regex("\ud800")


def test_time_budget_ends_a_content_search_with_a_cursor(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic("t", 2)
        for p in (0, 1):
            storage.log("t", p).append(build_batch([NewRecord(b"hit %d" % p)]))
        question = ContentQuery("t", Regex("hit"))
        found, completion = QueryEngine(storage, content_time_limit_s=0).run(question).all()
        assert (found, completion.reason) == ([], Reason.BUDGET)
        assert completion.cursor is not None
        resumed = ContentQuery("t", Regex("hit"), cursor=completion.cursor)
        rest, end = QueryEngine(storage).run(resumed).all()
        assert sorted(m.value for m in rest) == [b"hit 0", b"hit 1"] and end.reason == Reason.EXHAUSTED


def test_json_nested_deeper_than_python_parses_is_no_match(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic("t", 1)
        storage.log("t", 0).append(build_batch([NewRecord(b"[" * 100_000), NewRecord(b'{"a": 1}')]))
        found, completion = QueryEngine(storage).run(ContentQuery("t", JsonField.parse("a=1"))).all()
        assert [m.value for m in found] == [b'{"a": 1}'] and completion.reason == Reason.EXHAUSTED


def test_repetition_count_of_thousands_of_digits_is_a_query_error() -> None:
    with pytest.raises(InvalidQueryError, match=r"5000 digits\) is over the limit of 1000"):
        Regex("a{" + "9" * 5000 + "}")
