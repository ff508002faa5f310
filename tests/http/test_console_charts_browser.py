"""The console's charts, live tail and produce form in headless Chromium (the fixtures
and conventions of :mod:`tests.http.browser`): numbers are read from the DOM and checked
against brute force."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.http.browser import ARTIFACTS, needs_chromium
from tests.http.support import Timeline

from logtrove.http import HttpServer

pytest.importorskip("playwright.sync_api")
pytestmark = needs_chromium


def histogram_rows(page: Any) -> list[tuple[int, int, int]]:
    """(start, end, records) of each bucket, from the data attributes of the chart's table."""
    rows = page.locator("#histogram-table tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.start, r.dataset.end, r.dataset.records].map(Number))"
    )
    return [(int(a), int(b), int(n)) for a, b, n in rows]


def test_topic_histogram_bars_equal_brute_force_counts(
    page: Any, live: HttpServer, timeline: Timeline
) -> None:
    page.goto(f"{live.url}/ui/topics/{timeline.topic}?bucket=minute")
    page.locator("#hist-status.ok").wait_for()
    rows = histogram_rows(page)
    edges = [a for a, _, _ in rows] + [rows[-1][1]]
    assert [n for _, _, n in rows] == timeline.brute_counts(edges)
    assert sum(n for _, _, n in rows) == sum(len(s) for s in timeline.timestamps.values())
    drawn = page.locator("#histogram").evaluate("box => Array.from(box.chart.data[1])")
    assert drawn == [n for _, _, n in rows]  # the bars are the table's numbers
    page.screenshot(path=str(ARTIFACTS / "topic_histogram.png"), full_page=True)


def test_a_click_on_a_bar_opens_the_search_for_its_range(
    page: Any, live: HttpServer, timeline: Timeline
) -> None:
    page.goto(f"{live.url}/ui/topics/{timeline.topic}?bucket=hour")
    page.locator("#hist-status.ok").wait_for()
    rows = histogram_rows(page)
    target = max(range(len(rows)), key=lambda i: rows[i][2])  # the tallest bar
    start, end, records = rows[target]
    x, y = page.locator("#histogram").evaluate(
        """(box, i) => {
            const u = box.chart, r = u.over.getBoundingClientRect();
            const mid = box.bucketStarts[i] + Number(box.dataset.bucketMs) / 2;
            return [r.left + u.valToPos(mid, "x"), r.top + u.over.clientHeight - 3];
        }""",
        target,
    )
    page.mouse.click(x, y)
    page.wait_for_url(f"**/ui/search?topic={timeline.topic}&by=range&from={start}&to={end}*")
    page.locator("#status.ok").wait_for()
    if records <= 50:
        assert page.locator("#results tbody tr").count() == records
    else:
        assert page.locator("#results tbody tr").count() == 50
        assert not page.locator("#more").is_hidden()


def test_dragging_across_bars_zooms_in(page: Any, live: HttpServer, timeline: Timeline) -> None:
    page.goto(f"{live.url}/ui/topics/{timeline.topic}")
    page.locator("#hist-status.ok").wait_for()
    box = page.locator("#histogram .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 50)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 50, steps=5)
    page.mouse.up()
    page.wait_for_url("**/ui/topics/clicks?*from=*")
    page.locator("#hist-whole:not([hidden])").wait_for()
    page.locator("#hist-status.ok").wait_for()
    rows = histogram_rows(page)
    edges = [a for a, _, _ in rows] + [rows[-1][1]]
    assert [n for _, _, n in rows] == timeline.brute_counts(edges)


def tail_rows(page: Any) -> list[tuple[int, int, str]]:
    cells = page.locator("#tail-table tbody tr").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.partition), Number(r.dataset.offset), r.cells[4].textContent])"
    )
    return [(int(p), int(o), str(v)) for p, o, v in cells]


def rest_produce(url: str, topic: str, records: list[dict[str, object]]) -> None:
    httpx.post(
        f"{url}/api/v1/topics/{topic}/messages", json={"records": records}, timeout=10
    ).raise_for_status()


def test_live_tail_shows_new_filtered_records_pauses_and_keeps_a_capped_list(
    page: Any, live: HttpServer
) -> None:
    topic = "tailed"
    httpx.post(f"{live.url}/api/v1/topics", json={"name": topic, "partitions": 2}, timeout=10)
    rest_produce(live.url, topic, [{"key": "k1", "value": "before the page", "partition": 0}])
    page.goto(f"{live.url}/ui/topics/{topic}")
    page.fill("#tail-form input[name=key]", "k1")
    page.fill("#tail-form input[name=keep]", "3")
    page.click("#tail-follow")
    page.locator("#tail-status.ok", has_text="Following").wait_for()
    assert page.locator("#tail-follow").is_disabled(), "Follow while following"
    rest_produce(
        live.url,
        topic,
        [
            {"key": "k2", "value": "other key", "partition": 0},
            {"key": "k1", "value": "one", "partition": 0},
            {"key": "k1", "value": "two", "partition": 1},
        ],
    )
    page.wait_for_function("document.querySelectorAll('#tail-table tbody tr').length === 2")
    assert sorted(tail_rows(page)) == [(0, 2, "one"), (1, 0, "two")]

    page.click("#tail-pause")
    page.locator("#tail-follow", has_text="Resume").wait_for()
    assert page.locator("#tail-follow").is_enabled()
    rest_produce(
        live.url, topic, [{"key": "k1", "value": f"while paused {i}", "partition": 0} for i in range(3)]
    )
    page.wait_for_timeout(600)  # several poll intervals: a paused page takes nothing
    assert len(tail_rows(page)) == 2
    page.click("#tail-follow")  # resumes from the last event: the paused records arrive
    page.locator("#tail-status.ok", has_text="2 older dropped").wait_for()
    rows = tail_rows(page)
    assert [v for _, _, v in rows] == ["while paused 2", "while paused 1", "while paused 0"]
    assert "5 shown" in page.locator("#tail-status").inner_text()
    page.screenshot(path=str(ARTIFACTS / "live_tail.png"), full_page=False)


def test_produce_form_writes_a_record_that_search_finds(page: Any, live: HttpServer) -> None:
    topic = "console-produced"  # its own topic: the session's dataset keeps its counts
    httpx.post(f"{live.url}/api/v1/topics", json={"name": topic, "partitions": 3}, timeout=10)
    rest_produce(live.url, topic, [{"key": f"user-{i}", "value": f"v{i}"} for i in range(20)])
    page.goto(f"{live.url}/ui/topics/{topic}")
    form = page.locator("#produce-form")
    form.wait_for()
    form.locator("input[name=key]").fill("form-user")
    form.locator("textarea[name=headers]").fill("trace=tr-form\nsource=console")
    form.locator("textarea[name=value]").fill('{"order": 99999, "status": "paid"}')
    page.click("#produce-send")
    page.locator("#produce-status.ok").wait_for()
    partition = page.locator("#produce-status").get_attribute("data-partition")
    offset = page.locator("#produce-status").get_attribute("data-offset")
    page.goto(f"{live.url}/ui/search?topic={topic}&by=key&key=form-user")
    page.locator("#status.ok").wait_for()
    rows = page.locator("#results tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.partition, r.dataset.offset])"
    )
    assert rows == [[partition, offset]]
    page.locator("#results tbody tr").first.click()
    page.wait_for_url("**/ui/message?**")
    assert '"order": 99999' in page.locator("#message-value").inner_text()
    assert "tr-form" in page.locator("#message-detail").inner_text()


def test_range_search_histogram_counts_the_whole_range_and_narrows_on_click(
    page: Any, live: HttpServer, timeline: Timeline
) -> None:
    start = timeline.timestamps[0][30]
    end = start + 40 * 60_000
    page.goto(f"{live.url}/ui/search?topic={timeline.topic}&by=range&from={start}&to={end}&limit=20")
    page.locator("#status.ok").wait_for()
    page.locator("#search-hist-box:not([hidden])").wait_for()
    rows = page.locator("#search-histogram-table tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.start, r.dataset.end, r.dataset.records].map(Number))"
    )
    edges = [int(a) for a, _, _ in rows] + [int(rows[-1][1])]
    assert [int(n) for _, _, n in rows] == timeline.brute_counts(edges)
    total = sum(1 for stamps in timeline.timestamps.values() for ts in stamps if start <= ts < end)
    assert int(page.locator("#search-histogram").get_attribute("data-records")) == total
    assert f"{total:,} records in this range" in page.locator("#search-hist-note").inner_text()
    x, y = page.locator("#search-histogram").evaluate(
        """box => {
            const u = box.chart, r = u.over.getBoundingClientRect();
            return [r.left + u.valToPos(box.bucketStarts[1] + 1000, "x"), r.top + u.over.clientHeight - 3];
        }"""
    )
    page.mouse.click(x, y)
    page.wait_for_url(f"**/ui/search?*from={int(rows[1][0])}*to={int(rows[1][1])}*")
    page.locator("#status.ok").wait_for()
    assert page.locator("#results tbody tr").count() == min(int(rows[1][2]), 20)


def test_key_search_histogram_bins_the_results_shown(page: Any, live: HttpServer) -> None:
    page.goto(f"{live.url}/ui/search?topic=orders&by=key&key=user-3&limit=40")
    page.locator("#status.ok").wait_for()
    page.locator("#search-hist-box:not([hidden])").wait_for()
    counts = page.locator("#search-histogram-table tbody tr").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.records))"
    )
    stamps = page.locator("#results tbody tr").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.timestamp))"
    )
    assert sum(counts) == len(stamps) == 40
