"""Property tests from the OpenAPI schema (schemathesis): every operation, generated
valid and invalid inputs, against a live server over real data. No answer may be a 5xx,
and every answer must match the schema (status code, content type, body).

Bounded for the default run (a few examples per operation); ``LOGTROVE_SCHEMA_EXAMPLES``
raises it.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.http.support import build_data

from logtrove.http import HttpServer, create_app, start_in_thread
from logtrove.storage import Storage

EXAMPLES = int(os.environ.get("LOGTROVE_SCHEMA_EXAMPLES", "5"))
SLOW_EXAMPLES = 60


@pytest.fixture(scope="module")
def schema_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    path: Path = tmp_path_factory.mktemp("schema-data") / "data"
    build_data(path)
    storage = Storage.open(path)
    server = start_in_thread(storage, "127.0.0.1:0")
    try:
        yield server
    finally:
        server.stop()
        storage.close()


def openapi_document() -> dict[str, Any]:
    """The app's schema; it does not depend on the data, so an empty directory will do.
    (Built at collection: schemathesis' lazy fixture loader does not work on pytest 9.)"""
    with tempfile.TemporaryDirectory() as tmp, Storage.open(Path(tmp) / "data") as storage:
        return create_app(storage).openapi()


def bounded(document: dict[str, Any]) -> dict[str, Any]:
    """The schema with topic creation limited to 8 partitions, so that generated topics
    take milliseconds, not the seconds of 1000 partitions (the server still allows 1000)."""
    document = copy.deepcopy(document)
    document["components"]["schemas"]["CreateTopic"]["properties"]["partitions"]["maximum"] = 8
    return document


# The live tail is an endless event stream: a generated call would only end at its read
# timeout. tests/http/test_http_tail.py covers it, its errors included.
schema = schemathesis.openapi.from_dict(bounded(openapi_document())).exclude(path_regex=r"/tail$")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_answers_match_the_schema(
    case: schemathesis.Case, schema_server: HttpServer
) -> None:
    case.call_and_validate(base_url=schema_server.url, checks=CHECKS, timeout=30)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_many_examples_no_server_errors_and_answers_match_the_schema(
    case: schemathesis.Case, schema_server: HttpServer
) -> None:
    case.call_and_validate(base_url=schema_server.url, checks=CHECKS, timeout=60)
