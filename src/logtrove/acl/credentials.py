"""SCRAM credentials of the users, kept in the data directory.

Only salted credentials are stored (RFC 5802 §3): for each user and mechanism the salt,
the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, from which no password can be
recovered. SASL/PLAIN is checked against the same credential: the offered password is
salted with the stored salt and iterations and its StoredKey compared in constant time.

The file ``scram-credentials.json`` in the data directory (mode 0600)::

    {"format": 1,
     "users": {"alice": {"SCRAM-SHA-512": {"salt": "<base64>", "iterations": 4096,
                                            "stored_key": "<base64>", "server_key": "<base64>"}}}}

It is replaced whole (:func:`~logtrove.storage.checkpoint.atomic_write`) under an
advisory lock on ``.scram-credentials.lock``, so the broker (AlterUserScramCredentials)
and ``logtrove users`` (offline, or beside a running broker) never lose each other's
changes; readers pick up a new file when its identity (inode, size, mtime) changes.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import atomic_write, remove_temp_files

CREDENTIALS_FILE = "scram-credentials.json"
LOCK_FILE = ".scram-credentials.lock"
FORMAT = 1

# mechanism name: (Kafka's ScramMechanism code in Describe/AlterUserScramCredentials, hash)
SCRAM_MECHANISMS: dict[str, tuple[int, str]] = {
    "SCRAM-SHA-256": (1, "sha256"),
    "SCRAM-SHA-512": (2, "sha512"),
}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations
DEFAULT_ITERATIONS = 8192
SALT_BYTES = 32
MAX_USER_CHARS = 256


class CredentialError(ValueError):
    """A user name, mechanism, iteration count or credentials file that cannot be used."""


def mechanism_by_code(code: int) -> str | None:
    """The SCRAM mechanism of Kafka's code (1: SHA-256, 2: SHA-512), or ``None``."""
    return next((name for name, (c, _) in SCRAM_MECHANISMS.items() if c == code), None)


def check_user_name(user: str) -> None:
    """Refuse an empty name, one with control characters, or a very long one."""
    if not user:
        raise CredentialError("a user name must not be empty")
    if len(user) > MAX_USER_CHARS or any(ord(ch) < 32 or ord(ch) == 127 for ch in user):
        raise CredentialError(f"a user name is at most {MAX_USER_CHARS} printable characters")


@dataclass(frozen=True)
class ScramCredential:
    """One user's salted credential for one mechanism (RFC 5802 terms)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salted: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        """The credential of a salted password (what AlterUserScramCredentials carries)."""
        digest = _hash(mechanism)
        client_key = hmac.digest(salted, b"Client Key", digest)
        server_key = hmac.digest(salted, b"Server Key", digest)
        return cls(salt, iterations, hashlib.new(digest, client_key).digest(), server_key)

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
    ) -> ScramCredential:
        """A new credential for ``password`` with a random salt (PBKDF2, RFC 5802 ``Hi``)."""
        check_iterations(iterations)
        salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(_hash(mechanism), _normalize(password), salt, iterations)
        return cls.from_salted_password(mechanism, salted, salt, iterations)

    def matches(self, mechanism: str, password: str) -> bool:
        """Whether ``password`` salts to this credential (constant-time comparison)."""
        other = ScramCredential.from_password(mechanism, password, self.iterations, self.salt)
        return hmac.compare_digest(other.stored_key, self.stored_key)

    def to_json(self) -> dict[str, Any]:
        return {
            "salt": _b64(self.salt),
            "iterations": self.iterations,
            "stored_key": _b64(self.stored_key),
            "server_key": _b64(self.server_key),
        }

    @classmethod
    def from_json(cls, value: Any) -> ScramCredential:
        if not isinstance(value, dict) or not isinstance(value.get("iterations"), int):
            raise CredentialError("a credential needs salt, iterations, stored_key and server_key")
        try:
            return cls(
                base64.b64decode(value["salt"], validate=True),
                value["iterations"],
                base64.b64decode(value["stored_key"], validate=True),
                base64.b64decode(value["server_key"], validate=True),
            )
        except (KeyError, TypeError, binascii.Error) as exc:
            raise CredentialError(f"a credential is malformed: {exc!r}") from exc


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(
            f"iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}, got {iterations}"
        )


Users = dict[str, dict[str, ScramCredential]]  # user -> mechanism -> credential


class CredentialStore:
    """The credentials file of one data directory (see the module docstring)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / CREDENTIALS_FILE
        self._lock_path = Path(data_dir) / LOCK_FILE
        self._identity: tuple[int, int, int] | None = None
        self._users: Users = {}

    def users(self) -> Users:
        """Every user's credentials, as the file holds them now."""
        self._refresh()
        return self._users

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users().get(user, {}).get(mechanism)

    def check_password(self, user: str, password: str) -> bool:
        """SASL/PLAIN: whether ``password`` matches one of ``user``'s SCRAM credentials
        (SHA-512 preferred). An unknown user costs one PBKDF2 of the default iteration count,
        as a user added with the defaults does, so the time taken does not tell which names
        exist."""
        creds = self.users().get(user, {})
        mechanism = "SCRAM-SHA-512" if "SCRAM-SHA-512" in creds else "SCRAM-SHA-256"
        cred = creds.get(mechanism)
        if cred is None:
            ScramCredential.from_password("SCRAM-SHA-512", password, DEFAULT_ITERATIONS, b"\0" * SALT_BYTES)
            return False
        return cred.matches(mechanism, password)

    def update(self, change: Callable[[Users], None]) -> None:
        """Apply ``change`` to the current users and write the result, holding the lock
        so that concurrent updates (broker and CLI) are applied one after the other."""
        with self._locked():
            self._identity = None
            self._refresh()
            users = {name: dict(creds) for name, creds in self._users.items()}
            change(users)
            users = {name: creds for name, creds in users.items() if creds}
            doc = {
                "format": FORMAT,
                "users": {
                    name: {mech: cred.to_json() for mech, cred in sorted(creds.items())}
                    for name, creds in sorted(users.items())
                },
            }
            remove_temp_files(self.path.parent, (CREDENTIALS_FILE,))
            atomic_write(self.path, json.dumps(doc, indent=1).encode() + b"\n", mode=0o600)
            self._identity = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._identity, self._users = None, {}
            return
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        if identity != self._identity:
            self._users = _parse(self.path.read_bytes(), self.path)
            self._identity = identity


def _parse(raw: bytes, path: Path) -> Users:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise CredentialError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("users"), dict):
        raise CredentialError(f"{path} is not a logtrove credentials file of format {FORMAT}")
    users: Users = {}
    for name, creds in doc["users"].items():
        if not isinstance(creds, dict):
            raise CredentialError(f"{path}: the credentials of {name!r} are malformed")
        users[name] = {
            mech: ScramCredential.from_json(value)
            for mech, value in creds.items()
            if mech in SCRAM_MECHANISMS
        }
    return users


def _hash(mechanism: str) -> str:
    try:
        return SCRAM_MECHANISMS[mechanism][1]
    except KeyError:
        raise CredentialError(
            f"unknown SCRAM mechanism {mechanism!r} (one of {', '.join(SCRAM_MECHANISMS)})"
        ) from None


def _normalize(password: str) -> bytes:
    """The password bytes salted. Kafka's ScramFormatter salts the UTF-8 bytes as given
    (no SASLprep), and so does this, so credentials made by Kafka's tools agree."""
    return password.encode("utf-8")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


__all__ = [
    "CREDENTIALS_FILE",
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "CredentialError",
    "CredentialStore",
    "ScramCredential",
    "Users",
    "check_iterations",
    "check_user_name",
    "mechanism_by_code",
]
