"""Bearer tokens of the HTTP API, kept in the data directory.

``logtrove tokens create --user alice`` prints a new token once; the file keeps only its
SHA-256, so a copy of the data directory gives no usable token (a token is 32 random
bytes, so an unsalted fast hash is enough: there is nothing to guess). A token acts as
its user (principal ``User:alice``) for as long as both the token and the user's SCRAM
credentials exist.

The file ``http-tokens.json`` in the data directory (mode 0600)::

    {"format": 1,
     "tokens": [{"id": "3f2a9c1b7e40", "user": "alice", "sha256": "<hex>",
                 "created_ms": 1767225600000, "description": "grafana"}]}

It is replaced whole (:func:`~logtrove.storage.checkpoint.atomic_write`) under an
advisory lock on ``.http-tokens.lock``; the HTTP server looks at the file's identity
(inode, size, mtime) on every request, so a revoked token stops working at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from logtrove.acl.credentials import check_user_name
from logtrove.storage.checkpoint import atomic_write, remove_temp_files

TOKENS_FILE = "http-tokens.json"
LOCK_FILE = ".http-tokens.lock"
FORMAT = 1
TOKEN_PREFIX = "lt_"
MAX_TOKEN_CHARS = 200  # what a request's Authorization header may offer before it is refused


class TokenError(ValueError):
    """A tokens file that cannot be read, or an unknown token id."""


@dataclass(frozen=True)
class TokenInfo:
    """One stored token: never the token itself."""

    id: str
    user: str
    sha256: str
    created_ms: int
    description: str = ""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class TokenStore:
    """The tokens file of one data directory (see the module docstring)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / TOKENS_FILE
        self._lock_path = Path(data_dir) / LOCK_FILE
        self._identity: tuple[int, int, int] | None = None
        self._tokens: list[TokenInfo] = []
        self._by_hash: dict[str, TokenInfo] = {}

    def tokens(self) -> list[TokenInfo]:
        self._refresh()
        return list(self._tokens)

    def user_of(self, token: str) -> str | None:
        """The user ``token`` acts as, or ``None`` for an unknown (or revoked) one."""
        if len(token) > MAX_TOKEN_CHARS or not token.startswith(TOKEN_PREFIX):
            return None
        self._refresh()
        info = self._by_hash.get(token_hash(token))
        return None if info is None else info.user

    def create(self, user: str, description: str = "") -> tuple[TokenInfo, str]:
        """A new token for ``user``: its stored record and the token (shown once)."""
        check_user_name(user)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        info = TokenInfo(secrets.token_hex(6), user, token_hash(token), int(time.time() * 1000), description)
        with self._locked():
            self._write([*self._read(), info])
        return info, token

    def revoke(self, token_id: str) -> TokenInfo:
        """Delete the token ``token_id``; :class:`TokenError` if there is none."""
        with self._locked():
            tokens = self._read()
            kept = [t for t in tokens if t.id != token_id]
            if len(kept) == len(tokens):
                raise TokenError(f"no token with id {token_id!r}")
            self._write(kept)
        return next(t for t in tokens if t.id == token_id)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self) -> list[TokenInfo]:
        self._identity = None
        self._refresh()
        return list(self._tokens)

    def _write(self, tokens: list[TokenInfo]) -> None:
        doc = {"format": FORMAT, "tokens": [asdict(t) for t in tokens]}
        remove_temp_files(self.path.parent, (TOKENS_FILE,))
        atomic_write(self.path, json.dumps(doc, indent=1).encode() + b"\n", mode=0o600)
        self._identity = None

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._identity, self._tokens, self._by_hash = None, [], {}
            return
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        if identity != self._identity:
            self._tokens = _parse(self.path.read_bytes(), self.path)
            self._by_hash = {t.sha256: t for t in self._tokens}
            self._identity = identity


def _parse(raw: bytes, path: Path) -> list[TokenInfo]:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise TokenError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("tokens"), list):
        raise TokenError(f"{path} is not a logtrove tokens file of format {FORMAT}")
    try:
        return [
            TokenInfo(
                str(t["id"]),
                str(t["user"]),
                str(t["sha256"]),
                int(t["created_ms"]),
                str(t.get("description", "")),
            )
            for t in doc["tokens"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise TokenError(f"{path}: a token is malformed: {exc!r}") from exc


__all__ = ["TOKENS_FILE", "TokenError", "TokenInfo", "TokenStore", "token_hash"]
