"""Records as JSON messages, times as parameters, and the CLI command that matches a request."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Sequence

from logtrove import clock
from logtrove.http.models import Header, Message
from logtrove.http.problems import bad_request
from logtrove.query import Message as QueryMessage


def _text_or_b64(raw: bytes | None) -> tuple[str | None, str | None]:
    if raw is None:
        return None, None
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(raw).decode("ascii")


def render_message(message: QueryMessage, *, id_header: str = "id") -> Message:
    """The JSON form of one found message (text when UTF-8, base64 otherwise), with its
    position ID and, if it has one, its client message ID (the ``id_header`` header)."""
    key, key_b64 = _text_or_b64(message.key)
    value, value_b64 = _text_or_b64(message.value)
    headers = []
    for name, raw in message.headers:
        text, b64 = _text_or_b64(raw)
        headers.append(Header(name=name, value=text, value_b64=b64))
    client_raw = message.header(id_header)
    return Message(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp=message.timestamp,
        key=key,
        key_b64=key_b64,
        value=value,
        value_b64=value_b64,
        headers=headers,
        id=message.id,
        client_id=_text_or_b64(client_raw)[0] if client_raw is not None else None,
    )


def parse_time(text: str, name: str) -> int:
    """Epoch milliseconds from ``1700000000000`` or ISO-8601 (UTC when no zone), read by
    :func:`logtrove.clock.parse_time`; a 422 problem naming the parameter otherwise."""
    try:
        return clock.parse_time(text, f"{name}={text!r}")
    except ValueError as exc:
        raise bad_request(str(exc), "invalid-time") from None


def cli_command(data_dir: str, topic: str, args: Sequence[tuple[str, object | None]]) -> str:
    """``logtrove query TOPIC --opt value … --data DIR`` with shell quoting; options whose
    value is ``None`` are left out, ``True`` makes a flag."""
    parts = ["logtrove", "query", shlex.quote(topic)]
    for option, value in args:
        if value is None or value is False:
            continue
        parts.append(option)
        if value is not True:
            parts.append(shlex.quote(str(value)))
    parts += ["--data", shlex.quote(data_dir)]
    return " ".join(parts)
