"""The authorization decision against Kafka's rules (StandardAuthorizer), and the ACL
store's handling of files it did not write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logtrove.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    AclStore,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def _acl(
    rtype: ResourceType,
    name: str,
    principal: str,
    op: Operation,
    perm: Permission = ALLOW,
    pattern: PatternType = LIT,
    host: str = "*",
) -> AclBinding:
    return AclBinding.checked(rtype, name, pattern, principal, host, op, perm)


def _auth(tmp_path: Path, *acls: AclBinding, **kw: object) -> Authorizer:
    store = AclStore.load(tmp_path)
    store.add(acls)
    return Authorizer(store, **kw)  # type: ignore[arg-type]


def test_allow_deny_and_implied_operations(tmp_path: Path) -> None:
    auth = _auth(
        tmp_path,
        _acl(T, "orders", "User:alice", Op.READ),
        _acl(T, "orders", "User:alice", Op.ALTER_CONFIGS),
        _acl(T, "orders", "User:*", Op.WRITE),
        _acl(T, "orders", "User:mallory", Op.ALL, DENY),
    )
    assert auth.authorize("User:alice", "1.2.3.4", Op.READ, T, "orders")
    assert auth.authorize("User:alice", "1.2.3.4", Op.DESCRIBE, T, "orders")  # implied by READ
    assert auth.authorize("User:alice", "1.2.3.4", Op.DESCRIBE_CONFIGS, T, "orders")  # by ALTER_CONFIGS
    assert not auth.authorize("User:alice", "1.2.3.4", Op.DELETE, T, "orders")
    assert auth.authorize("User:bob", "1.2.3.4", Op.WRITE, T, "orders")  # the wildcard principal
    assert not auth.authorize("User:bob", "1.2.3.4", Op.READ, T, "orders")
    assert not auth.authorize("User:mallory", "1.2.3.4", Op.WRITE, T, "orders")  # DENY ALL wins
    assert not auth.authorize("User:alice", "1.2.3.4", Op.READ, T, "other")  # no ACL: closed


def test_prefixed_wildcard_and_host(tmp_path: Path) -> None:
    auth = _auth(
        tmp_path,
        _acl(T, "pub.", "User:alice", Op.READ, pattern=PRE),
        _acl(T, "*", "User:ops", Op.DESCRIBE),
        _acl(G, "g1", "User:alice", Op.READ, host="10.0.0.1"),
        _acl(T, "pub.secret", "User:alice", Op.READ, DENY),
    )
    assert auth.authorize("User:alice", "h", Op.READ, T, "pub.news")
    assert not auth.authorize("User:alice", "h", Op.READ, T, "pub.secret")
    assert not auth.authorize("User:alice", "h", Op.READ, T, "pu")
    assert auth.authorize("User:ops", "h", Op.DESCRIBE, T, "anything")
    assert auth.authorize("User:alice", "10.0.0.1", Op.READ, G, "g1")
    assert not auth.authorize("User:alice", "10.0.0.2", Op.READ, G, "g1")


def test_super_users_and_no_acl_found(tmp_path: Path) -> None:
    auth = _auth(
        tmp_path,
        _acl(T, "covered", "User:alice", Op.READ),
        super_users=frozenset({"User:admin"}),
        allow_if_no_acl=True,
    )
    assert auth.authorize("User:admin", "h", Op.DELETE, T, "covered")
    assert auth.authorize("User:bob", "h", Op.WRITE, T, "uncovered")  # no ACL covers it: open
    assert not auth.authorize("User:bob", "h", Op.READ, T, "covered")  # covered: the ACLs decide


def test_write_on_any_topic_implies_idempotent_write(tmp_path: Path) -> None:
    auth = _auth(
        tmp_path,
        _acl(T, "logs.", "User:alice", Op.WRITE, pattern=PRE),
        _acl(T, "*", "User:eve", Op.WRITE),
        _acl(T, "*", "User:eve", Op.WRITE, DENY),
    )
    assert auth.authorize_any("User:alice", "h", Op.WRITE, T)
    assert not auth.authorize_any("User:bob", "h", Op.WRITE, T)
    assert not auth.authorize_any("User:eve", "h", Op.WRITE, T)


def test_filters_match_as_kafka_describes(tmp_path: Path) -> None:
    store = AclStore.load(tmp_path)
    a = _acl(T, "orders", "User:alice", Op.READ)
    b = _acl(T, "ord", "User:bob", Op.WRITE, pattern=PRE)
    c = _acl(T, "*", "User:carol", Op.READ)
    d = _acl(G, "orders", "User:alice", Op.READ)
    store.add([a, b, c, d])
    assert store.describe(AclFilter(T, "orders", PatternType.MATCH)) == sorted([a, b, c])
    assert store.describe(AclFilter(T, "orders", PatternType.LITERAL)) == [a]
    assert store.describe(AclFilter(principal="User:alice")) == sorted([a, d])
    assert store.delete([AclFilter(ResourceType.ANY, None, PatternType.ANY, "User:alice")]) == [
        sorted([a, d])
    ]
    assert AclStore.load(tmp_path).bindings == {b, c}  # persisted


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ((ResourceType.ANY, "x", LIT, "User:a", "*", Op.READ, ALLOW), "resource type ANY"),
        ((T, "x", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW), "pattern type MATCH"),
        ((T, "x", LIT, "alice", "*", Op.READ, ALLOW), "Type:name"),
        ((T, "x", LIT, "User:a", "*", Op.ANY, ALLOW), "operation ANY"),
        ((T, "x", LIT, "User:a", "*", Op.READ, Permission.ANY), "permission ANY"),
        ((C, "other", LIT, "User:a", "*", Op.ALTER, ALLOW), CLUSTER_NAME),
        ((T, "", LIT, "User:a", "*", Op.READ, ALLOW), "resource name"),
        ((T, "x" * 2000, LIT, "User:a", "*", Op.READ, ALLOW), "at most"),
        ((99, "x", LIT, "User:a", "*", Op.READ, ALLOW), "not a ResourceType"),
    ],
)
def test_invalid_bindings_are_refused_with_why(fields: tuple[object, ...], why: str) -> None:
    with pytest.raises(AclError, match=why):
        AclBinding.checked(*fields)


@pytest.mark.parametrize(
    "content",
    [b"{oops", b"[]", json.dumps({"acls": [{"resource_type": "TOPIC"}]}).encode(), b"\x00\xff"],
)
def test_a_damaged_file_fails_closed_and_is_kept(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "acls.json").write_bytes(content)
    store = AclStore.load(tmp_path)
    auth = Authorizer(store, frozenset({"User:admin"}), allow_if_no_acl=True)
    assert not auth.authorize("User:alice", "h", Op.READ, T, "t")  # even with allow-if-no-acl
    assert auth.authorize("User:admin", "h", Op.READ, T, "t")
    with pytest.raises(AclError, match="fixed or removed"):
        store.add([_acl(T, "t", "User:alice", Op.READ)])
    assert (tmp_path / "acls.json").read_bytes() == content


def test_an_unknown_user_costs_the_same_pbkdf2_as_a_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timing must not tell which user names exist (SASL PLAIN, HTTP Basic): a wrong
    password for a missing user runs PBKDF2 with the iterations a default user has. The
    iterations are read from the standard library's PBKDF2 as it is called."""
    import hashlib

    from logtrove.acl.credentials import CredentialStore, ScramCredential

    store = CredentialStore(tmp_path)
    store.update(
        lambda users: users.setdefault("alice", {}).update(
            {"SCRAM-SHA-512": ScramCredential.from_password("SCRAM-SHA-512", "pw")}
        )
    )
    rounds: list[int] = []
    real = hashlib.pbkdf2_hmac

    def counting(name: str, password: bytes, salt: bytes, iterations: int, dklen: int | None = None) -> bytes:
        rounds.append(iterations)
        return real(name, password, salt, iterations, dklen)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counting)
    assert not store.check_password("alice", "wrong")
    assert not store.check_password("mallory", "wrong")
    assert rounds[0] == rounds[1]


def test_an_oversized_acl_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A state file somebody else wrote must not take the broker's memory: past 64 MiB
    (a sparse file here, so the test writes nothing) it is not read, and the store fails
    closed as for any damaged file."""
    with (tmp_path / "acls.json").open("wb") as f:
        f.truncate((64 << 20) + 1)
    store = AclStore.load(tmp_path)
    assert store.unreadable is not None and "more than the" in store.unreadable
    assert not Authorizer(store, allow_if_no_acl=True).authorize("User:a", "h", Op.READ, T, "t")
