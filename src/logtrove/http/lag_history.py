"""Lag over time: every group's lag per topic, sampled by the server that holds the data.

``logtrove serve`` samples every ``interval_s`` (10 s by default) and appends one line per
sample to ``lag-history.jsonl`` in the data directory, so the history survives restarts
and a read-only ``logtrove http`` beside the broker reads the same file::

    {"t": 1767225600000, "lags": [["billing", "orders", 1200, 5300], …]}
           sample time (ms)        group      topic    records  time lag ms (or null)

Samples older than ``window_s`` are dropped: the file is rewritten (atomically, a
temporary file then a rename) once it holds twice the window, so it stays within about
two windows (24 h at 10 s is 8 640 lines). A sample lists at most
:data:`MAX_PAIRS_PER_SAMPLE` (group, topic) pairs. A torn last line (a crash mid-append)
is skipped when read.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from logtrove.clock import Clock
from logtrove.http.groups import GroupsSource

FILE_NAME = "lag-history.jsonl"
MAX_PAIRS_PER_SAMPLE = 2000
DEFAULT_INTERVAL_S = 10.0
DEFAULT_WINDOW_S = 24 * 3600.0
_log = logging.getLogger("logtrove.http")


@dataclass(frozen=True, slots=True)
class LagPoint:
    """One group's lag on one topic at one time."""

    t: int
    lag: int
    time_lag_ms: int | None


class LagHistory:
    """The samples of ``lag-history.jsonl``: read by the API, appended by :class:`LagSampler`."""

    def __init__(self, data_dir: Path, *, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.path = data_dir / FILE_NAME
        self.window_ms = int(window_s * 1000)
        self._lock = threading.Lock()
        self._oldest_ms: int | None = None  # of the file's first sample, once known

    def _read(self) -> list[dict[str, object]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        samples = []
        for line in text.splitlines():
            try:
                sample = json.loads(line)
            except ValueError:
                continue  # a torn line
            if isinstance(sample, dict) and isinstance(sample.get("t"), int):
                samples.append(sample)
        return samples

    def points(self, group: str, since_ms: int = 0) -> dict[str, list[LagPoint]]:
        """``group``'s lag per topic over time, oldest first, from ``since_ms`` on."""
        out: dict[str, list[LagPoint]] = {}
        with self._lock:
            samples = self._read()
        for sample in samples:
            t = int(sample["t"])  # type: ignore[call-overload]
            if t < since_ms:
                continue
            for row in sample.get("lags", []):  # type: ignore[attr-defined]
                if isinstance(row, list) and len(row) == 4 and row[0] == group:
                    out.setdefault(str(row[1]), []).append(LagPoint(t, int(row[2]), row[3]))
        return out

    def append(self, t: int, lags: list[tuple[str, str, int, int | None]]) -> None:
        """Add one sample and drop samples older than the window when the file is due."""
        line = json.dumps(
            {"t": t, "lags": [list(x) for x in lags[:MAX_PAIRS_PER_SAMPLE]]}, separators=(",", ":")
        )
        with self._lock:
            with self.path.open("a+b") as f:
                f.seek(0, 2)
                if f.tell() > 0:  # after a torn last line, start a new one
                    f.seek(-1, 2)
                    if f.read(1) != b"\n":
                        f.write(b"\n")
                f.write(line.encode() + b"\n")
            self._maybe_trim(t)

    def _maybe_trim(self, now: int) -> None:
        """Rewrite the file without the samples older than the window, once its oldest
        sample is two windows old (the file is read only then)."""
        if self._oldest_ms is None:
            first = next(iter(self._read()), None)
            self._oldest_ms = now if first is None else int(first["t"])  # type: ignore[call-overload]
        if now - self._oldest_ms <= 2 * self.window_ms:
            return
        keep = [s for s in self._read() if now - int(s["t"]) <= self.window_ms]  # type: ignore[call-overload]
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(s, separators=(",", ":")) + "\n" for s in keep))
        tmp.replace(self.path)
        self._oldest_ms = int(keep[0]["t"]) if keep else now  # type: ignore[call-overload]


class LagSampler:
    """A daemon thread appending every group's lag to a :class:`LagHistory` every
    ``interval_s``; :meth:`stop` ends it."""

    def __init__(self, groups: GroupsSource, history: LagHistory, clock: Clock, interval_s: float) -> None:
        self.groups = groups
        self.history = history
        self.clock = clock
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def start(self) -> LagSampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        """Take one sample now."""
        self.groups.invalidate()
        lags = [(g.group, t.topic, t.lag, t.time_lag_ms) for g in self.groups.lags() for t in g.topics]
        self.history.append(self.clock.now_ms(), lags)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except Exception:  # a bad moment (a topic deleted mid-sample): the next one will do
                _log.warning("lag sample failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
