"""The console against a server with ``--http-auth`` and ACLs, in headless Chromium under
its Content-Security-Policy (no violation reported): it sends the visitor to the login
page, keeps the token for the tab, shows only the topics the token's user may describe,
follows a live tail with it (through fetch, since EventSource cannot send the header),
and logs out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.http.browser import ARTIFACTS, CHROMIUM, FLAGS, needs_chromium
from tests.http.secured import basic

from logtrove.acl.tokens import TokenStore
from logtrove.http import HttpServer

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = needs_chromium


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    """A page of a Chromium that applies the CSP (the console tests' context bypasses it)."""
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on(
            "console",
            lambda msg: problems.append(msg.text) if "Content Security Policy" in msg.text else None,
        )
        try:
            yield page
        finally:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "test_console_login_with_a_token.png"), full_page=True)
            context.close()
        assert not problems, problems


def test_console_login_with_a_token(page: Any, server: HttpServer, secured: Any) -> None:
    _, token = TokenStore(secured.data).create("reader", "browser")
    page.goto(f"{server.url}/ui/topics")
    page.wait_for_url("**/ui/login?next=%2Fui%2Ftopics")
    page.locator("#auth-link", has_text="Log in").wait_for()  # visible: this server asks for credentials
    page.fill("#login-token", "lt_wrong")
    page.click("#login-submit")
    page.locator("#login-status.error").wait_for()
    assert "token" in page.locator("#login-status").inner_text()

    page.fill("#login-token", token)
    page.click("#login-submit")
    page.wait_for_url("**/ui/topics")
    page.locator("#topics-table tbody tr", has_text="orders").wait_for()
    assert page.locator("#topics-table tbody tr").all_inner_texts()[0].startswith("orders")
    assert page.locator("#topics-table tbody tr").count() == 1  # not "secret"
    assert page.evaluate("sessionStorage.getItem('logtrove.token')") == token
    assert page.locator("#auth-link").inner_text() == "Log out"

    page.goto(f"{server.url}/ui/topics/orders")  # a reload keeps the tab's token
    page.locator("#tail-follow").click()
    page.locator("#tail-status.ok", has_text="Following").wait_for()
    produced = httpx.post(
        f"{server.url}/api/v1/topics/orders/messages",
        json={"records": [{"key": "k", "value": "seen-by-tail"}]},
        headers=basic("admin"),
        timeout=30,
    )
    assert produced.status_code == 201
    page.locator("#tail-table tbody tr", has_text="seen-by-tail").wait_for()

    page.goto(f"{server.url}/ui/topics/secret")  # no READ or DESCRIBE: the API's 403 is shown
    page.locator("#error-text").wait_for()
    assert "may not" in page.locator("#error-text").inner_text()

    page.locator("#auth-link").click()
    page.wait_for_url("**/ui/login")
    assert page.evaluate("sessionStorage.getItem('logtrove.token')") is None
    page.goto(f"{server.url}/ui/topics")
    page.wait_for_url("**/ui/login?next=%2Fui%2Ftopics")
