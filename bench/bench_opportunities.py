"""Predicted vs measured busy time per step for every eager / fused pair under sample_traces/ (or the folders given).

    python bench/bench_opportunities.py [ROOT] [--cases a,b]

For each case folder holding eager.json.gz and fused variants: the eager trace's plan predicts each variant from the
opportunities its tools can take (analyzer.opportunities.validate); measured is the variant's own median busy time
per step. Results and the reason behind each error: docs/OPPORTUNITIES.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyzer.opportunities.validate import TOLERANCE_PCT, pairs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default="sample_traces")
    ap.add_argument("--cases", help="comma-separated case folders (default: all)")
    a = ap.parse_args()
    cases = [c.strip() for c in a.cases.split(",")] if a.cases else None
    rows = pairs(a.root, cases)
    print(
        f"| case | fused run | plan taken by | eager µs | predicted µs | measured µs | error | within ±{TOLERANCE_PCT:g}% |"
    )
    print("|---|---|---|---:|---:|---:|---:|---|")
    for p in rows:
        print(
            f"| {p.case} | {p.variant} | {', '.join(p.takers)} | {p.base_us:,.1f} | {p.predicted_us:,.1f} | "
            f"{p.measured_us:,.1f} | {p.error_pct:+.1f}% | {'yes' if p.ok else 'NO'} |"
        )
    bad = [p for p in rows if not p.ok]
    print(f"\n{len(rows)} pairs, {len(rows) - len(bad)} within ±{TOLERANCE_PCT:g}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
