"""Shared helpers for the benchmarks: sizes, timing, percentiles, saving results."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


def pick(full: int, quick: int) -> int:
    """A size for this run: ``quick`` under BENCH_QUICK=1."""
    return quick if QUICK else full


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary_us(samples_s: list[float]) -> dict[str, float]:
    """p50 / p99 / mean of latencies given in seconds, in microseconds."""
    us = [s * 1e6 for s in samples_s]
    return {
        "p50_us": round(percentile(us, 50), 1),
        "p99_us": round(percentile(us, 99), 1),
        "mean_us": round(statistics.fmean(us), 1),
        "n": len(us),
    }


def machine() -> dict[str, Any]:
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def save(name: str, results: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>.json`` with the machine and date, and print it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": QUICK,
        "machine": machine(),
        "results": results,
    }
    path = RESULTS / f"{name}{'-quick' if QUICK else ''}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(json.dumps(payload, indent=2))
    print(f"saved {path}")
    return path
