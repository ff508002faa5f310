"""Content predicates: substring, regular expression, JSON field = value.

Each predicate answers three questions, from cheapest to dearest:

* :meth:`Predicate.required_tokens`: tokens (see :mod:`logtrove.storage.derived.skipindex`)
  that every matching value holds; a ``.skip`` block lacking one is skipped unread.
* :meth:`Predicate.may_match_batch`: a test on the raw, decompressed bytes of a whole
  batch; ``False`` means no record of the batch can match, so none is parsed. Sound
  because every value is a contiguous substring of its batch's payload.
* :meth:`Predicate.matches`: the exact test on one record value.

Regular expressions run on RE2 (``google-re2``), never on Python's backtracking ``re``:
RE2 matches in time linear in the text, whatever the pattern, and releases the GIL while
it runs, so a hostile pattern such as ``(a+)+$`` cannot freeze the process it runs in
(the broker, when the HTTP API searches). The price is RE2's syntax: no backreferences,
no lookaround, no possessive or atomic groups, and counted repetition up to 1000.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

import re2

from logtrove.clock import ascii_int
from logtrove.query.errors import InvalidQueryError
from logtrove.storage.derived.skipindex import bounded_tokens, whole_tokens

_CONTEXT_SENSITIVE = re.compile(r"\^|\$|\\[AbBz]")
RE2_SYNTAX = "https://github.com/google/re2/wiki/Syntax"
MAX_REPEAT = 1000
"""RE2's largest repetition count (``a{1000}``); a larger one is refused, not read as text."""
# A counted repetition where RE2 would read one: {n}, {n,} or {n,m} (checked outside
# character classes and escapes by _check_repetitions).
_REPEAT = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")
# RE2's errors for constructs it does not have, and what to tell the user instead.
_UNSUPPORTED = (
    (re.compile(r"escape sequence: \\[1-9k]|operator: \(\?P$"), "backreferences are not supported"),
    (re.compile(r"operator: \(\?<?[=!]"), "lookaround ((?= (?! (?<= (?<!) is not supported"),
    (
        re.compile(r"operator: \(\?>|repetition operator: [*+?}]\+"),
        "atomic groups and possessive repetition are not supported",
    ),
    (re.compile(r"escape sequence: \\Z"), "\\Z is not supported (write \\z for the end of the text)"),
)
_SAFE_LITERAL = re.compile(r"[A-Za-z0-9 _.:@-]*")


class Predicate(Protocol):
    description: str

    def matches(self, value: bytes | None) -> bool: ...

    def may_match_batch(self, payload: bytes) -> bool: ...

    def required_tokens(self) -> list[bytes]: ...


class Contains:
    """The value contains ``text`` (bytes, case-sensitive)."""

    def __init__(self, text: str | bytes) -> None:
        try:
            self.text = text.encode("utf-8") if isinstance(text, str) else text
        except UnicodeEncodeError:
            raise InvalidQueryError(f"{text!r} is not valid Unicode text (a lone surrogate)") from None
        if not self.text:
            raise InvalidQueryError("--contains needs a non-empty string")
        self.description = f"contains {self.text!r}"

    def matches(self, value: bytes | None) -> bool:
        return value is not None and self.text in value

    def may_match_batch(self, payload: bytes) -> bool:
        return self.text in payload

    def required_tokens(self) -> list[bytes]:
        return bounded_tokens(self.text)


class Regex:
    """The value matches a regular expression: RE2 syntax, over the value's bytes.

    The pattern is UTF-8 encoded and matched byte by byte (RE2's Latin-1 mode), as a
    Python bytes pattern would be: ``.`` matches any byte but newline, ``\\w`` is ASCII.
    Patterns RE2 cannot run in linear time (backreferences, lookaround) are refused with
    :class:`InvalidQueryError` saying so.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.regex = compile_regex(pattern)
        # A pattern without anchors or word boundaries that matches a value also matches
        # any text containing it, such as the batch payload: then the payload can prefilter.
        self.prefilters = not _CONTEXT_SENSITIVE.search(pattern)
        self.matches_empty = self.regex.search(b"") is not None  # then it matches every value
        self.description = f"matches /{pattern}/"

    def matches(self, value: bytes | None) -> bool:
        return value is not None and self.regex.search(value) is not None

    def may_match_batch(self, payload: bytes) -> bool:
        return not self.prefilters or self.regex.search(payload) is not None

    def required_tokens(self) -> list[bytes]:
        return []


def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 for matching bytes; :class:`InvalidQueryError` with a
    one-line reason when RE2 cannot compile it or it is not UTF-8 text."""
    try:
        raw = pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidQueryError(
            f"invalid regular expression {_quote(pattern)}: it is not valid Unicode text (a lone surrogate)"
        ) from None
    _check_repetitions(pattern)
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.encoding = re2.Options.Encoding.LATIN1
    try:
        return re2.compile(raw, options)
    except re2.error as exc:
        raise InvalidQueryError(_explain(pattern, exc)) from None


def _explain(pattern: str, exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    for found, what in _UNSUPPORTED:
        if found.search(text):
            return (
                f"invalid regular expression {_quote(pattern)}: {what}; logtrove uses RE2, which "
                f"matches in linear time ({RE2_SYNTAX})"
            )
    return f"invalid regular expression {_quote(pattern)}: {text} (RE2 syntax: {RE2_SYNTAX})"


def _check_repetitions(pattern: str) -> None:
    """Refuse a counted repetition over :data:`MAX_REPEAT`: RE2 rejects ``a{1001}`` but
    silently reads ``a{99999999999}`` as literal text, which would search for the wrong
    thing. Braces in character classes, escaped or inside ``\\Q…\\E`` are text."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            i += 2
        elif c == "[":
            i = _class_end(pattern, i)
        elif c == "{" and (found := _REPEAT.match(pattern, i)):
            for count in found.groups():
                digits = (count or "0").lstrip("0")
                if len(digits) > len(str(MAX_REPEAT)) or int(digits or "0") > MAX_REPEAT:
                    shown = digits if len(digits) <= 20 else f"{digits[:20]}… ({len(digits)} digits)"
                    raise InvalidQueryError(
                        f"invalid regular expression {_quote(pattern)}: repetition count {shown} is over "
                        f"the limit of {MAX_REPEAT} (write \\{{ for a literal brace)"
                    )
            i = found.end()
        else:
            i += 1


def _quote(pattern: str) -> str:
    """``pattern`` quoted for an error line, cut short if it is long."""
    return repr(pattern) if len(pattern) <= 200 else f"{pattern[:200]!r}… ({len(pattern)} characters)"


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at ``pattern[i] == "["``."""
    i += 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):  # a leading ] is a member
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        if pattern.startswith("[:", i):  # [[:alpha:]]
            end = pattern.find(":]", i + 2)
            i = i + 1 if end < 0 else end + 2
            continue
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


class JsonField:
    """The value is JSON and the field at ``path`` (``a.b.c``, list items by number)
    equals ``expected``: compared as JSON when it parses as JSON (``200``, ``true``,
    ``"x"``), and as a string otherwise; a string field also matches the raw text."""

    def __init__(self, path: str, expected: str) -> None:
        parts = path.split(".")
        if not path or any(not p or p != p.strip() for p in parts):
            raise InvalidQueryError(f"bad JSON path {path!r}: use dotted field names like a.b.c")
        self.path = parts
        self.text = expected
        try:
            self.expected: Any = json.loads(expected)
        except ValueError:
            self.expected = expected
        self.literal = self._literal()
        self.description = f"JSON {path} = {expected}"

    @classmethod
    def parse(cls, spec: str) -> JsonField:
        """``a.b.c=value`` as given on the command line."""
        path, sep, expected = spec.partition("=")
        if not sep:
            raise InvalidQueryError(f"bad JSON field test {spec!r}: use PATH=VALUE, e.g. order.id=4711")
        return cls(path.strip(), expected)

    def _literal(self) -> bytes | None:
        """Bytes every matching value must contain, if that can be known."""
        exp = self.expected
        if isinstance(exp, bool) or exp is None:
            return self.text.strip().encode()
        if isinstance(exp, str) and _SAFE_LITERAL.fullmatch(exp) and exp:
            return exp.encode()
        return None  # numbers have several spellings (2e2, 200.0); objects too

    def _field(self, value: bytes) -> tuple[bool, Any]:
        try:
            node: Any = json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
            return False, None
        for part in self.path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and (index := ascii_int(part)) is not None and index < len(node):
                node = node[index]
            else:
                return False, None
        return True, node

    def matches(self, value: bytes | None) -> bool:
        if value is None:
            return False
        found, field = self._field(value)
        if not found:
            return False
        if isinstance(field, str) and field == self.text:
            return True
        if isinstance(field, bool) or isinstance(self.expected, bool):
            return type(field) is type(self.expected) and field == self.expected
        return bool(field == self.expected)

    def may_match_batch(self, payload: bytes) -> bool:
        return self.literal is None or self.literal in payload

    def required_tokens(self) -> list[bytes]:
        # A string field sits between quotes, true/false/null between JSON punctuation:
        # every token of the literal is a whole token of the value.
        return [] if self.literal is None else whole_tokens(self.literal)
