"""Loading the compiled twins of the per-record loops.

Every hot per-record loop in logtrove (the batch walk, the window picker, the columnar
decoder and encoder, the cleaner's passes, the indexer's block entries) is written twice:
a pure-Python function that defines the behaviour, and a C extension that must give the
same values and the same errors (hypothesis tests check each pair). Which one runs is
decided once, at import, by :func:`native`:

* the compiled names, when the extension was built at install time and has them all;
* ``None`` when it was not built (no compiler), when it is an older build that lacks one
  of the names, or when the user sets ``LOGTROVE_PURE_PYTHON=1`` (to compare the two, or
  to rule the C code out while chasing a bug). The caller then uses its Python twin.

Only ``ImportError`` means "not there": an extension whose initialisation raises anything
else propagates, so a broken build is seen rather than silently slow.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

PURE_PYTHON_ENV = "LOGTROVE_PURE_PYTHON"


def native(module: str, *names: str) -> Any:
    """``module``'s attribute ``names[0]`` (or the tuple of all ``names`` when there are
    several), or ``None`` when the compiled twin is not to be used or not there.

    The result is ``Any`` on purpose: each caller annotates the variable it assigns with
    the signature its Python twin has, which the extension's ``.pyi`` stub also declares.
    """
    if os.environ.get(PURE_PYTHON_ENV) == "1":
        return None
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        return None
    try:
        found = tuple(getattr(loaded, name) for name in names)
    except AttributeError:  # an older build of the extension
        return None
    return found[0] if len(found) == 1 else found
