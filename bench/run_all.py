"""Run every benchmark in bench/ and write the report.

``make bench`` runs each ``bench/*_bench.py`` at full size, then writes ``BENCHMARKS.md``
(tables per area, the machine, PNG plots under ``bench/results/``). ``make bench-quick``
(``BENCH_QUICK=1``) runs the same scripts on small sizes in a few minutes and writes
``bench/results/BENCHMARKS-quick.md``; CI runs it so the benchmark code never rots.

Each script starts and stops what it needs and bounds its own runtime; this runner also
stops any that exceeds its time limit. Exit code 1 if any script failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from _common import QUICK, RESULTS
from report import write_report

HERE = Path(__file__).resolve().parent
LIMIT_S = 15 * 60 if QUICK else 90 * 60


def main() -> int:
    only = set(sys.argv[1:])
    scripts = sorted(p for p in HERE.glob("*_bench.py") if not only or p.stem.removesuffix("_bench") in only)
    RESULTS.mkdir(parents=True, exist_ok=True)
    failed = []
    for script in scripts:
        name = script.stem.removesuffix("_bench")
        log = RESULTS / f"{name}{'-quick' if QUICK else ''}.log"
        print(f"== {name} ({'quick' if QUICK else 'full'}) → {log.relative_to(HERE.parent)}", flush=True)
        started = time.monotonic()
        with log.open("w") as out:
            try:
                proc = subprocess.run(
                    [sys.executable, str(script)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=LIMIT_S,
                    env=os.environ.copy(),
                    check=False,
                )
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = -1
                out.write(f"\nstopped after {LIMIT_S} s\n")
        took = time.monotonic() - started
        status = "ok" if code == 0 else f"FAILED ({code})"
        print(f"   {status} in {took:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
            print(log.read_text()[-3000:], flush=True)
    report = write_report(quick=QUICK)
    print(f"report: {report}")
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
