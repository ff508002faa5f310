"""The names of a segment's files: its base offset zero-padded to 20 digits, a suffix per
kind of file, and while the segment changes state a suffix for that state.

::

    00000000000000001234.log            the batches              (storage.segment)
    00000000000000001234.index          sparse offset index      (storage.index)
    00000000000000001234.timeindex      sparse time index        (storage.index)
    00000000000000001234.keyidx …       derived by the indexer   (storage.derived, storage.txnindex)
    00000000000000001234.log.cleaned    a state suffix on every file of the segment:
                        .swap / .deleted  .cleaned, .swap, .deleted (storage.swap)

A derived file follows the segment's renames: it shares the base-offset prefix and the
current state suffix, and has one dot in its kind (``.keyidx``, not ``.keyidx.tmp``).
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000001234.log`` for base offset 1234."""
    return f"{base_offset:020d}{suffix}"


def swap_suffix(name: str, old: str, new: str) -> str:
    """``name`` with its state suffix ``old`` (may be ``""``) replaced by ``new``."""
    return (name[: -len(old)] if old and name.endswith(old) else name) + new


def derived_files(directory: Path, base_offset: int, file_suffix: str, own: Set[Path]) -> list[Path]:
    """The files in ``directory`` derived from the segment at ``base_offset`` whose files
    carry ``file_suffix`` now, other than its ``own`` (module doc)."""
    prefix = segment_file_name(base_offset, ".")
    out = []
    for path in directory.glob(prefix + "*"):
        rest = path.name[len(prefix) :]
        kind = rest[: -len(file_suffix)] if file_suffix else rest
        if path in own or path.name.endswith(".tmp") or not rest.endswith(file_suffix):
            continue
        if "." not in kind:
            out.append(path)
    return out
