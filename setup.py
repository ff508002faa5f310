"""Build of the one compiled part, the indexer's per-record loop (everything else is in
pyproject.toml). It needs a C compiler and xxHash's header (Debian: libxxhash-dev,
installed by scripts/install-system-deps.sh). ``optional=True``: without them the
package still installs and the indexer runs its pure-Python twin, several times slower
(``logtrove.storage.pending``)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "logtrove.storage._indexcore",
            ["src/logtrove/storage/_indexcore.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
            optional=True,
        )
    ]
)
