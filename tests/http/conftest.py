"""Fixtures of the HTTP tests (see :mod:`tests.http.support`, :mod:`tests.http.browser` and
:mod:`tests.http.secured`).

This directory has no ``__init__.py`` on purpose: as a package it would be called
``http`` and shadow the standard library's.
"""

from tests.http.browser import browser_context, page  # noqa: F401
from tests.http.secured import secured, server  # noqa: F401
from tests.http.support import client, dataset, live, timeline  # noqa: F401
