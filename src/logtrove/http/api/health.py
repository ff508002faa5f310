"""Health and Prometheus metrics.

``/metrics`` is the Prometheus text format (version 0.0.4), written by hand: one
``# HELP`` / ``# TYPE`` pair per family, label values escaped as the format requires.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse

from logtrove import __version__
from logtrove.http.context import HttpContext, get_context
from logtrove.http.groups import GroupsSource
from logtrove.http.models import Health
from logtrove.storage import recorded_index_offsets
from logtrove.storage.follow import RETRYING, RUNNING, STOPPED, read_follow_status

router = APIRouter(tags=["health"])
INDEX_OFFSET_DOC = (
    "Offset below which every record is in index blocks (index-offset-checkpoint, rewritten "
    "about once a second by the indexer)."
)
INDEX_LAG_DOC = (
    "Records not in index blocks yet; queries scan them. A partial block waits up to "
    "--indexer-flush-s, so a few seconds of produce is normal; steady growth means the "
    "indexer is falling behind."
)
MIRROR_LAG_DOC = "Records the mirror is behind its source's high watermark (as it last reported)."
MIRROR_LAG_SECONDS_DOC = (
    "Seconds since the mirror last reached its source's high watermark (0 while it keeps up)."
)
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/api/v1/health", summary="Liveness and what this server offers")
def health(request: Request, ctx: Annotated[HttpContext, Depends(get_context)]) -> Health:
    storage = ctx.fresh_storage()
    return Health(
        status="ok",
        version=__version__,
        data_dir=str(storage.path),
        read_only=not ctx.allow_writes,
        topics=len(storage.topics()),
        uptime_ms=max(ctx.clock.now_ms() - ctx.started_ms, 0),
        features=dict(request.app.state.features),
    )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Families:
    """Collects samples grouped by metric family, in first-seen order."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, kind: str, doc: str, value: float, **labels: object) -> None:
        family = self._families.setdefault(name, (kind, doc, []))
        text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
        family[2].append(f"{name}{{{text}}} {value}" if text else f"{name} {value}")

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, doc, samples) in self._families.items():
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(lines) + "\n"


def _storage_metrics(out: _Families, ctx: HttpContext) -> None:
    storage = ctx.fresh_storage()
    out.add("logtrove_topics", "gauge", "Topics in the data directory.", len(storage.topics()))
    indexed = recorded_index_offsets(storage.path)
    for log in storage.logs():
        labels = {"topic": log.tp.topic, "partition": log.tp.partition}
        segments = log.segments
        for name, doc, value in (
            ("logtrove_log_start_offset", "First visible offset.", log.log_start_offset),
            ("logtrove_log_end_offset", "Next offset to be written.", log.log_end_offset),
            ("logtrove_log_size_bytes", "Bytes of log segments.", sum(s.size for s in segments)),
            ("logtrove_log_segments", "Segments in the partition.", len(segments)),
            ("logtrove_log_recovery_point", "Offset below which the log is fsynced.", log.recovery_point),
        ):
            out.add(name, "gauge", doc, value, **labels)
        out.add(
            "logtrove_log_flushes_total", "counter", "Flushes that fsynced the log.", log.flushes, **labels
        )
        offset = indexed.get((log.tp.topic, log.tp.partition))
        if offset is None:
            continue  # no indexer has recorded this partition: no number beats a wrong one
        out.add("logtrove_index_offset", "gauge", INDEX_OFFSET_DOC, offset, **labels)
        lag = max(0, log.log_end_offset - offset)
        out.add("logtrove_index_lag_records", "gauge", INDEX_LAG_DOC, lag, **labels)


def _mirror_metrics(out: _Families, ctx: HttpContext) -> None:
    """The lag of a mirror (``logtrove mirror`` / ``serve --follow``) on this data
    directory, from the status file it rewrites about once a second."""
    status = read_follow_status(ctx.fresh_storage().path)
    if status is None:
        return
    out.add(
        "logtrove_mirror_status_age_seconds",
        "gauge",
        "Seconds since the mirror last wrote its status (about 1 s while it runs; growing: it stopped).",
        max(0, ctx.clock.now_ms() - status.updated_ms) / 1000,
        source=status.source,
    )
    reason = status.problem.reason if status.problem is not None else ""
    for state in (RUNNING, RETRYING, STOPPED):
        out.add(
            "logtrove_mirror_state",
            "gauge",
            "1 for the mirror's state (running, retrying: the source unreachable, stopped: see "
            "reason and mirror-status.json for what to do), 0 for the others.",
            int(status.state == state),
            source=status.source,
            state=state,
            reason=reason if status.state == state else "",
        )
    for row in status.partitions:
        labels = {"topic": row.topic, "partition": row.partition, "source": status.source}
        out.add("logtrove_mirror_lag_records", "gauge", MIRROR_LAG_DOC, row.lag_records, **labels)
        out.add("logtrove_mirror_lag_seconds", "gauge", MIRROR_LAG_SECONDS_DOC, row.lag_ms / 1000, **labels)
        out.add(
            "logtrove_mirror_partition_stopped",
            "gauge",
            "1 when the mirror no longer copies the partition (reason: diverged, invalid_batch, "
            "storage_error; topics describe says what to do).",
            int(row.failed is not None),
            reason=row.failed.reason if row.failed is not None else "",
            **labels,
        )
        out.add(
            "logtrove_mirror_source_log_end_offset",
            "gauge",
            "The source's high watermark as the mirror last saw it.",
            row.source_end,
            **labels,
        )


def _lag_metrics(out: _Families, groups: GroupsSource) -> None:
    for group_lag in groups.lags():
        for row in group_lag.partitions():
            if row.committed_offset is None or row.lag is None:
                continue  # never committed: no number is better than a wrong 0
            labels = {"group": row.group, "topic": row.topic, "partition": row.partition}
            out.add(
                "logtrove_group_committed_offset",
                "gauge",
                "Committed offset.",
                row.committed_offset,
                **labels,
            )
            out.add("logtrove_group_lag", "gauge", "Messages not yet consumed.", row.lag, **labels)
            out.add(
                "logtrove_group_time_lag_seconds",
                "gauge",
                "Age of the first unconsumed record (0 when caught up).",
                (row.time_lag_ms or 0) / 1000,
                **labels,
            )
            if row.tag_lag is not None:
                out.add(
                    "logtrove_group_tag_lag",
                    "gauge",
                    "Unconsumed records matching the group's tag subscription.",
                    row.tag_lag,
                    tags=row.tags or "",
                    **labels,
                )


def _request_metrics(out: _Families, ctx: HttpContext) -> None:
    for (method, route, status), count in sorted(ctx.requests.snapshot().items()):
        out.add(
            "logtrove_http_requests_total",
            "counter",
            "HTTP requests served.",
            count,
            method=method,
            route=route,
            status=status,
        )


@router.get(
    "/metrics",
    summary="Metrics in Prometheus text format",
    response_class=PlainTextResponse,
    responses={200: {"content": {PROMETHEUS_TEXT: {}}, "description": "Prometheus text format 0.0.4"}},
)
def metrics(request: Request, ctx: Annotated[HttpContext, Depends(get_context)]) -> PlainTextResponse:
    out = _Families()
    _storage_metrics(out, ctx)
    _lag_metrics(out, request.app.state.groups)
    _mirror_metrics(out, ctx)
    _request_metrics(out, ctx)
    out.add(
        "logtrove_uptime_seconds",
        "gauge",
        "Seconds since the API started.",
        (ctx.clock.now_ms() - ctx.started_ms) / 1000,
    )
    return PlainTextResponse(out.render(), media_type=PROMETHEUS_TEXT)
