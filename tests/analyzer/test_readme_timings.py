"""The README's "three measurements of time" paragraph states the bundled recordings' figures as the dashboard
shows them: the manifest's CUDA-event medians and the traces' GPU time per step (the README and the app agree)."""

from __future__ import annotations

import json
import re

import pytest

from analyzer import load_trace, summarize
from tests.conftest import ROOT, SAMPLE_TRACES

HF = SAMPLE_TRACES / "hf_geglu_bf16"
NAMES = {"eager": "eager", "compile": "compile", "Liger": "liger", "FuseLens": "fuselens"}
pytestmark = pytest.mark.needs_data(HF / "manifest.json")


def _figures(text: str, after: str) -> dict[str, float]:
    part = text.split(after, 1)[1]
    part = part[: part.index("µs)")]
    return {NAMES[n]: float(v) for n, v in re.findall(r"(eager|compile|Liger|FuseLens) (\d+\.\d)", part)}


def test_readme_timings_are_the_bundled_files():
    readme = " ".join((ROOT / "README.md").read_text().split())
    para = readme[readme.index("Three measurements of time") :]
    cuda = _figures(para, "*CUDA-event µs*")
    gpu = _figures(para, "*GPU µs/step*")
    assert set(cuda) == set(gpu) == set(NAMES.values())
    manifest = json.loads((HF / "manifest.json").read_text())
    medians = {v["name"]: v.get("median_us") for v in manifest["variants"]}
    for name in NAMES.values():
        assert cuda[name] == round(medians[name], 1), (name, cuda[name], medians[name])
        per_step = summarize(load_trace(HF / f"{name}.json.gz")).per_step["gpu_time_us"]
        assert gpu[name] == round(per_step, 1), (name, gpu[name], per_step)


def test_readme_ncu_paragraph_is_the_bundled_measurements(capsys):
    """The README's Nsight Compute figures are what `diff --json` (and the Compare page) read from the bundled
    <variant>.ncu.json files: DRAM bytes per forward in sequence, and the compile fusion's measured saving."""
    from analyzer.cli import main
    from analyzer.fmt import fmt_bytes

    readme = " ".join((ROOT / "README.md").read_text().split())
    para = readme[readme.index("Nsight Compute on the HF forward") :]
    para = para[: para.index("Timings:")]
    assert main(["diff", *(str(HF / f"{v}.json.gz") for v in ("eager", "compile", "fuselens")), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    runs = {r["label"]: r["measured_warm_dram_bytes_per_step"] for r in d["runs"]}
    for word, name in (("eager moves", "eager"), ("compile", "compile"), ("FuseLens", "fuselens")):
        assert f"{word} {fmt_bytes(runs[name])}" in para, (word, fmt_bytes(runs[name]))
    cd = next(c for c in d["candidates"] if c["label"] == "compile")
    saved = fmt_bytes(cd["measured_warm_dram_bytes_saved_per_step"])
    logical = fmt_bytes(cd["hbm_bytes_avoided_per_step"])
    assert f"measured saving is {saved} of the {logical} logical" in para, (saved, logical)
