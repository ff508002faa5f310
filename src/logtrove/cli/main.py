"""Entry point of the ``logtrove`` command: one sub-module per command family."""

from __future__ import annotations

import typer

from logtrove import __version__

app = typer.Typer(
    name="logtrove",
    help="A Kafka-compatible message log in which every message can be found.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    # A crash's traceback must not print local variables: they hold passwords (a SASL
    # token, a properties file's text, ``users add`` input) and tokens.
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"logtrove {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version."
    ),
) -> None:
    """A Kafka-compatible message log in which every message can be found."""


def _register() -> None:
    # Each module adds its commands to ``app``; one line per command family.
    import logtrove.cli.consume
    import logtrove.cli.groups
    import logtrove.cli.http
    import logtrove.cli.lag  # noqa: F401
    from logtrove.cli import acls, certs, compact, dump, mirror, produce, query, serve, tokens, topics, users  # noqa: F401
    from logtrove.cli import spark as _spark  # noqa: F401


_register()


def main() -> None:
    app()
