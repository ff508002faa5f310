"""What the broker's handlers take and give: a decoded :class:`Request` and a :data:`Reply`
(a version-independent dict, a :class:`RawBody` already encoded, or nothing).

The connection loop (:mod:`.connections`) decodes frames into requests and frames the
replies; the handlers, one module per API family, depend on these types and on
:class:`~logtrove.broker.context.BrokerContext`, not on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from logtrove.broker.access import Guard
from logtrove.broker.sasl import Session


@dataclass(frozen=True)
class Request:
    """One decoded request: header fields and the kio body."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    body: Any
    flexible: bool
    response_cls: type
    session: Session  # the connection's listener and principal
    guard: Guard  # its API's authorization rule, the answers and what the handler asked

    @property
    def principal(self) -> str:
        """Who sent it (``User:NAME``; ``User:ANONYMOUS`` unauthenticated): the ACLs' subject."""
        return self.session.principal

    @property
    def host(self) -> str:
        """The client's address, as ACL hosts name it."""
        return self.session.address


@dataclass(frozen=True)
class RawBody:
    """A response body already encoded as chunks (Fetch: record bytes are not copied)."""

    chunks: list[bytes | memoryview]


Reply = Mapping[str, Any] | RawBody | None
