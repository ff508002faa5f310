"""The ``logtrove`` Typer application, to which each command module adds its commands.

It lives apart from :mod:`.main` (which imports every command module) so that the
commands import it without an import cycle.
"""

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
