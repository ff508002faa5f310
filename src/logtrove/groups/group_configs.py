"""Per-group configs of the consumer group protocol (KIP-848, the GROUP config resource).

Kafka 4.0 lets an admin set, for one consumer group, the session timeout and the
heartbeat interval its members get (``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms``); a group without its own value takes the broker's
(``serve --consumer-session-timeout-ms`` / ``--consumer-heartbeat-interval-ms``). Values
must lie within Kafka's broker bounds (``group.consumer.min/max.*``): session 45-60 s,
heartbeat 5-15 s, and the heartbeat interval below the session timeout. A config can be
set for a group that does not exist yet (librdkafka's tests do), as in Kafka.

File: ``DATA_DIR/group-configs.json``, written atomically::

    {"version": 1, "groups": {"billing": {"consumer.session.timeout.ms": "50000"}}}

A file that does not parse is not loaded nor overwritten (the broker's values apply and
alterations are refused with a message saying how to fix it); a bad entry is skipped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from logtrove.storage.checkpoint import atomic_write, read_state_file
from logtrove.storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "group-configs.json"
SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
MAX_GROUPS = 100_000  # groups with configs of their own: bounds the file


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    low: int
    high: int
    doc: str


GROUP_CONFIG_DEFS: Mapping[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(SESSION_TIMEOUT, 45_000, 60_000, "a member not heard from this long is fenced"),
        GroupConfigDef(HEARTBEAT_INTERVAL, 5_000, 15_000, "how often members heartbeat"),
    )
}


def _parse(name: str, raw: str) -> int:
    definition = GROUP_CONFIG_DEFS.get(name)
    if definition is None:
        raise InvalidConfigError(f"unknown group config {name!r}; known: {', '.join(GROUP_CONFIG_DEFS)}")
    try:
        value = int(raw)
    except ValueError:
        raise InvalidConfigError(f"invalid value for {name}: {raw!r} is not an integer") from None
    if not definition.low <= value <= definition.high:
        raise InvalidConfigError(
            f"invalid value for {name}: {value} is outside [{definition.low}, {definition.high}]"
        )
    return value


class GroupConfigs:
    """The groups' own configs over the broker's defaults."""

    def __init__(self, data_dir: Path, defaults: Callable[[], Mapping[str, int]]) -> None:
        self.path = data_dir / GROUP_CONFIGS_FILE
        self.defaults = defaults  # the broker's values, by config name
        self._lock = threading.Lock()
        self.unreadable: str | None = None
        self._groups: dict[str, dict[str, int]] = self._load()

    def _load(self) -> dict[str, dict[str, int]]:
        try:
            data = json.loads(read_state_file(self.path))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            return self._unreadable(f"it cannot be read ({exc})")
        groups = data.get("groups") if isinstance(data, dict) else None
        if not isinstance(groups, dict):
            return self._unreadable("it is not an object with a 'groups' object")
        out: dict[str, dict[str, int]] = {}
        for group, configs in list(groups.items())[:MAX_GROUPS]:
            if not isinstance(configs, dict):
                log.warning("%s: group %r skipped: its configs are not an object", self.path, group)
                continue
            for name, raw in configs.items():
                try:
                    out.setdefault(str(group), {})[name] = _parse(str(name), str(raw))
                except InvalidConfigError as exc:
                    log.warning("%s: group %r: %s (skipped)", self.path, group, exc)
        return out

    def _unreadable(self, reason: str) -> dict[str, dict[str, int]]:
        self.unreadable = (
            f"group config file {self.path} not loaded: {reason}; the broker's values apply and "
            "group configs cannot be altered until it is fixed or removed"
        )
        log.warning("%s", self.unreadable)
        return {}

    def own(self, group_id: str) -> dict[str, int]:
        """The values set on the group itself."""
        return dict(self._groups.get(group_id, {}))

    def effective(self, group_id: str) -> dict[str, int]:
        return {**self.defaults(), **self._groups.get(group_id, {})}

    def value(self, group_id: str, name: str) -> int:
        return self.effective(group_id)[name]

    def alter(
        self,
        group_id: str,
        set_configs: Mapping[str, str],
        deletes: list[str],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and remove a group's own values; raises :class:`InvalidConfigError`."""
        with self._lock:
            if self.unreadable is not None:
                raise InvalidConfigError(self.unreadable)
            if not group_id:
                raise InvalidConfigError("a group config needs a group id")
            current = dict(self._groups.get(group_id, {}))
            for name in deletes:
                if name not in GROUP_CONFIG_DEFS:
                    raise InvalidConfigError(
                        f"unknown group config {name!r}; known: {', '.join(GROUP_CONFIG_DEFS)}"
                    )
                current.pop(name, None)
            for name, raw in set_configs.items():
                current[name] = _parse(name, raw)
            merged = {**self.defaults(), **current}
            if current and merged[HEARTBEAT_INTERVAL] >= merged[SESSION_TIMEOUT]:
                raise InvalidConfigError(
                    f"{HEARTBEAT_INTERVAL} ({merged[HEARTBEAT_INTERVAL]}) must be below "
                    f"{SESSION_TIMEOUT} ({merged[SESSION_TIMEOUT]})"
                )
            if group_id not in self._groups and len(self._groups) >= MAX_GROUPS:
                raise InvalidConfigError(f"at most {MAX_GROUPS} groups can have configs of their own")
            if validate_only:
                return
            groups = {**self._groups, group_id: current}
            if not current:
                del groups[group_id]
            data = {
                "version": 1,
                "groups": {g: {k: str(v) for k, v in c.items()} for g, c in sorted(groups.items())},
            }
            atomic_write(self.path, (json.dumps(data, indent=1) + "\n").encode())
            self._groups = groups
