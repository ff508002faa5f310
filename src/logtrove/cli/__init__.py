"""The ``logtrove`` command line (typer + rich). Thin: every command calls a library API."""
