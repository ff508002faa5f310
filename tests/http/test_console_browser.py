"""The web console in headless Chromium (Debian's ``/usr/bin/chromium`` driven by
Playwright): searches show the right rows, views are shareable URLs, the lag page works.

The browser fixtures and the screenshots' folder are in :mod:`tests.http.browser`.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.http.browser import ARTIFACTS, needs_chromium
from tests.http.support import GROUP, TAGGED_GROUP, Dataset, brute

from logtrove.http import HttpServer

pytest.importorskip("playwright.sync_api")
pytestmark = needs_chromium


def result_rows(page: Any) -> list[tuple[int, int]]:
    """(partition, offset) of each row of the results table."""
    cells = page.locator("#results tbody tr").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.partition), Number(r.dataset.offset)])"
    )
    return [(int(p), int(o)) for p, o in cells]


def test_console_loads_and_lists_topics(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/")
    page.wait_for_url("**/ui/")
    page.get_by_role("link", name="Topics").click()
    page.wait_for_url("**/ui/topics")
    page.locator("#topics-table tbody tr", has_text="orders").wait_for()
    assert page.locator("#topics-table tbody tr").count() >= 3
    assert "read-only" not in page.locator("#server").inner_text()
    assert page.locator("#auth-link").is_hidden(), "no HTTP auth: nothing to log in to"
    page.goto(f"{live.url}/ui/search")
    page.locator("#f-topic option", has_text="__consumer_offsets").wait_for(state="attached")
    assert not page.locator("#f-topic").input_value().startswith("__"), "an internal topic as the default"


def test_key_search_shows_every_record_of_the_key(page: Any, live: HttpServer, dataset: Dataset) -> None:
    page.goto(f"{live.url}/ui/search")
    page.select_option("#f-topic", "orders")
    page.select_option("#f-by", "key")
    page.fill("input[name=key]", "user-3")
    page.fill("input[name=limit]", "7")
    page.click("#f-run")
    page.wait_for_url("**/ui/search?topic=orders&by=key&limit=7&key=user-3")
    page.locator("#status.ok").wait_for()
    assert len(result_rows(page)) == 7
    for _ in range(20):  # "Load more" follows the cursor until the answer is complete
        if page.locator("#more").is_hidden():
            break
        before = len(result_rows(page))
        page.click("#more")
        page.wait_for_function(f"document.querySelectorAll('#results tbody tr').length > {before}")
        page.locator("#status.ok").wait_for()
    expected = brute(dataset, lambda r: r.key == b"user-3")
    assert sorted(result_rows(page)) == sorted(expected)
    assert page.locator("#cli-text").inner_text().startswith("logtrove query orders --key user-3 --limit 7")
    assert "range exhausted" in page.locator("#status").inner_text()


def test_content_search_streams_the_matching_rows(page: Any, live: HttpServer, dataset: Dataset) -> None:
    page.goto(f"{live.url}/ui/search")
    page.select_option("#f-topic", "orders")
    page.select_option("#f-by", "content")
    page.select_option("select[name=match]", "contains")
    page.fill("input[name=text]", "needle-4711")
    page.click("#f-run")
    page.wait_for_url("**/ui/search?*by=content*text=needle-4711*")
    page.locator("#status.ok").wait_for()
    expected = brute(dataset, lambda r: b"needle-4711" in (r.value or b""))
    assert sorted(result_rows(page)) == sorted(expected)
    assert all("needle-4711" in t for t in page.locator("#results td.value").all_inner_texts())
    assert "range exhausted" in page.locator("#status").inner_text()
    assert page.locator("#cli-text").inner_text().startswith("logtrove query orders --contains needle-4711")


def test_json_field_search_from_a_shared_url(page: Any, live: HttpServer, dataset: Dataset) -> None:
    page.goto(f"{live.url}/ui/search?topic=orders&by=content&match=json_field&text=order%3D1042")
    page.locator("#status.ok").wait_for()
    assert result_rows(page) == [(1, 42)]
    assert page.locator("select[name=match]").input_value() == "json_field"


def test_offset_search_with_neighbours_highlights_the_offset(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/ui/search")
    page.select_option("#f-topic", "orders")
    page.select_option("#f-by", "offset")
    page.fill("input[name=partition]", "1")
    page.fill("input[name=offset]", "10")
    page.check("input[name=neighbours]")
    page.click("#f-run")
    page.wait_for_url("**/ui/search?*neighbours=1*")
    page.locator("#status.ok").wait_for()
    assert result_rows(page) == [(1, o) for o in range(5, 16)]
    assert page.locator("#results tr.focus").get_attribute("data-offset") == "10"
    assert (
        page.locator("#cli-text")
        .inner_text()
        .startswith("logtrove query orders --partition 1 --offset 10 --data ")
    )


def test_message_detail_pretty_prints_json_and_links_neighbours(
    page: Any, live: HttpServer, dataset: Dataset
) -> None:
    page.goto(f"{live.url}/ui/search?topic=orders&by=offset&partition=0&offset=1&neighbours=1")
    page.locator("#results tbody tr[data-offset='3']").click()
    page.wait_for_url("**/ui/message?topic=orders&partition=0&offset=3")
    value = page.locator("#message-value").inner_text()
    assert value == '{\n  "order": 3,\n  "user": "user-3",\n  "status": "new"\n}'
    page.get_by_role("link", name="Show neighbours").click()
    page.wait_for_url("**/ui/search?topic=orders&by=offset&partition=0&offset=3&neighbours=1")
    page.locator("#status.ok").wait_for()
    assert result_rows(page) == [(0, o) for o in range(9)]


def test_shared_url_and_back_button_restore_the_view(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/ui/topics/orders")
    page.locator("#partitions-table tbody tr").nth(2).wait_for()
    assert page.locator("#topic-title").inner_text() == "orders"
    page.goto(f"{live.url}/ui/lag?group={GROUP}")
    page.locator("#group-detail:not([hidden])").wait_for()
    page.go_back()
    page.wait_for_url("**/ui/topics/orders")
    page.locator("#partitions-table tbody tr").nth(2).wait_for()


def test_topic_page_says_how_far_each_partition_is_indexed(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/ui/topics/orders")
    rows = page.locator("#partitions-table tbody tr")
    rows.nth(2).wait_for()
    header = page.locator("#partitions-table thead th").all_inner_texts()
    column = header.index("indexed below")
    cells = [rows.nth(i).inner_text().split("\t")[column] for i in range(rows.count())]
    assert cells == ["–"] * 3  # no indexer has run over the test data: a dash, not a wrong 0


def test_lag_page_shows_lag_per_partition_and_never_committed(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/ui/lag")
    page.get_by_role("link", name=GROUP).click()
    page.wait_for_url(f"**/ui/lag?group={GROUP}")
    rows = page.locator("#group-partitions tbody tr")
    rows.nth(2).wait_for()
    texts = [rows.nth(i).inner_text().split("\t") for i in range(rows.count())]
    assert [t[:5] for t in texts] == [
        ["orders", "0", "300", "250", "50"],
        ["orders", "1", "300", "300", "0"],
        ["orders", "2", "300", "never committed", "–"],
    ]
    group_row = page.locator("#groups-table tbody tr", has_text=GROUP)
    assert group_row.locator("td").nth(3).inner_text() == "50"


def test_lag_page_sets_a_tag_subscription_and_shows_tag_lag(
    page: Any, live: HttpServer, dataset: Dataset
) -> None:
    page.goto(f"{live.url}/ui/lag?group={TAGGED_GROUP}")
    form = page.locator("#subscribe-form")
    form.wait_for()
    form.locator("input[name=topic]").fill("orders")
    form.locator("input[name=tags]").fill("TagA")
    form.get_by_role("button", name="Set tag subscription").click()
    page.locator("#subscribe-status.ok").wait_for()
    row = page.locator("#group-topics tbody tr[data-topic=orders]")
    expected = sum(1 for r in dataset.orders[0][100:] if dict(r.headers)["tag"] == b"TagA")
    cells = row.locator("td").all_inner_texts()
    assert cells[1:4] == ["TagA", "200", str(expected)]
    assert page.locator("#group-partitions tbody tr").first.locator("td").nth(5).inner_text() == str(expected)
    page.screenshot(path=str(ARTIFACTS / "lag_page_with_tag_subscription.png"), full_page=True)
    row.get_by_role("button", name="Remove tags").click()
    page.wait_for_function(
        "document.querySelector('#group-topics tbody tr[data-topic=orders] td:nth-child(2)').textContent === '–'"
    )


def test_errors_are_shown_not_swallowed(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/ui/search?topic=orders&by=offset&partition=0&offset=999999&neighbours=1")
    page.locator("#status.error").wait_for()
    assert "past the end" in page.locator("#status").inner_text()
