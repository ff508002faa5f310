"""Entry point of the ``logtrove`` command: one sub-module per command family, each
adding its commands to :data:`logtrove.cli.app.app`."""

from __future__ import annotations

# Each module adds its commands to ``app`` when imported; one line per command family.
from logtrove.cli import (  # noqa: F401
    acls,
    certs,
    compact,
    consume,
    dump,
    groups,
    http,
    lag,
    mirror,
    produce,
    query,
    serve,
    spark,
    tokens,
    topics,
    users,
)
from logtrove.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
