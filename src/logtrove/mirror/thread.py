"""The mirror beside a broker (``serve --follow``): a :class:`~.mirror.Mirror` in a
thread of its own."""

from __future__ import annotations

import logging
import threading

from logtrove.mirror.mirror import Mirror
from logtrove.mirror.state import MirrorError

log = logging.getLogger("logtrove.mirror")


class MirrorThread:
    """A :class:`Mirror` running in a thread of its own beside a broker (``serve
    --follow``): it retries a failing source forever and stops on :meth:`stop`, or when
    the source refuses it (credentials, TLS: logged, the broker serves on)."""

    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirror", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.mirror.run(self._stop)
            except MirrorError as exc:  # refused: retrying with the same settings cannot help
                if self.mirror.problem is None:  # else the mirror logged it, with what to do
                    log.error("mirror of %s stopped: %s", self.mirror.config.source, exc)
                return
            except Exception:  # one bad round must not end the mirror; it starts over
                log.exception("mirror round failed; starting over")
                self._stop.wait(self.mirror.config.retry_backoff_ms / 1000)

    def stop(self, timeout_s: float = 30) -> None:
        """Stop after the current round (a fetch waits at most ``max_wait_ms``)."""
        self._stop.set()
        self._thread.join(timeout_s)
        self.mirror.close()
