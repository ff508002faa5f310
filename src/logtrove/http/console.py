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
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})
