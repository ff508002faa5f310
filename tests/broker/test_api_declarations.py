"""Each handler declares the API it serves beside its definition (``@serves``), and the
broker's table is exactly what the handler modules declare: none forgotten, none twice."""

from __future__ import annotations

import inspect
import types

import pytest

from logtrove.broker import apis
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

    @serves(ApiKey.FETCH, 4, 16)
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
