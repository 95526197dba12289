"""The README's "three measurements of time" paragraph states the bundled recordings' figures as the dashboard
shows them: the manifest's CUDA-event medians and the traces' GPU time per step (issue 13: README vs app)."""

from __future__ import annotations

import json
import re

import pytest

from analyzer import load_trace, summarize
from tests.conftest import ROOT, SAMPLE_TRACES

HF = SAMPLE_TRACES / "hf_geglu_bf16"
NAMES = {"eager": "eager", "compile": "compile", "Liger": "liger", "FuseLens": "fuselens"}
pytestmark = pytest.mark.skipif(not (HF / "manifest.json").is_file(), reason="sample traces not recorded")


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
