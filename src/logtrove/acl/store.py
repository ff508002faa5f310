"""The ACL bindings of a data directory: ``DATA_DIR/acls.json``, written atomically::

    {"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "orders",
      "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
      "operation": "READ", "permission": "ALLOW"}]}

One writer changes it: the broker (CreateAcls / DeleteAcls) or, while no broker runs,
``logtrove acls`` (which takes the data directory's lock). A file that cannot be read or
holds an invalid entry is a file somebody else wrote: it is not loaded and not
overwritten, and the authorizer **fails closed** (only super users pass) with a warning
that says how to fix it, so a damaged file never opens access nor stops the broker.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from logtrove.acl.model import AclBinding, AclError, AclFilter
from logtrove.storage.checkpoint import atomic_write, read_state_file

log = logging.getLogger(__name__)

ACLS_FILE = "acls.json"
MAX_ACLS = 100_000  # bindings kept; bounds the file, memory and every decision's scan


class AclStore:
    """The bindings, loaded once and changed only through :meth:`add` / :meth:`delete`."""

    def __init__(
        self, path: Path, bindings: Iterable[AclBinding] = (), unreadable: str | None = None
    ) -> None:
        self.path = path
        self._bindings: frozenset[AclBinding] = frozenset(bindings)
        self.unreadable = unreadable  # why the file was not loaded; changes are refused then
        self._lock = threading.Lock()
        self.version = 0  # bumped on every change (the authorizer's index follows it)
        self._identity: tuple[int, int, int] | None = None  # of the file last read by reload_if_changed

    @classmethod
    def load(cls, data_dir: Path) -> AclStore:
        path = data_dir / ACLS_FILE
        try:
            data = json.loads(read_state_file(path))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            return cls._unreadable(path, f"it cannot be read ({exc})")
        entries = data.get("acls") if isinstance(data, dict) else None
        if not isinstance(entries, list) or len(entries) > MAX_ACLS:
            return cls._unreadable(path, f"it is not an object with an 'acls' list of at most {MAX_ACLS}")
        try:
            bindings = [AclBinding.from_json(e) for e in entries]
        except AclError as exc:
            return cls._unreadable(path, f"an entry is invalid ({exc})")
        return cls(path, bindings)

    def reload_if_changed(self) -> None:
        """Read the file again if it changed (identity: inode, size, mtime), for a reader
        beside the process that writes it (``logtrove http`` beside ``serve``). Files are
        replaced whole, so a reader sees one version or the next."""
        try:
            st = self.path.stat()
            identity: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            identity = None
        if identity == self._identity:
            return
        fresh = AclStore.load(self.path.parent)
        with self._lock:
            self._bindings, self.unreadable, self._identity = fresh._bindings, fresh.unreadable, identity
            self.version += 1

    @classmethod
    def _unreadable(cls, path: Path, reason: str) -> AclStore:
        message = (
            f"ACL file {path} not loaded: {reason}; until it is fixed or removed, only super users "
            "are authorized and ACLs cannot be changed"
        )
        log.warning("%s", message)
        return cls(path, unreadable=message)

    @property
    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        return sorted(b for b in self._bindings if flt.matches(b))

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Store bindings (already there: kept once); raises :class:`AclError`."""
        with self._lock:
            self._check_writable()
            new = self._bindings | frozenset(bindings)
            if len(new) > MAX_ACLS:
                raise AclError(f"at most {MAX_ACLS} ACLs can be stored")
            self._save(new)

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches; per filter, what it removed."""
        with self._lock:
            self._check_writable()
            removed = [sorted(b for b in self._bindings if f.matches(b)) for f in filters]
            gone = {b for group in removed for b in group}
            if gone:
                self._save(self._bindings - gone)
            return removed

    def _check_writable(self) -> None:
        if self.unreadable is not None:
            raise AclError(self.unreadable)

    def _save(self, bindings: frozenset[AclBinding]) -> None:
        data = {"version": 1, "acls": [b.to_json() for b in sorted(bindings)]}
        atomic_write(self.path, (json.dumps(data, indent=1) + "\n").encode())
        self._bindings = bindings
        self.version += 1
