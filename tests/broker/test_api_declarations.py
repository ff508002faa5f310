"""Each handler declares the API it serves and its authorization rule beside its
definition (``@serves``), and the broker's table is exactly what the handler modules
declare: none forgotten, none twice, none without a rule."""

from __future__ import annotations

import inspect
import types

import pytest

from logtrove.acl import Operation
from logtrove.broker import apis
from logtrove.broker.access import Rule, no_acl
from logtrove.broker.apis import HANDLER_MODULES, build_api_table
from logtrove.broker.context import BrokerContext, declared_apis, serves
from logtrove.broker.requests import Reply, Request
from logtrove.wire import ApiKey


def test_every_handler_coroutine_is_declared_and_served() -> None:
    handlers = {
        (module.__name__, name)
        for module in (*HANDLER_MODULES, apis)
        for name, value in vars(module).items()
        if name.startswith("handle_")
        and inspect.iscoroutinefunction(value)
        and value.__module__ == module.__name__
    }
    served = {(api.handler.__module__, api.handler.__name__) for api in build_api_table().values()}
    assert handlers == served
    assert len(served) == len(build_api_table())  # one handler per key


def test_a_key_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = types.ModuleType("logtrove.broker.extra")

    @serves(ApiKey.FETCH, 4, 16, access=no_acl("a test's second Fetch"))
    async def handle_other_fetch(broker: BrokerContext, request: Request) -> Reply:
        return None

    extra.handle_other_fetch = handle_other_fetch  # type: ignore[attr-defined]
    assert [api.key for api in declared_apis(extra)] == [ApiKey.FETCH]
    monkeypatch.setattr(apis, "HANDLER_MODULES", (*HANDLER_MODULES, extra))
    with pytest.raises(RuntimeError, match="declared twice"):
        build_api_table()


def test_declared_ranges_are_clipped_to_what_kio_decodes() -> None:
    table = build_api_table()
    declared = {api.key: api for module in (*HANDLER_MODULES, apis) for api in declared_apis(module)}
    for key, api in table.items():
        assert declared[key].min_version <= api.min_version <= api.max_version <= declared[key].max_version


def test_an_api_cannot_be_declared_without_an_authorization_rule() -> None:
    with pytest.raises(TypeError, match="access"):
        serves(ApiKey.FETCH, 4, 16)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="authorization rule"):
        serves(ApiKey.FETCH, 4, 16, access=Operation.READ)  # type: ignore[arg-type]


def test_every_served_api_has_a_rule_and_only_the_sasl_exchange_and_api_versions_need_none() -> None:
    table = build_api_table()
    assert all(isinstance(api.rule, Rule) for api in table.values())
    open_keys = {key for key, api in table.items() if api.rule.kind == "none"}
    assert open_keys == {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


def test_the_user_credential_apis_need_the_cluster_operations_kafka_names() -> None:
    table = build_api_table()
    describe = table[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS].rule
    alter = table[ApiKey.ALTER_USER_SCRAM_CREDENTIALS].rule
    assert (describe.kind, describe.cluster) == ("cluster", Operation.DESCRIBE)
    assert (alter.kind, alter.cluster) == ("cluster", Operation.ALTER)
