"""Processes of a broker under test, read from /proc (no psutil)."""

from __future__ import annotations

from pathlib import Path


def family(pid: int) -> dict[int, Path]:
    """``pid`` and its children: process ID → /proc directory."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if int(entry.name) == pid or ppid == pid:
            found[int(entry.name)] = entry
    return found


def peak_rss_kib(pid: int) -> dict[int, int]:
    """VmHWM (peak resident memory, KiB) of ``pid`` and of each of its children."""
    peaks = {}
    for child, proc in family(pid).items():
        try:
            status = (proc / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peaks[child] = int(line.split()[1])
    return peaks


def indexer_children(pid: int) -> list[int]:
    """The children of broker ``pid`` started by multiprocessing's spawn (its indexer)."""
    out = []
    for child, proc in family(pid).items():
        try:
            if child != pid and b"spawn_main" in (proc / "cmdline").read_bytes():
                out.append(child)
        except OSError:
            continue
    return out
