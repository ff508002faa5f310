"""The console's charts, live tail and produce form in headless Chromium (the fixtures
and conventions of ``test_console_browser``): numbers are read from the DOM and checked
against brute force."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.http import test_console_browser as base
from tests.http.support import Timeline

from logtrove.http import HttpServer

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    not Path(base.CHROMIUM).exists(), reason="needs Debian's chromium (scripts/install-system-deps.sh)"
)
ARTIFACTS = base.ARTIFACTS
browser_context = base.browser_context  # the same headless Chromium fixtures
page = base.page


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
