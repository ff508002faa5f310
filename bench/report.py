"""Turn ``bench/results/*.json`` into BENCHMARKS.md: one section per benchmark, tables
of its figures, the machine (with a short disk measurement) and PNG plots.

The renderer is generic: a dict of numbers becomes a two-column table, a list of dicts a
table with one column per key, and a dict of dicts one row per entry; a list of numbers
(the runs behind a median) becomes a min–max column. A benchmark may add
``"plots": [{"title", "ylabel", "bars": {label: value}}]`` to its results for a bar chart.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import RESULTS, machine

ROOT = Path(__file__).resolve().parent.parent
ORDER = [
    "storage",
    "broker",
    "broker-rdkafka",
    "broker-security",
    "query",
    "indexer",
    "compaction",
    "offset_map",
    "lag",
    "spark",
    "spark_writer",
    "partitions",
    "validation",
    "recompress",
]
TITLES = {
    "storage": "Storage: append, read, lookups, recovery",
    "broker": "Broker: logtrove vs tansu (same run, same clients)",
    "broker-rdkafka": "Broker: produce with librdkafka's C client (rdkafka_performance), logtrove vs tansu",
    "broker-security": "Broker: SASL_SSL next to PLAINTEXT (one broker, same run)",
    "query": "Query: indexes vs consume-and-filter",
    "indexer": "Indexer: keeping up with sustained produce",
    "compaction": "Compaction",
    "offset_map": "Compaction at scale: the Spark-built offset map",
    "lag": "Lag: tag-aware from .tagidx vs scanning the log",
    "validation": "Produce validation: its share of an append",
    "recompress": "compression.type: recompressing on append, off the event loop",
    "partitions": "Partitions: opening thousands (checkpoints read once, lazy segment files)",
    "spark": "Spark: data source vs Parquet",
    "spark_writer": "Spark: the writer, before / after (alternating, same run)",
}


def disk_write_mb_s() -> float | None:
    """A short dd with fdatasync (256 MiB) in the repository's file system."""
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        target = Path(tmp) / "dd.bin"
        try:
            out = subprocess.run(
                ["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=256", "conv=fdatasync"],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stderr
        except (OSError, subprocess.SubprocessError):
            return None
    for part in out.replace(",", " ").split("copied")[-1:]:
        words = part.split()
        for i, word in enumerate(words):
            if word in ("MB/s", "GB/s") and i > 0:
                value = float(words[i - 1])
                return value * (1000 if word == "GB/s" else 1)
    return None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, dict | list):
        return json.dumps(value)[:80]
    return str(value)


def _table(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(row.get(c, "")) for c in columns) + " |" for row in rows]
    return lines


def _is_runs(value: Any) -> bool:
    """A list of repeated measurements (numbers), shown as its min–max range."""
    return (
        isinstance(value, list)
        and len(value) > 1
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )


def _cells(entry: dict[str, Any]) -> dict[str, Any]:
    """The table cells of one dict: its scalars, and ``key min–max`` for runs."""
    out: dict[str, Any] = {}
    for k, v in entry.items():
        if _is_runs(v):
            out[f"{k} min–max"] = f"{_fmt(min(v))} – {_fmt(max(v))}"
        elif not isinstance(v, dict | list):
            out[k] = v
    return out


def render(name: str, value: Any) -> list[str]:
    """Markdown for one results entry."""
    if isinstance(value, str) and value.lstrip().startswith("|"):
        return [value.strip(), ""]  # a table the benchmark rendered itself
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [f"**{name}**", "", *_table(value), ""]
    if isinstance(value, dict):
        scalars = _cells(value)
        nested = {k: v for k, v in value.items() if isinstance(v, dict | list) and not _is_runs(v)}
        out = []
        if nested and all(isinstance(v, dict) for v in nested.values()) and not scalars:
            rows = [{"": k, **_cells(v)} for k, v in nested.items()]
            flat_nested = {
                f"{k}.{kk}": vv for k, v in nested.items() for kk, vv in v.items() if isinstance(vv, dict)
            }
            out += [f"**{name}**", "", *_table(rows), ""]
            for k, v in flat_nested.items():
                out += render(f"{name}.{k}", v)
            return out
        if scalars:
            out += [f"**{name}**", "", *_table([scalars]), ""]
        for k, v in nested.items():
            out += render(f"{name}.{k}", v)
        return out
    return [f"**{name}**: {_fmt(value)}", ""]


def plot(name: str, spec: dict[str, Any], out_dir: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    bars = spec["bars"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.barh(list(bars), list(bars.values()), color="#4C72B0")
    ax.set_xlabel(spec.get("ylabel", ""))
    ax.set_title(spec["title"])
    for i, v in enumerate(bars.values()):
        ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
    fig.tight_layout()
    path = out_dir / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def kept_summary(target: Path) -> list[str]:
    """The hand-written ``## Summary`` at the top of an existing report (headline figures,
    peers, ratios, dates), kept when the tables below are generated again."""
    if not target.exists():
        return []
    text = target.read_text()
    start, end = text.find("## Summary"), text.find("\nGenerated ")
    return [*text[start:end].rstrip("\n").split("\n"), ""] if 0 <= start < end else []


def write_report(*, quick: bool) -> Path:
    suffix = "-quick" if quick else ""
    found = {
        p.stem.removesuffix(suffix): p
        for p in RESULTS.glob(f"*{suffix}.json")
        if quick or not p.stem.endswith("-quick")
    }
    names = [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)
    info = machine()
    disk = disk_write_mb_s()
    target = ROOT / "BENCHMARKS.md" if not quick else RESULTS / "BENCHMARKS-quick.md"
    lines = [
        "# Benchmarks" + (" (quick sizes)" if quick else ""),
        "",
        *kept_summary(target),
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `make bench{'-quick' if quick else ''}`"
        " (`bench/run_all.py`). Raw figures: `bench/results/*.json`.",
        "",
        f"Machine: {info['cores']} cores, {info['memory_gib']} GiB memory, Python {info['python']}, "
        f"disk sequential write with fdatasync ≈ {disk:.0f} MB/s (dd, 256 MiB)"
        if disk
        else "disk: not measured",
        "",
    ]
    plots_dir = RESULTS
    for name in names:
        data = json.loads(found[name].read_text())
        lines += [f"## {TITLES.get(name, name)}", "", f"Run {data.get('date', '?')}.", ""]
        results = data.get("results", {})
        for i, spec in enumerate(results.pop("plots", []) if isinstance(results, dict) else []):
            png = plot(f"{name}{suffix}-{i}", spec, plots_dir)
            if png:
                lines += [f"![{spec['title']}](bench/results/{png})", ""]
        for key, value in results.items() if isinstance(results, dict) else [("results", results)]:
            lines += render(key, value)
    target.write_text("\n".join(lines) + "\n")
    return target


if __name__ == "__main__":
    print(write_report(quick=os.environ.get("BENCH_QUICK", "") not in ("", "0")))
