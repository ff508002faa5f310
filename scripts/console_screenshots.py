"""Take the README's console screenshots (docs/img/) with headless Chromium.

Builds a demo data directory (a day of ``orders`` traffic with a quiet spell and a
burst), serves it on a free port and drives Debian's ``/usr/bin/chromium`` through
Playwright, as the console's browser tests do::

    PYTHONPATH=src python scripts/console_screenshots.py
"""

from __future__ import annotations

import json
import random
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from logtrove.http import start_in_thread
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

OUT = Path(__file__).resolve().parent.parent / "docs" / "img"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def demo_data(path: Path) -> None:
    """A day of orders: steady traffic, an outage at 09:00–10:30, a burst at 18:00."""
    rng = random.Random(5)
    with Storage.open(path) as storage:
        storage.create_topic("orders", 3, {"segment.bytes": str(1 << 20)})
        logs = [storage.log("orders", p) for p in range(3)]
        ts = T0
        n = 0
        while ts < T0 + 86_400_000:
            hour = (ts - T0) / 3_600_000
            if 9 <= hour < 10.5:
                ts += 60_000
                continue
            rate = 6 if 18 <= hour < 19 else 1.5
            records = []
            for _ in range(20):
                ts += int(rng.expovariate(rate) * 1000)
                n += 1
                value = json.dumps(
                    {"order": n, "user": f"user-{n % 40}", "status": rng.choice(["new", "paid"])}
                )
                records.append(NewRecord(value.encode(), f"user-{n % 40}".encode(), (("tag", b"TagA"),), ts))
            logs[n % 3].append(build_batch(records))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        demo_data(Path(tmp) / "data")
        storage = Storage.open(Path(tmp) / "data")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = start_in_thread(storage, f"127.0.0.1:{port}")
        try:
            shoot(server.url)
        finally:
            server.stop()
            storage.close()


def shoot(url: str) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--headless"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/ui/topics/orders")
        page.locator("#hist-status.ok").wait_for()
        page.screenshot(
            path=str(OUT / "console-topic-histogram.png"), clip={"x": 0, "y": 0, "width": 1280, "height": 560}
        )

        page.fill("#tail-form input[name=key]", "user-7")
        page.click("#tail-follow")
        page.locator("#tail-status.ok").wait_for()
        stop = threading.Event()

        def produce() -> None:
            i = 0
            while not stop.is_set() and i < 12:
                record = {"key": f"user-{7 if i % 2 else 8}", "value": {"order": 90000 + i, "status": "paid"}}
                httpx.post(f"{url}/api/v1/topics/orders/messages", json={"records": [record]}, timeout=5)
                i += 1
                time.sleep(0.15)

        producer = threading.Thread(target=produce)
        producer.start()
        producer.join()
        page.wait_for_function("document.querySelectorAll('#tail-table tbody tr').length >= 6")
        page.locator("#tail-form").scroll_into_view_if_needed()
        page.screenshot(path=str(OUT / "console-live-tail.png"))
        stop.set()

        page.goto(f"{url}/ui/search?topic=orders&by=range&from=2026-01-01T17:00:00Z&to=2026-01-01T20:00:00Z")
        page.locator("#search-hist-box:not([hidden])").wait_for()
        page.screenshot(path=str(OUT / "console-search-histogram.png"))
        browser.close()
    print(f"screenshots in {OUT}")


if __name__ == "__main__":
    main()
