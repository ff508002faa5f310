"""Fixtures of the HTTP tests (see :mod:`tests.http.support`).

This directory has no ``__init__.py`` on purpose: as a package it would be called
``http`` and shadow the standard library's.
"""

from tests.http.support import client, dataset, live, timeline  # noqa: F401
