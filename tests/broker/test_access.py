"""The guard that enforces each API's declared authorization: an undeclared question is
refused, a handler that answers a named resource without asking is caught, a cluster
rule refuses before the handler, and audit lines cannot be forged."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from logtrove.acl import AclBinding, AclStore, Authorizer, Operation, PatternType, Permission, ResourceType
from logtrove.broker.access import (
    AccessNotEnforcedError,
    Check,
    Guard,
    UndeclaredCheckError,
    names_of,
    on_cluster,
    per_resource,
)


@dataclass(frozen=True)
class FakeRequest:
    """What a rule reads of a request: its body and version."""

    body: Any
    version: int = 0


def _authorizer(tmp_path: Path, *allowed_topics: str) -> Authorizer:
    bindings = [
        AclBinding(
            ResourceType.TOPIC, t, PatternType.LITERAL, "User:bob", "*", Operation.READ, Permission.ALLOW
        )
        for t in allowed_topics
    ]
    return Authorizer(AclStore(tmp_path / "acls.json", bindings))


def _topics(*names: str) -> FakeRequest:
    return FakeRequest(SimpleNamespace(topics=[SimpleNamespace(name=n) for n in names]))


READ_TOPICS = per_resource(Check(ResourceType.TOPIC, Operation.READ, names_of("topics", "name")))


def test_a_question_the_rule_does_not_declare_is_refused_even_without_an_authorizer() -> None:
    guard = Guard(READ_TOPICS, None, "User:bob", "127.0.0.1", 1)
    assert guard.allows(Operation.READ, ResourceType.TOPIC, "t")
    with pytest.raises(UndeclaredCheckError, match="WRITE on TOPIC"):
        guard.allows(Operation.WRITE, ResourceType.TOPIC, "t")


def test_a_handler_that_answers_a_denied_name_without_asking_is_caught(tmp_path: Path) -> None:
    request = _topics("open", "secret")
    guard = Guard(READ_TOPICS, _authorizer(tmp_path, "open"), "User:bob", "127.0.0.1", 1)
    assert guard.allows(Operation.READ, ResourceType.TOPIC, "open")
    with pytest.raises(AccessNotEnforcedError, match="'secret'"):
        guard.verify(request)


def test_a_handler_that_asked_about_every_name_passes(tmp_path: Path) -> None:
    request = _topics("open", "secret")
    guard = Guard(READ_TOPICS, _authorizer(tmp_path, "open"), "User:bob", "127.0.0.1", 1)
    assert [guard.allows(Operation.READ, ResourceType.TOPIC, n) for n in ("open", "secret")] == [True, False]
    guard.verify(request)


def test_names_the_principal_may_use_need_no_question(tmp_path: Path) -> None:
    guard = Guard(READ_TOPICS, _authorizer(tmp_path, "open"), "User:bob", "127.0.0.1", 1)
    guard.verify(_topics("open"))  # nothing denied went unasked


def test_a_cluster_rule_refuses_before_the_handler_with_its_builder(tmp_path: Path) -> None:
    rule = on_cluster(Operation.ALTER, refused=lambda request, code, message: {"code": code, "why": message})
    refused = Guard(rule, _authorizer(tmp_path), "User:bob", "127.0.0.1", 51).before(FakeRequest(None))
    assert refused == {"code": 31, "why": "ALTER on the cluster is needed"}
    admitted = Guard(
        rule, Authorizer(AclStore(tmp_path / "acls.json"), frozenset({"User:bob"})), "User:bob", "", 51
    )
    assert admitted.before(FakeRequest(None)) is None
    assert Guard(rule, None, "User:bob", "", 51).before(FakeRequest(None)) is None  # no authorizer


def test_an_audit_line_of_a_name_with_a_newline_stays_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    guard = Guard(READ_TOPICS, _authorizer(tmp_path), "User:eve\nforged", "127.0.0.1", 1)
    with caplog.at_level(logging.INFO, logger="logtrove.audit"):
        assert not guard.allows(Operation.READ, ResourceType.TOPIC, "a\nb")
    (line,) = [r.getMessage() for r in caplog.records if r.name == "logtrove.audit"]
    assert "\n" not in line
    assert "'User:eve\\nforged'" in line and "'a\\nb'" in line
