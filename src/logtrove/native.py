"""The compiled twins of the per-record loops, and the one rule that chooses them.

Every hot per-record loop in logtrove (the batch walk, the window picker, the columnar
decoder and encoder, the cleaner's passes, the indexer's block entries and key chains) is
written twice: a pure-Python function that defines the behaviour, and a C extension that
must give the same values and the same errors (hypothesis tests check each pair).
:data:`EXTENSIONS` lists every extension ``setup.py`` builds, the names each must export
and the Python modules that hold their twins. Each of those modules does the same, once,
at import::

    NATIVE = compiled("logtrove.records._walk")      # the extension module, or None
    IMPLEMENTATION = implementation(NATIVE)           # "compiled" or "python"
    walk = NATIVE.walk if NATIVE is not None else py_walk

All or nothing per extension: :func:`compiled` gives the extension only when it was built
(at install time; ``optional=True`` lets the install go on without a compiler) and has
every name listed, so an older build that lacks one runs every twin in Python, never a mix
of both. It gives ``None`` too when the environment sets ``LOGTROVE_PURE_PYTHON=1`` (to
compare the two, or to rule the C code out while chasing a bug): then every module runs
Python.

Only ``ImportError`` means "not there": an extension whose initialisation raises anything
else propagates, so a broken build is seen rather than silently slow.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Literal

PURE_PYTHON_ENV = "LOGTROVE_PURE_PYTHON"


@dataclass(frozen=True)
class Extension:
    """One C extension: its module, every name it exports, and the modules of its twins."""

    module: str
    names: tuple[str, ...]
    twins: tuple[str, ...]


EXTENSIONS = (
    Extension(
        "logtrove.records._walk",
        (
            "walk",
            "first_at_or_after",
            "pick_window",
            "pick_offset",
            "time_bounds",
            "find_record",
            "count_times",
        ),
        ("logtrove.records.walk", "logtrove.records.pick"),
    ),
    Extension("logtrove.records._columnar", ("Decoder",), ("logtrove.records.columnar",)),
    Extension(
        "logtrove.records._encoder", ("partition_order", "encode_records"), ("logtrove.records.encoder",)
    ),
    Extension(
        "logtrove.storage.cleaner._passes",
        ("map_records", "filter_records", "digest_keys", "map_entries"),
        ("logtrove.storage.cleaner.passes", "logtrove.storage.cleaner.offset_map"),
    ),
    Extension(
        "logtrove.storage.derived._indexcore",
        ("Pending", "chain", "chain_from", "probe_tables", "tables_candidates"),
        ("logtrove.storage.derived.blockentries", "logtrove.storage.derived.keyindex"),
    ),
)
_BY_MODULE = {e.module: e for e in EXTENSIONS}


def load(extension: Extension) -> Any:
    """``extension``'s module when it is to be used (module doc), else ``None``.

    The result is ``Any`` on purpose: each twin module annotates the names it takes from
    it with the signatures of its Python twins, which the extension's ``.pyi`` stub also
    declares."""
    if os.environ.get(PURE_PYTHON_ENV) == "1":
        return None
    try:
        loaded = importlib.import_module(extension.module)
    except ImportError:
        return None
    if not all(hasattr(loaded, name) for name in extension.names):
        return None  # an older build: every twin of it runs in Python
    return loaded


def compiled(module: str) -> Any:
    """:func:`load` of the registered extension ``module`` (``KeyError`` for one that
    :data:`EXTENSIONS` does not list: a new extension is registered there first)."""
    return load(_BY_MODULE[module])


def implementation(loaded: object | None) -> Literal["compiled", "python"]:
    """What a twin module reports as its ``IMPLEMENTATION``: ``"compiled"`` when it runs
    the extension :func:`compiled` gave it, ``"python"`` when it runs its twins."""
    return "compiled" if loaded is not None else "python"
