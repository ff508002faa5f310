"""Headless Chromium for the console tests (Debian's ``/usr/bin/chromium`` driven by
Playwright): the ``browser_context`` and ``page`` fixtures (served to every test here by
``conftest.py``) and the conventions they share.

Screenshots are kept in ``tests/http/artifacts/`` (or ``$LOGTROVE_ARTIFACTS``), one per
test, named after it. Playwright is imported when a fixture first needs it, so the tests
of this directory that use no browser run without it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("LOGTROVE_ARTIFACTS", Path(__file__).parent / "artifacts"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/install-system-deps.sh)"
)


def sync_api() -> Any:
    """Playwright's synchronous API; skips the test when Playwright is not installed."""
    return pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One persistent Chromium context per test module (the console's CSP bypassed)."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api().sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1300, "height": 900},
            # Playwright's wait_for_function evaluates its predicate with eval, which the
            # console's Content-Security-Policy forbids; test_console_login_browser runs
            # the console under its CSP.
            bypass_csp=True,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A new page; its screenshot is kept, and a JavaScript error on it fails the test."""
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        page.close()
    assert not errors, f"JavaScript errors: {errors}"
