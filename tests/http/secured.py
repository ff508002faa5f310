"""A data directory with users, tokens and ACLs, and an HTTP server over it with
authentication on: the fixtures of the HTTP security tests and of the console's login
test in Chromium. ``reader`` may READ ``orders``, ``writer`` may WRITE it, ``admin`` is a
super user; ``secret`` is nobody else's."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logtrove.acl import (
    AclBinding,
    AclStore,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from logtrove.acl.credentials import MIN_ITERATIONS, CredentialStore, ScramCredential, Users
from logtrove.acl.tokens import TokenStore
from logtrove.groups import CommittedOffset, OffsetStore
from logtrove.http import HttpSecurity, HttpServer, start_in_thread
from logtrove.http.lag_history import LagHistory
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

PASSWORDS = {"admin": "admin-pw", "reader": "reader-pw", "writer": "writer-pw"}


def basic(user: str, password: str | None = None) -> dict[str, str]:
    raw = f"{user}:{PASSWORDS[user] if password is None else password}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


@dataclass
class Secured:
    data: Path
    storage: Storage

    def server(self, *, authorizer: bool = True, **options: object) -> HttpServer:
        acls = Authorizer(AclStore.load(self.data), frozenset({"User:admin"})) if authorizer else None
        security = HttpSecurity(
            credentials=CredentialStore(self.data),
            tokens=TokenStore(self.data),
            authorizer=acls,
            basic_without_tls=bool(options.pop("basic_without_tls", True)),
            tls="tls" in options,
            metrics_auth=bool(options.pop("metrics_auth", False)),
            follow_acls=bool(options.pop("follow_acls", False)),
        )
        return start_in_thread(self.storage, "127.0.0.1:0", security=security, **options)  # type: ignore[arg-type]


def topic_acl(principal: str, op: Operation, topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, principal, "*", op, Permission.ALLOW)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """Topics ``orders`` and ``secret``; ``reader`` may READ orders, ``writer`` may WRITE
    orders, ``admin`` is a super user."""
    data = tmp_path_factory.mktemp("secured") / "data"
    storage = Storage.open(data)
    for topic in ("orders", "secret"):
        storage.create_topic(topic, 1)
        storage.log(topic, 0).append(
            build_batch([NewRecord(f"{topic}-{i}".encode(), b"k") for i in range(3)])
        )

    def add(users: Users) -> None:
        for user, password in PASSWORDS.items():
            users[user] = {
                "SCRAM-SHA-512": ScramCredential.from_password("SCRAM-SHA-512", password, MIN_ITERATIONS)
            }

    CredentialStore(data).update(add)
    offsets = OffsetStore(storage)
    offsets.load()
    for group in ("billing", "audit"):
        offsets.commit(group, {(t, 0): CommittedOffset(1, -1, "", 0) for t in ("orders", "secret")})
    now_ms = int(time.time() * 1000)
    LagHistory(data).append(now_ms, [("billing", "orders", 2, None), ("billing", "secret", 2, None)])
    AclStore.load(data).add(
        [
            topic_acl("User:reader", Operation.READ, "orders"),
            topic_acl("User:writer", Operation.WRITE, "orders"),
            AclBinding(
                ResourceType.GROUP,
                "billing",
                PatternType.LITERAL,
                "User:reader",
                "*",
                Operation.DESCRIBE,
                Permission.ALLOW,
            ),
        ]
    )
    try:
        yield Secured(data, storage)
    finally:
        storage.close()


@pytest.fixture(scope="module")
def server(secured: Secured) -> Iterator[HttpServer]:
    server = secured.server()
    try:
        yield server
    finally:
        server.stop()
