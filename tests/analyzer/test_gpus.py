"""analyzer.gpus: the peak table and how a trace's deviceProperties map onto it."""

from __future__ import annotations

import math

import pytest

from analyzer.gpus import SPECS, lookup
from tests.conftest import TRACES, loaded_trace


@pytest.mark.parametrize(
    "trace, expected",
    [
        ("h100_bert", "H100 SXM5 80GB"),  # 'NVIDIA H100 80GB HBM3': HBM3 80 GB = the SXM5 board
        ("h100_qwen", "H100 SXM5 80GB"),
        ("b200_vllm", "B200"),
        ("mi300_bert", "MI300X"),  # 'AMD Instinct MI300X VF' (SR-IOV virtual function)
        ("mi300_triton", "MI300X"),
        ("hta_amd", "MI250 (one GCD) / MI210"),  # 'AMD Radeon Graphics', gfx9.0, 64 GB, 104 CUs
        ("hta_alexnet", "A100 SXM4 40GB"),  # 'NVIDIA A100-PG509-200', 42 GB: an HGX SXM board
        ("hta_cuda_graph", "A100 SXM4 80GB"),  # 'NVIDIA A100-SXM4-80GB'
        ("hta_diff_test", "V100 SXM2"),  # 'Tesla V100-SXM2-16GB'
        ("legacy_resnet", "V100 SXM2"),  # 'Tesla V100-DGXS-32GB' (legacy schema)
        ("legacy_gpu_metrics", "V100 SXM2"),  # older top-level 'computeProperties' with major/minor
        ("hta_filter_rank0", None),  # no deviceProperties at all
    ],
)
def test_real_device_properties(trace, expected):
    t = loaded_trace(TRACES[trace])
    spec = lookup(t.meta.device_properties, t.meta.gpu_name)
    if expected is None:
        assert spec is None
        assert t.gpu is None  # build_trace uses the same lookup
        return
    assert spec is not None and spec.name == expected
    assert spec.matched_on  # says how it decided
    assert t.gpu == spec


def _props(name, mem_gb, major, minor, cus=None):
    p = {"name": name, "totalGlobalMem": int(mem_gb * 1e9), "computeMajor": major, "computeMinor": minor}
    if cus is not None:
        p["numSms"] = cus
    return [p]


@pytest.mark.parametrize(
    "props, expected",
    [
        (_props("NVIDIA H100 PCIe", 85, 9, 0), "H100 PCIe 80GB"),
        (_props("NVIDIA H100 NVL", 100, 9, 0), "H100 NVL 94GB"),
        (_props("NVIDIA H200", 150, 9, 0), "H200 SXM 141GB"),
        (_props("NVIDIA H200 NVL", 150, 9, 0), "H200 NVL 141GB"),
        (_props("NVIDIA A100 80GB PCIe", 85, 8, 0), "A100 PCIe 80GB"),
        (_props("NVIDIA A100-PCIE-40GB", 42, 8, 0), "A100 PCIe 40GB"),
        (_props("NVIDIA L40S", 48, 8, 9), "L40S"),
        (_props("NVIDIA L4", 24, 8, 9), "L4"),
        (_props("NVIDIA A10", 24, 8, 6), "A10"),
        (_props("AMD Instinct MI325X", 274, 9, 4), "MI325X"),
        (_props("AMD Radeon Graphics", 206, 9, 4, 304), "MI300X"),  # ROCm without the marketing name
        (_props("AMD Radeon Graphics", 275, 9, 4, 304), "MI325X"),
        (_props("AMD Radeon Graphics", 137, 9, 4, 228), "MI300A"),
        (_props("AMD Radeon Graphics", 68.7, 9, 0, 110), "MI250X (one GCD)"),
        (_props("AMD Radeon Graphics", 68.7, 9, 0, 96), None),  # gfx90a with an unexpected CU count: ambiguous
        (_props("NVIDIA GeForce RTX 4090", 25, 8, 9), None),  # not in the table: None, never a near miss
        ([], None),
    ],
)
def test_names_memory_and_arch(props, expected):
    spec = lookup(props, None)
    assert (spec.name if spec else None) == expected


def test_gpu_name_argument_wins_over_properties_name():
    assert lookup([], "NVIDIA H100 80GB HBM3").name == "H100 SXM5 80GB"


def test_table_is_consistent():
    for spec in SPECS.values():
        assert spec.hbm_gbps > 0 and spec.source
        tf = spec.tflops
        assert all(v > 0 for v in tf.values())
        # dense tensor-core peaks are ordered fp8 > bf16 >= tf32 > fp32 wherever they exist
        if "fp8" in tf:
            assert tf["fp8"] > tf["bf16"]
        if "tf32" in tf:
            assert tf["fp16"] > tf["tf32"] > tf["fp32"]
        assert math.isnan(spec.l2_bytes) or spec.l2_bytes >= 4 * 2**20
    # V100 has no bf16/tf32 tensor cores: no made-up peak for them
    assert "bf16" not in SPECS["V100 SXM2"].tflops
