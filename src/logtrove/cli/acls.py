"""``logtrove acls``: the ACLs of a data directory, while no broker runs on it.

A running broker is managed over the Kafka protocol instead (``kafka-acls.sh``,
``AdminClient.create_acls``), since it is the one writer of ``acls.json``; these commands
take the data directory's lock and say so when a broker holds it.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from logtrove.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, JsonOption, console, fail, open_storage

acls_app = typer.Typer(
    help="Kafka ACLs of a data directory (enforced by `logtrove serve --authorizer`).",
    no_args_is_help=True,
)
app.add_typer(acls_app, name="acls")

_WHEN_LOCKED = (
    "A running broker manages its ACLs itself: use a Kafka admin client against it "
    "(kafka-acls.sh --bootstrap-server ..., or AdminClient.create_acls)."
)

Op = Enum("Op", {op.name: op.name for op in Operation if op > Operation.ANY}, type=str)  # type: ignore[misc]

PrincipalOption = Annotated[
    list[str] | None,
    typer.Option("--principal", "-p", help="Principal, e.g. User:alice or User:*. Repeatable."),
]
OperationOption = Annotated[
    list[Op] | None,
    typer.Option("--operation", "-o", help="Operation (READ, WRITE, DESCRIBE, ALL…). Repeatable."),
]
TopicOption = Annotated[str | None, typer.Option("--topic", help="A topic name, or * for every topic.")]
GroupOption = Annotated[str | None, typer.Option("--group", help="A consumer group id, or *.")]
TxnOption = Annotated[str | None, typer.Option("--transactional-id", help="A transactional id, or *.")]
ClusterOption = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
PrefixedOption = Annotated[bool, typer.Option("--prefixed", help="The name is a prefix (PREFIXED pattern).")]
HostOption = Annotated[str, typer.Option("--host", help="Client address the ACL applies to.")]


def _resource(
    topic: str | None, group: str | None, txn: str | None, cluster: bool
) -> tuple[ResourceType, str]:
    given = [
        (ResourceType.TOPIC, topic),
        (ResourceType.GROUP, group),
        (ResourceType.TRANSACTIONAL_ID, txn),
        (ResourceType.CLUSTER, CLUSTER_NAME if cluster else None),
    ]
    chosen = [(rtype, name) for rtype, name in given if name is not None]
    if len(chosen) != 1:
        fail("name exactly one resource: --topic, --group, --transactional-id or --cluster", 2)
    return chosen[0][0], str(chosen[0][1])


@acls_app.command("add")
def add(
    principal: PrincipalOption = None,
    operation: OperationOption = None,
    topic: TopicOption = None,
    group: GroupOption = None,
    transactional_id: TxnOption = None,
    cluster: ClusterOption = False,
    prefixed: PrefixedOption = False,
    host: HostOption = "*",
    deny: Annotated[bool, typer.Option("--deny", help="A DENY ACL (default: ALLOW).")] = False,
    data: DataOption = DEFAULT_DATA,
) -> None:
    """Add ACLs: each principal × each operation on one resource.

    Example: logtrove acls add -p User:alice -o READ -o DESCRIBE --topic orders
    """
    if not principal or not operation:
        fail("give at least one --principal and one --operation", 2)
    rtype, name = _resource(topic, group, transactional_id, cluster)
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    permission = Permission.DENY if deny else Permission.ALLOW
    with open_storage(data, read_only=False, when_locked=_WHEN_LOCKED) as storage:
        bindings = [
            AclBinding.checked(rtype, name, pattern, p, host, Operation[o.value], permission)
            for p in principal
            for o in operation
        ]
        AclStore.load(storage.path).add(bindings)
    for b in bindings:
        console.print(f"Added: {escape(b.describe())}")


@acls_app.command("remove")
def remove(
    principal: PrincipalOption = None,
    operation: OperationOption = None,
    topic: TopicOption = None,
    group: GroupOption = None,
    transactional_id: TxnOption = None,
    cluster: ClusterOption = False,
    prefixed: PrefixedOption = False,
    data: DataOption = DEFAULT_DATA,
) -> None:
    """Remove the ACLs of one resource pattern (all of them, or those of the given
    principals and operations).

    Example: logtrove acls remove --topic orders -p User:alice
    """
    rtype, name = _resource(topic, group, transactional_id, cluster)
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    principals: list[str | None] = [*principal] if principal else [None]
    operations = [Operation[o.value] for o in operation or []] or [Operation.ANY]
    filters = [AclFilter(rtype, name, pattern, p, None, op) for p in principals for op in operations]
    with open_storage(data, read_only=False, when_locked=_WHEN_LOCKED) as storage:
        removed = [b for group_ in AclStore.load(storage.path).delete(filters) for b in group_]
    if not removed:
        console.print("No ACL matched; nothing removed.")
    for b in removed:
        console.print(f"Removed: {escape(b.describe())}")


@acls_app.command("list")
def list_(
    principal: Annotated[str | None, typer.Option("--principal", "-p", help="Only this principal's.")] = None,
    topic: TopicOption = None,
    group: GroupOption = None,
    data: DataOption = DEFAULT_DATA,
    as_json: JsonOption = False,
) -> None:
    """List ACLs; with --topic or --group, those that apply to that resource (its literal
    name, the wildcard and every matching prefix)."""
    flt = AclFilter(principal=principal)
    if topic is not None or group is not None:
        rtype, name = _resource(topic, group, None, False)
        flt = AclFilter(rtype, name, PatternType.MATCH, principal)
    with open_storage(data, read_only=True) as storage:
        store = AclStore.load(storage.path)
        if store.unreadable is not None:
            fail(store.unreadable)
        found = store.describe(flt)
    if as_json:
        print(json.dumps([b.to_json() for b in found], indent=1))
        return
    table = Table("permission", "principal", "host", "operation", "resource", "name", "pattern")
    for b in found:
        table.add_row(
            b.permission.name,
            escape(b.principal),
            escape(b.host),
            b.operation.name,
            b.resource_type.name,
            escape(b.resource_name),
            b.pattern_type.name,
        )
    console.print(table if found else "No ACLs.")
