"""A CUDA-graph replay run diffed against a normal run.

Real H100 recordings (tests/data/cuda_graph_h100_round0): the HF GEGLU forward eager, the same forward captured in a
torch.cuda.CUDAGraph and replayed, torch.compile, and torch.compile(mode="reduce-overhead"). A replayed kernel has
no launch of its own (one cudaGraphLaunch per step) and so no op or shapes: before the fix the diff matched none of
the graph run's kernels although the nvjet GEMM names are identical ("165 µs removed, 182 µs added"), and the graph
run's `remaining` read 0.0 although it is unknown.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from analyzer import diff_runs, load_trace, summarize
from tests.conftest import DATA, ROOT

G = DATA / "cuda_graph_h100_round0"


@pytest.fixture(scope="module")
def runs():
    return {
        v: summarize(load_trace(G / f"{v}.json.gz")) for v in ("eager", "graph", "compile", "compile-reduce-overhead")
    }


def test_graph_run_steps_hold_one_replay_each(runs):
    """7 GPU ops per replay; the down-projection GEMM of the replay before the profiled window (no launch in the
    trace) is in no step (bug 3's rule: it ran before the stream's first launched op)."""
    t = runs["graph"].trace
    assert t.steps["kernels"].tolist() == [7, 7, 7]
    g = t.gpu_ops
    assert int(g["graph_replay"].sum()) == 21
    orphans = g[g["launch_name"] == ""]
    assert len(orphans) == 1 and orphans["name"].iloc[0].startswith("nvjet") and orphans["step"].iloc[0] == -1


def test_graph_vs_eager_matches_every_kernel_by_name(runs):
    d = diff_runs(runs["eager"], [runs["graph"]], labels=["eager", "graph"])
    cd = d.candidates[0]
    assert cd.kernels_per_step == [5, 5]
    assert cd.unmatched_base == [] and cd.unmatched_candidate == []
    tb = cd.time_breakdown
    assert tb["removed_kernels_us"] == 0 and tb["added_kernels_us"] == 0
    assert cd.matched_other["count"] == 7  # 3 GEMMs, GELU, mul, 2 workspace memsets: by name and order
    assert cd.fusions == [] and cd.swaps == []  # same program: nothing claimed
    assert cd.hbm_bytes_avoided_per_step == 0
    assert any("CUDA-graph replays" in n for n in cd.notes)


def test_unknown_remaining_is_never_zero(runs):
    d = diff_runs(runs["eager"], [runs["graph"]], labels=["eager", "graph"])
    j = d.to_json()
    assert j["remaining_round_trip_bytes_per_step"] is None
    assert "CUDA-graph replays" in j["remaining_unknown"]
    graph_run = next(r for r in j["runs"] if r["label"] == "graph")
    assert graph_run["remaining_round_trip_bytes_per_step"] is None
    eager_run = next(r for r in j["runs"] if r["label"] == "eager")
    assert eager_run["remaining_round_trip_bytes_per_step"] == 301_989_888  # gate out, gelu out, up out: read back
    assert eager_run["remaining_unknown"] is None


def test_compile_vs_its_cuda_graph_version_claims_nothing(runs):
    """Inductor's reduce-overhead mode replays the same kernels from a graph: the same names pair up, no fusion."""
    d = diff_runs(runs["compile"], [runs["compile-reduce-overhead"]], labels=["compile", "cudagraphs"])
    cd = d.candidates[0]
    assert cd.fusions == [] and cd.swaps == []
    assert cd.hbm_bytes_avoided_per_step == 0
    names = {k["name"] for k in cd.unmatched_base}
    assert not any(n.startswith(("nvjet", "triton_")) for n in names)


def test_fusion_into_a_replayed_kernel_rests_on_its_name(runs):
    """eager → reduce-overhead: the replayed Inductor kernel's name says gelu+mul, the evidence for the fusion; the
    intermediate's size comes from the eager side's shapes."""
    d = diff_runs(runs["eager"], [runs["compile-reduce-overhead"]], labels=["eager", "cudagraphs"])
    (f,) = d.candidates[0].fusions
    assert f.fused_kernel == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert set(f.ops) == {"gelu", "mul"}
    assert f.bytes_avoided_per_step == 100_663_296


def test_cli_prints_unknown_not_zero(capsys):
    p = subprocess.run(
        [sys.executable, "-m", "analyzer", "diff", str(G / "eager.json.gz"), str(G / "graph.json.gz")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stderr
    assert "still round-tripping through HBM: unknown" in p.stdout
    assert "unmatched" not in p.stdout
    from analyzer.cli import main

    assert main(["diff", str(G / "eager.json.gz"), str(G / "graph.json.gz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["remaining_round_trip_bytes_per_step"] is None
