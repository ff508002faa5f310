"""The web console: static HTML, JavaScript and CSS under ``static/``, no build step.

Every view is a URL, so a search or a lag view can be shared by copying the address::

    /ui/search?topic=orders&by=key&key=user-1      (by = offset, time, range, id, key, header, content)
    /ui/topics/orders?bucket=hour&from=…&to=…     records over time, live tail, produce form,
                                                   partitions, sizes, retention, compaction
    /ui/lag?group=billing                          groups, lag per partition, tag-aware lag,
                                                   lag over time

All of them are the same page (``index.html``); its scripts (``console.js``, and
``charts.js`` drawing with the vendored uPlot) read the address and call the JSON API.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The console's pages load scripts, styles and data from this server only and inline
nothing (uPlot styles through the CSSOM, which CSP allows), so an injected ``<script>``
or a message value rendered by mistake as markup cannot run or call out; no framing."""

PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def install(app: FastAPI) -> None:
    """Add the console's routes and static files to ``app`` (outside the OpenAPI schema)."""
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="console-static")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/ui", include_in_schema=False)
    @app.get("/ui/", include_in_schema=False)
    @app.get("/ui/{view:path}", include_in_schema=False)
    def page(view: str = "") -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)
