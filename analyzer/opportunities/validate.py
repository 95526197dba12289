"""Predicted vs measured: each recorded eager trace against its fused counterparts.

A fused run is predicted by the plan its tools can take (Plan.predicted_busy_us(takers)): the runner's variant name
says which tools ran (kernels/models/variants.py). Measured = the fused run's Summary gpu_busy_us per step (median
over steady steps), the same figure the baseline's prediction starts from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from analyzer.opportunities import takers as tk
from analyzer.opportunities.cli import load_plan
from analyzer.pipeline import load_summary

# runner variant -> the tools it applies. The layer and model variants other than eager run the sdpa model
# ('sdpa/compile: no mask tensor, is_causal' in their manifests), so their compiled variants take SDPA too.
VARIANT_TAKERS = {
    "compile": {tk.COMPILE},
    "compile-max-autotune": {tk.COMPILE, tk.AUTOTUNE},
    "liger": {tk.LIGER},
    "fuselens": set(tk.FUSELENS),
    "fuselens-gating": {tk.FL_GATING},
    "sdpa": {tk.SDPA},
    "compile-fuselens": {tk.COMPILE, tk.FL_DUAL},
}
SDPA_MODELS = ("layer", "model", "llama", "gemma")  # workloads whose non-eager variants run SDPA attention
TOLERANCE_PCT = 15.0


@dataclass
class Pair:
    case: str
    variant: str
    takers: list[str]
    base_us: float
    predicted_us: float
    measured_us: float

    @property
    def error_pct(self) -> float:
        return (self.predicted_us - self.measured_us) / self.measured_us * 100.0

    @property
    def ok(self) -> bool:
        return abs(self.error_pct) <= TOLERANCE_PCT


def variant_takers(variant: str, workload: str) -> set[str] | None:
    """The tools a runner variant applies (None: not a fused variant, e.g. 'eager')."""
    base = variant.removesuffix("-train")
    t = VARIANT_TAKERS.get(base)
    if t is None:
        return None
    t = set(t)
    if base != "sdpa" and any(w in workload for w in SDPA_MODELS) and base.startswith("compile"):
        t.add(tk.SDPA)
    return t


def pairs(root: str | Path, cases: list[str] | None = None) -> list[Pair]:
    """Every eager trace under root/<case>/ with a fused variant beside it."""
    out = []
    for case_dir in sorted(Path(root).iterdir()):
        if not case_dir.is_dir() or (cases and case_dir.name not in cases):
            continue
        man = case_dir / "manifest.json"
        doc = json.loads(man.read_text()) if man.is_file() else {}
        workload = str(doc.get("workload") or case_dir.name)
        eager = case_dir / "eager.json.gz"
        if not eager.is_file():
            continue
        plan = load_plan(str(eager))
        for f in sorted(case_dir.glob("*.json.gz")):
            variant = f.name.removesuffix(".json.gz")
            who = variant_takers(variant, workload)
            if who is None:
                continue
            measured = float(load_summary(str(f)).per_step["gpu_busy_us"])
            out.append(
                Pair(case_dir.name, variant, sorted(who), plan.gpu_busy_us, plan.predicted_busy_us(who), measured)
            )
    return out
