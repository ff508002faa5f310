"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), with Kafka's rules.

Without an authorizer (``serve`` without ``--authorizer``, Kafka without
``authorizer.class.name``) each answers SECURITY_DISABLED. With one, describing needs
DESCRIBE and changing needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED
otherwise). A creation or a filter that breaks the model's rules fails alone with
INVALID_REQUEST and says why; the others in the request go through. Changes are written
to ``DATA_DIR/acls.json`` before the answer (:class:`~logtrove.acl.AclStore`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import AclBinding, AclError, AclFilter, Operation
from logtrove.broker.access import on_cluster
from logtrove.broker.context import serves
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

_DISABLED = "no authorizer is configured on this broker: start it with `logtrove serve --authorizer`"


def _refusal(broker: BrokerContext) -> tuple[ErrorCode, str] | None:
    """SECURITY_DISABLED without an authorizer (with one, the rule's cluster operation was
    checked before the handler)."""
    if broker.authorizer is None:
        return ErrorCode.security_disabled, _DISABLED
    return None


def _refused_creations(request: Any, code: int, message: str) -> Mapping[str, Any]:
    return {"results": [{"error_code": code, "error_message": message} for _ in request.body.creations]}


def _refused_filters(request: Any, code: int, message: str) -> Mapping[str, Any]:
    return {
        "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in request.body.filters
        ]
    }


def _filter(f: Any) -> AclFilter:
    return AclFilter.checked(
        f.resource_type_filter,
        f.resource_name_filter,
        f.pattern_type_filter,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


def _acl(b: AclBinding) -> dict[str, Any]:
    return {
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation,
        "permission_type": b.permission,
    }


@serves(ApiKey.DESCRIBE_ACLS, 1, 3, access=on_cluster(Operation.DESCRIBE))
async def handle_describe_acls(broker: BrokerContext, request: Request) -> Reply:
    refused = _refusal(broker)
    if refused is not None:
        return {"error_code": refused[0], "error_message": refused[1], "resources": []}
    try:
        found = broker.acls.describe(_filter(request.body))
    except AclError as exc:
        return {"error_code": ErrorCode.invalid_request, "error_message": str(exc), "resources": []}
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in found:
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(_acl(b))
    return {
        "error_code": ErrorCode.none,
        "resources": [
            {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": acls}
            for (rtype, name, ptype), acls in resources.items()
        ],
    }


@serves(ApiKey.CREATE_ACLS, 1, 3, access=on_cluster(Operation.ALTER, refused=_refused_creations))
async def handle_create_acls(broker: BrokerContext, request: Request) -> Reply:
    creations = request.body.creations
    refused = _refusal(broker)
    if refused is not None:
        return {"results": [{"error_code": refused[0], "error_message": refused[1]} for _ in creations]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            valid.append(
                AclBinding.checked(
                    c.resource_type,
                    c.resource_name,
                    c.resource_pattern_type,
                    c.principal,
                    c.host,
                    c.operation,
                    c.permission_type,
                )
            )
            results.append({"error_code": ErrorCode.none})
        except AclError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
    try:
        broker.acls.add(valid)
    except AclError as exc:  # the store cannot be written: every creation failed
        return {
            "results": [
                {"error_code": ErrorCode.invalid_request, "error_message": str(exc)} for _ in creations
            ]
        }
    return {"results": results}


@serves(ApiKey.DELETE_ACLS, 1, 3, access=on_cluster(Operation.ALTER, refused=_refused_filters))
async def handle_delete_acls(broker: BrokerContext, request: Request) -> Reply:
    filters = request.body.filters
    refused = _refusal(broker)
    if refused is not None:
        return {
            "filter_results": [
                {"error_code": refused[0], "error_message": refused[1], "matching_acls": []} for _ in filters
            ]
        }
    parsed: list[AclFilter | AclError] = []
    for f in filters:
        try:
            parsed.append(_filter(f))
        except AclError as exc:
            parsed.append(exc)
    try:
        removed = iter(broker.acls.delete([p for p in parsed if isinstance(p, AclFilter)]))
    except AclError as exc:
        return {
            "filter_results": [
                {"error_code": ErrorCode.invalid_request, "error_message": str(exc), "matching_acls": []}
                for _ in filters
            ]
        }
    results = []
    for p in parsed:
        if isinstance(p, AclError):
            results.append(
                {"error_code": ErrorCode.invalid_request, "error_message": str(p), "matching_acls": []}
            )
            continue
        matching = [
            {
                "error_code": ErrorCode.none,
                "resource_type": b.resource_type,
                "resource_name": b.resource_name,
                "pattern_type": b.pattern_type,
                **_acl(b),
            }
            for b in next(removed)
        ]
        results.append({"error_code": ErrorCode.none, "matching_acls": matching})
    return {"filter_results": results}
