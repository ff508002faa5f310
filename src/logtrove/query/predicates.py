"""Content predicates: substring, regular expression, JSON field = value.

Each predicate answers three questions, from cheapest to dearest:

* :meth:`Predicate.required_tokens`: tokens (see :mod:`logtrove.storage.skipindex`)
  that every matching value holds; a ``.skip`` block lacking one is skipped unread.
* :meth:`Predicate.may_match_batch`: a test on the raw, decompressed bytes of a whole
  batch; ``False`` means no record of the batch can match, so none is parsed. Sound
  because every value is a contiguous substring of its batch's payload.
* :meth:`Predicate.matches`: the exact test on one record value.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from logtrove.query.errors import InvalidQueryError
from logtrove.storage.skipindex import bounded_tokens, whole_tokens

_CONTEXT_SENSITIVE = re.compile(r"\^|\$|\\[AZbBzG]|\(\?<?[=!]")
_SAFE_LITERAL = re.compile(r"[A-Za-z0-9 _.:@-]*")


class Predicate(Protocol):
    description: str

    def matches(self, value: bytes | None) -> bool: ...

    def may_match_batch(self, payload: bytes) -> bool: ...

    def required_tokens(self) -> list[bytes]: ...


class Contains:
    """The value contains ``text`` (bytes, case-sensitive)."""

    def __init__(self, text: str | bytes) -> None:
        self.text = text.encode("utf-8") if isinstance(text, str) else text
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
    """The value matches a regular expression (Python syntax, over the value's bytes)."""

    def __init__(self, pattern: str) -> None:
        try:
            self.regex = re.compile(pattern.encode("utf-8"))
        except re.error as exc:
            raise InvalidQueryError(f"invalid regular expression {pattern!r}: {exc}") from None
        # A pattern without anchors or lookarounds that matches a value also matches any
        # text containing it, such as the batch payload: then the payload can prefilter.
        self._prefilter = not _CONTEXT_SENSITIVE.search(pattern)
        self.description = f"matches /{pattern}/"

    def matches(self, value: bytes | None) -> bool:
        return value is not None and self.regex.search(value) is not None

    def may_match_batch(self, payload: bytes) -> bool:
        return not self._prefilter or self.regex.search(payload) is not None

    def required_tokens(self) -> list[bytes]:
        return []


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
        except ValueError:
            return False, None
        for part in self.path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
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
