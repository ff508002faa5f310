"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), with the checks
and error codes of Kafka's ``ScramControlManager``.

Describe lists each asked user's mechanisms and iterations (never a key or salt), all users
when the list is null or empty; a user asked twice is DUPLICATE_RESOURCE, one without
credentials RESOURCE_NOT_FOUND. Alter applies, per user, all of its deletions and
upsertions or none: one bad entry gives the user's result its error code and leaves the
user as it was. An upsertion carries the salted password (the client ran PBKDF2), from
which the stored and server keys are derived here; the salted password itself is not kept.
Describing needs DESCRIBE on the cluster and altering ALTER on the cluster (KIP-554),
checked by the dispatcher before these handlers run; without an authorizer anyone who may
send requests may alter users, as in Kafka without ``authorizer.class.name``. Every
credential set or deleted leaves an audit line.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation
from logtrove.acl.credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialError,
    ScramCredential,
    Users,
    check_user_name,
    mechanism_by_code,
)
from logtrove.broker.access import audit, on_cluster, printable, results_per
from logtrove.broker.context import serves
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

MAX_SALT_BYTES = 1024


@serves(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    0,
    0,
    access=on_cluster(Operation.DESCRIBE),  # the top-level error only: librdkafka fails every user with it
)
async def handle_describe_user_scram_credentials(broker: BrokerContext, request: Request) -> Reply:
    users = broker.credentials.users()
    asked = [u.name for u in request.body.users] if request.body.users else sorted(users)
    counts = Counter(asked)
    results = []
    for name in dict.fromkeys(asked):
        creds = users.get(name)
        if counts[name] > 1:
            code, message = (
                ErrorCode.duplicate_resource,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
            )
        elif not creds:
            code, message = (
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            code, message = ErrorCode.none, None
        infos = [
            {"mechanism": SCRAM_MECHANISMS[m][0], "iterations": c.iterations}
            for m, c in sorted((creds or {}).items())
            if code == ErrorCode.none
        ]
        results.append(
            {"user": name, "error_code": code, "error_message": message, "credential_infos": infos}
        )
    return {"error_code": ErrorCode.none, "error_message": None, "results": results}


@serves(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    0,
    0,
    access=on_cluster(
        Operation.ALTER, refused=results_per("deletions", "upsertions", key="name", row_key="user")
    ),
)
async def handle_alter_user_scram_credentials(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    store = broker.credentials
    current = store.users()
    ops: dict[str, list[tuple[str | None, Any]]] = {}  # user -> [(mechanism, upsertion or None)]
    for entry in body.deletions:
        ops.setdefault(entry.name, []).append((mechanism_by_code(entry.mechanism), None))
    for entry in body.upsertions:
        ops.setdefault(entry.name, []).append((mechanism_by_code(entry.mechanism), entry))
    errors = {name: _check(name, entries, current) for name, entries in ops.items()}
    changes: dict[str, dict[str, ScramCredential | None]] = {}
    for name, entries in ops.items():
        if errors[name] is None:
            changes[name] = {
                str(mech): None if up is None else _credential(str(mech), up) for mech, up in entries
            }

    def apply(users: Users) -> None:
        for name, mechs in changes.items():
            creds = users.setdefault(name, {})
            for mech, cred in mechs.items():
                if cred is None:
                    creds.pop(mech, None)
                else:
                    creds[mech] = cred

    if changes:
        await asyncio.get_running_loop().run_in_executor(None, store.update, apply)
        for name, mechs in changes.items():
            for mech, cred in sorted(mechs.items()):
                audit.info(
                    "%s from %s: %s %s credential of user %r",
                    printable(request.principal),
                    printable(request.host),
                    "deleted" if cred is None else "set",
                    mech,
                    name,
                )
    results = []
    for name in ops:
        code, message = errors[name] or (ErrorCode.none, None)
        results.append({"user": name, "error_code": code, "error_message": message})
    return {"results": results}


def _check(name: str, entries: list[tuple[str | None, Any]], current: Users) -> tuple[int, str] | None:
    """The error of one user's alterations, as Kafka's checks find it first, or ``None``.
    A name ``logtrove users`` would refuse (control characters, too long) is refused here
    too: it would name a principal no SASL exchange can carry, and could forge log lines."""
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    try:
        check_user_name(name)
    except CredentialError as exc:
        return ErrorCode.unacceptable_credential, str(exc)
    mechanisms = [mech for mech, _ in entries]
    if any(mech is None for mech in mechanisms):
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if len(set(mechanisms)) != len(mechanisms):
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
    for mech, up in entries:
        if up is None:
            if mech not in current.get(name, {}):
                return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
            continue
        if up.iterations < MIN_ITERATIONS:
            return ErrorCode.unacceptable_credential, f"Too few iterations (at least {MIN_ITERATIONS})"
        if up.iterations > MAX_ITERATIONS:
            return ErrorCode.unacceptable_credential, f"Too many iterations (at most {MAX_ITERATIONS})"
        if not 0 < len(up.salt) <= MAX_SALT_BYTES:
            return ErrorCode.unacceptable_credential, f"The salt must be 1..{MAX_SALT_BYTES} bytes"
        if len(up.salted_password) != hashlib.new(SCRAM_MECHANISMS[str(mech)][1]).digest_size:
            return ErrorCode.unacceptable_credential, f"A {mech} salted password has the hash's length"
    return None


def _credential(mechanism: str, up: Any) -> ScramCredential:
    return ScramCredential.from_salted_password(
        mechanism, bytes(up.salted_password), bytes(up.salt), up.iterations
    )
