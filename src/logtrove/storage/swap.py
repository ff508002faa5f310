"""Replacing segments atomically: the swap protocol of the cleaner (DESIGN.md §4).

The cleaner writes the retained records of old segments ``S1..Sn`` into a new segment
``N`` whose files carry the suffix ``.cleaned``. Then, in this order::

    1. write  swap-<N base>.json  {"base": N, "replaces": [S1..Sn bases]}   (fsync)
    2. rename N's files  .cleaned → .swap       (the .log last: "N.log.swap exists"
                                                  is the commit point)
    3. rename S1..Sn's files  → .deleted         (deleted later, after file.delete.delay.ms)
    4. rename N's files  .swap → final names    (the .log last)
    5. remove swap-<N base>.json

N's base offset is S1's, so in step 4 N takes over S1's names; step 3 has freed them.

Recovery (:func:`recover_swaps`, run by a writer before it lists segments):

* ``*.cleaned`` files: a clean that never committed; deleted.
* a manifest whose ``N.log.swap`` exists: committed. Every file of the replaced segments
  (whatever its suffix, except ``.swap``) is deleted, then N's ``.swap`` files are renamed
  to their final names and the manifest removed. Repeating this after another crash is
  harmless.
* a manifest without ``N.log.swap``: either not committed (old segments intact) or
  already finished up to step 4; leftover ``.swap`` files of N and the manifest are
  deleted. Index files lost that way are rebuilt from the log, like any missing index.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from logtrove.storage.checkpoint import fsync_dir
from logtrove.storage.segment import Segment
from logtrove.storage.segmentnames import LOG_SUFFIX, segment_file_name

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_MANIFEST_PREFIX = "swap-"

Fault = Callable[[str], None]
"""Called with a step name between the steps (tests inject crashes through it)."""


def _no_fault(step: str) -> None:
    return None


def manifest_path(directory: Path, base: int) -> Path:
    return directory / f"{_MANIFEST_PREFIX}{base:020d}.json"


def swap_in(directory: Path, new: Segment, old: Sequence[Segment], fault: Fault = _no_fault) -> None:
    """Steps 1-5 above; ``new`` must be complete, flushed and named ``.cleaned``.

    On return ``new`` has its final file names and ``old`` are renamed ``.deleted``
    (still open, for in-flight readers; the caller closes and unlinks them later).
    """
    manifest = manifest_path(directory, new.base_offset)
    manifest.write_text(json.dumps({"base": new.base_offset, "replaces": [s.base_offset for s in old]}))
    with manifest.open("rb") as f:
        os.fsync(f.fileno())
    fsync_dir(directory)
    fault("manifest-written")
    new.rename_suffix(SWAP_SUFFIX)
    fsync_dir(directory)
    fault("swap-committed")
    for seg in old:
        seg.rename_suffix(DELETED_SUFFIX)
    fsync_dir(directory)
    fault("old-deleted")
    new.rename_suffix("")
    fsync_dir(directory)
    fault("renamed-final")
    manifest.unlink()
    fsync_dir(directory)


def recover_swaps(directory: Path) -> list[int]:
    """Finish or discard half-done swaps in a partition directory. Returns the bases of
    the segments whose swap was completed."""
    if not directory.is_dir():
        return []
    completed = []
    for path in directory.glob("*" + CLEANED_SUFFIX):
        path.unlink(missing_ok=True)
    for manifest in sorted(directory.glob(_MANIFEST_PREFIX + "*.json")):
        try:
            info = json.loads(manifest.read_text())
            base, replaces = int(info["base"]), [int(b) for b in info["replaces"]]
        except (OSError, ValueError, KeyError, TypeError):
            manifest.unlink(missing_ok=True)  # written before any rename: nothing to finish
            continue
        swap_log = directory / (segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
        if swap_log.exists():
            for old in replaces:
                for path in directory.glob(segment_file_name(old, ".") + "*"):
                    if not path.name.endswith(SWAP_SUFFIX):
                        path.unlink(missing_ok=True)
            swaps = sorted(
                directory.glob(segment_file_name(base, ".") + "*" + SWAP_SUFFIX), key=lambda p: p == swap_log
            )
            for path in swaps:
                path.rename(path.with_name(path.name[: -len(SWAP_SUFFIX)]))
            completed.append(base)
        else:
            for path in directory.glob(segment_file_name(base, ".") + "*" + SWAP_SUFFIX):
                path.unlink(missing_ok=True)
        fsync_dir(directory)
        with contextlib.suppress(FileNotFoundError):
            manifest.unlink()
    for path in directory.glob("*" + SWAP_SUFFIX):  # a .swap with no manifest never committed
        path.unlink(missing_ok=True)
    fsync_dir(directory)
    return completed
