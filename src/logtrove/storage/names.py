"""Topic names: Kafka's rule, and how a name that breaks it is shown and typed.

A topic name is 1-249 characters from ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``
(Kafka's ``Topic.validate``). The whole name must match: a check with ``re.match`` and
``$`` would accept a final newline, and a name with a newline breaks every file that
lists topics one per line (the offset checkpoints).

Data directories written by older versions may hold a topic whose name breaks the rule.
Such a name is shown escaped as a JSON string without its quotes (``orders\\n`` for
``"orders\\n"``): printable, one line, and what ``logtrove topics delete`` accepts.

A partition is named by :class:`TopicPartition`, whose ``str()`` is its directory name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from logtrove.storage.errors import InvalidTopicError

MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(rf"[a-zA-Z0-9._-]{{1,{MAX_TOPIC_NAME}}}")


def is_legal_topic_name(name: str) -> bool:
    """Kafka's rule, on the whole name."""
    return name not in (".", "..") and _LEGAL_TOPIC.fullmatch(name) is not None


def check_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``name`` follows Kafka's rule."""
    if not is_legal_topic_name(name):
        raise InvalidTopicError(
            f"invalid topic name {name!r}: use 1-{MAX_TOPIC_NAME} characters from "
            "letters, digits, '.', '_' and '-' (not '.' or '..')"
        )


def escaped_name(name: str) -> str:
    """``name`` as one printable ASCII line: a JSON string without its quotes. A legal
    name is its own escaped form."""
    return json.dumps(name, ensure_ascii=True)[1:-1]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic and one of its partitions; ``str()`` is the directory name ``topic-P``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
