"""The ``combined-log`` parser's Spark expressions give, value for value, what its
documented rules give when applied with Python's ``re`` (ASCII classes, as Java's): the
single-pass groups, their NUL fallback, the request's words and every null rule."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from tests.spark.helpers import ACCESS_LINES

from logtrove.spark.columns import spark_schema
from logtrove.spark.parse import _REQUEST, COMBINED_LOG, parse_values

TRICKY_LINES = [
    *ACCESS_LINES,
    # a NUL inside a group: more than 9 pieces, so the per-group fallback answers
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /a\x00b HTTP/1.1" 200 12 "-" "agent\x00x"',
    # NUL outside the groups, after the match
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET / HTTP/1.1" 200 12 trailing\x00junk',
    # no referer / user agent (the optional part), two-word request, escaped quotes
    '1.2.3.4 - bob [22/Nov/2026:03:04:05 +0000] "GET /x" 200 1',
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /q?s=\\"hi\\" HTTP/1.1" 200 7 "r" "ua \\"quoted\\""',
    # a request of four words and one with a tab: the line matches, the request does not
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /x HTTP/1.1 extra" 200 1 "-" "-"',
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET\t/x HTTP/1.1" 200 1 "-" "-"',
    # a newline after the match, and inside the request
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET / HTTP/1.1" 200 1 "-" "-"\nsecond line',
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /\nx HTTP/1.1" 200 1 "-" "-"',
    # escaped backslashes next to quotes, a quote escaped at the end, a lone backslash
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /a\\\\" 200 1 "x\\\\\\"y" "\\\\"',
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /a\\" 200 1 "-" "-"',
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET /a\\" 200 1 "-" "-" "more\\"',
    # a time that does not parse, a status that is not 3 digits, an empty line
    '1.2.3.4 - - [yesterday] "GET / HTTP/1.1" 200 1 "-" "-"',
    '1.2.3.4 - - [22/Nov/2026:03:04:05 +0000] "GET / HTTP/1.1" 20x 1 "-" "-"',
    "",
    None,
]


# the pattern as first written, without possessive loops: the reference for the faster one
BACKTRACKING = COMBINED_LOG.replace(")*+)", ")*)")


def _dash(text: str) -> str | None:
    return None if text in ("-", "") else text


def reference(line: str | None) -> dict[str, Any]:
    """The parser's rules (module doc of :mod:`logtrove.spark.parse`) in plain Python."""
    names = ("remote_addr", "ident", "remote_user", "time_local", "method", "path", "protocol")
    names += ("status", "bytes", "referer", "user_agent")
    match = None if line is None else re.search(BACKTRACKING, line, re.ASCII)
    if match is None:
        return dict.fromkeys(names)
    g = [match.group(i) or "" for i in range(1, 10)]
    request = re.search(_REQUEST, g[4], re.ASCII)
    words = [(request.group(i) or "") if request else "" for i in (1, 2, 3)]
    try:
        when = datetime.strptime(g[3], "%d/%b/%Y:%H:%M:%S %z").astimezone(UTC).replace(tzinfo=None)
    except ValueError:
        when = None
    size = _dash(g[6])
    fields = [_dash(g[0]), _dash(g[1]), _dash(g[2]), when, *map(_dash, words), int(g[5])]
    fields += [None if size is None else int(size), _dash(g[7]), _dash(g[8])]
    return dict(zip(names, fields, strict=True))


def test_combined_log_columns_equal_the_rules_applied_in_python(spark: Any) -> None:
    rows = [
        (None, None if line is None else line.encode(), "t", 0, i, datetime(2026, 1, 1), 0, None, None)
        for i, line in enumerate(TRICKY_LINES)
    ]
    df = parse_values(spark.createDataFrame(rows, spark_schema(False)), "combined-log")
    got = {r.offset: r.asDict() for r in df.collect()}
    assert len(got) == len(TRICKY_LINES)
    for i, line in enumerate(TRICKY_LINES):
        row = got[i]
        assert row["value"] == line
        assert {k: row[k] for k in reference(line)} == reference(line), (i, line)
    assert got[len(ACCESS_LINES)]["user_agent"] == "agent\x00x"  # the fallback path
    assert got[len(ACCESS_LINES)]["path"] == "/a\x00b"
    assert BACKTRACKING != COMBINED_LOG
