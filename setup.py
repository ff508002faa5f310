"""Build of the compiled parts (everything else is in pyproject.toml): the indexer's
per-record loop, which needs a C compiler and xxHash's header (Debian: libxxhash-dev,
installed by scripts/install-system-deps.sh), the produce-time record walk and the Spark
columnar decoder (batches to Arrow buffers) and encoder (Arrow columns to records), which
need only the compiler, and the cleaner's map and copy passes, which need xxHash's header too. ``optional=True``: without
them the package still installs and runs the pure-Python twins, several times slower
(``logtrove.storage.derived.blockentries``, ``logtrove.records.walk``, ``logtrove.records.columnar``,
``logtrove.records.encoder``, ``logtrove.storage.cleaner.passes``)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "logtrove.storage.derived._indexcore",
            ["src/logtrove/storage/derived/_indexcore.c", "src/logtrove/storage/derived/_keyindex.c"],
            depends=["src/logtrove/records/varint.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
            optional=True,
        ),
        Extension(
            "logtrove.records._walk",
            ["src/logtrove/records/_walk.c"],
            depends=["src/logtrove/records/varint.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        ),
        Extension(
            "logtrove.storage.cleaner._passes",
            ["src/logtrove/storage/cleaner/_passes.c"],
            depends=["src/logtrove/records/varint.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        ),
        Extension(
            "logtrove.records._columnar",
            ["src/logtrove/records/_columnar.c"],
            depends=["src/logtrove/records/varint.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        ),
        Extension(
            "logtrove.records._encoder",
            ["src/logtrove/records/_encoder.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            optional=True,
        ),
    ]
)
