"""GPU peak table and its lookup from a trace's deviceProperties.

lookup(device_properties, gpu_name) -> GpuSpec | None. None means "unknown GPU": achieved GB/s and TFLOP/s
are still computed, every % of peak is NaN. Peaks are the vendor datasheet's DENSE figures (NVIDIA prints
tensor-core numbers "with sparsity"; we halve those) for one device as PyTorch sees it (one MI250X GCD,
not the two-die OAM). Matching rules, and why, are in docs/COST_MODEL.md ("Peaks").
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

_MiB = 1 << 20


@dataclass(frozen=True)
class GpuSpec:
    name: str
    hbm_gbps: float  # peak HBM bandwidth, 1e9 B/s
    tflops: dict[str, float] = field(default_factory=dict)  # dense peak by dtype: 'bf16', 'fp16', 'fp32', 'tf32', 'fp8'
    l2_bytes: float = float("nan")  # datasheet L2 capacity, bytes (NaN unknown)
    # last-level cache in front of HBM when it is not the L2 (AMD Infinity Cache); the DRAM model's capacity
    llc_bytes: float = float("nan")
    source: str = ""  # where the peaks come from (datasheet URL/title)
    matched_on: str = ""  # how the trace's device was mapped to this row (name, memory, arch, CU count)
    # L2 partitions that each keep their own copy of a line SMs on both sides read (1: one unified L2). NVIDIA A100
    # whitepaper ("NVIDIA A100 Tensor Core GPU Architecture", L2 cache): the L2 is divided into two partitions, each
    # caching data for the SMs of the GPCs directly connected to it, coherent in hardware; Hopper keeps the two.
    # analyzer.dram counts a GEMM's operand panels (read by CTAs on every SM) once per partition.
    l2_partitions: int = 1

    @property
    def cache_bytes(self) -> float:
        """Capacity of the last cache before HBM: what analyzer.dram sizes reuse against (NaN unknown)."""
        return self.llc_bytes if self.llc_bytes == self.llc_bytes else self.l2_bytes


def _spec(name, gbps, bf16, fp16, fp32, tf32=None, fp8=None, l2_mib=None, source="", llc_mib=None, l2_parts=1):
    t = {"bf16": bf16, "fp16": fp16, "fp32": fp32, "tf32": tf32, "fp8": fp8}
    return GpuSpec(
        name=name,
        hbm_gbps=float(gbps),
        tflops={k: float(v) for k, v in t.items() if v is not None},
        l2_bytes=float(l2_mib * _MiB) if l2_mib else float("nan"),
        llc_bytes=float(llc_mib * _MiB) if llc_mib else float("nan"),
        l2_partitions=l2_parts,
        source=source,
    )


_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
# name → spec. fp32 is the non-tensor (CUDA-core) FP32 peak on NVIDIA; on AMD it is the FP32 *matrix* peak,
# since rocBLAS/hipBLASLt run FP32 GEMMs on MFMA units. bf16/fp16/tf32/fp8 are dense tensor/matrix peaks.
SPECS: dict[str, GpuSpec] = {
    s.name: s
    for s in (
        _spec("A100 SXM4 40GB", 1555, 312, 312, 19.5, 156, l2_mib=40, l2_parts=2, source=_A100),
        _spec("A100 SXM4 80GB", 2039, 312, 312, 19.5, 156, l2_mib=40, l2_parts=2, source=_A100),
        _spec("A100 PCIe 40GB", 1555, 312, 312, 19.5, 156, l2_mib=40, l2_parts=2, source=_A100),
        _spec("A100 PCIe 80GB", 1935, 312, 312, 19.5, 156, l2_mib=40, l2_parts=2, source=_A100),
        _spec("H100 SXM5 80GB", 3350, 989.5, 989.5, 67, 494.7, 1979, l2_mib=50, l2_parts=2, source=_H100),
        _spec("H100 PCIe 80GB", 2000, 756, 756, 51, 378, 1513, l2_mib=50, l2_parts=2, source=_H100),
        _spec("H100 NVL 94GB", 3900, 835.5, 835.5, 60, 417.5, 1670.5, l2_mib=50, l2_parts=2, source=_H100),
        _spec("H200 SXM 141GB", 4800, 989.5, 989.5, 67, 494.7, 1979, l2_mib=60, l2_parts=2, source=_H200),
        _spec("H200 NVL 141GB", 4800, 835.5, 835.5, 60, 417.5, 1670.5, l2_mib=60, l2_parts=2, source=_H200),
        _spec(
            "B200",
            8000,
            2250,
            2250,
            75,
            1125,
            4500,
            l2_mib=126,
            source="NVIDIA HGX B200 datasheet (per-GPU = 1/8); L2: NVIDIA Blackwell architecture technical brief",
        ),
        _spec("L40S", 864, 362.05, 362.05, 91.6, 183, 733, l2_mib=96, source="NVIDIA L40S GPU datasheet"),
        _spec("L4", 300, 121, 121, 30.3, 60, 242.5, l2_mib=48, source="NVIDIA L4 Tensor Core GPU datasheet"),
        _spec("A10", 600, 125, 125, 31.2, 62.5, l2_mib=6, source="NVIDIA A10 Tensor Core GPU datasheet"),
        # Volta: no bf16/tf32 tensor cores, so those keys are absent (→ % of peak NaN, never a made-up peak)
        _spec("V100 SXM2", 900, None, 125, 15.7, l2_mib=6, source="NVIDIA Tesla V100 GPU datasheet"),
        _spec("V100 PCIe", 900, None, 112, 14, l2_mib=6, source="NVIDIA Tesla V100 GPU datasheet"),
        _spec("V100S PCIe", 1134, None, 130, 16.4, l2_mib=6, source="NVIDIA Tesla V100S datasheet"),
        # AMD CDNA2: PyTorch sees each GCD of an MI250/MI250X as one 64 GB device → half the OAM figures.
        _spec(
            "MI250X (one GCD)",
            1638.4,
            191.5,
            191.5,
            47.9,
            l2_mib=8,
            source="AMD Instinct MI250X datasheet (÷2 per GCD)",
        ),
        _spec(
            "MI250 (one GCD) / MI210",
            1638.4,
            181.0,
            181.0,
            45.3,
            l2_mib=8,
            source="AMD Instinct MI250 datasheet (÷2 per GCD) = AMD Instinct MI210 datasheet",
        ),
        _spec(
            "MI300X",
            5300,
            1307.4,
            1307.4,
            163.4,
            653.7,
            2614.9,
            l2_mib=32,
            llc_mib=256,
            source="AMD Instinct MI300X datasheet",
        ),
        _spec(
            "MI300A",
            5300,
            980.6,
            980.6,
            122.6,
            490.3,
            1961.2,
            l2_mib=24,
            llc_mib=256,
            source="AMD Instinct MI300A datasheet",
        ),
        _spec(
            "MI325X",
            6000,
            1307.4,
            1307.4,
            163.4,
            653.7,
            2614.9,
            l2_mib=32,
            llc_mib=256,
            source="AMD Instinct MI325X datasheet",
        ),
    )
}

_GB = 1e9


def _nvidia(name: str, mem_gb: float) -> tuple[str, str] | None:
    """(table key, why) from an NVIDIA device name; memory settles the A100 40/80 GB split."""
    n = name.upper()
    if "A100" in n:
        form = "PCIe" if "PCIE" in n else "SXM4"  # names without a form factor (A100-PG509-200) are HGX SXM boards
        size = "80GB" if ("80GB" in n or mem_gb > 60) else "40GB"
        return f"A100 {form} {size}", f"name {name!r}, {mem_gb:.0f} GB → {form}, {size}"
    if "H100" in n or "H800" in n:
        if "NVL" in n or 90 < mem_gb < 100:
            return "H100 NVL 94GB", f"name {name!r} (NVL / 94 GB)"
        if "PCIE" in n:
            return "H100 PCIe 80GB", f"name {name!r} (PCIe)"
        return "H100 SXM5 80GB", f"name {name!r}: HBM3 80 GB without 'PCIe'/'NVL' is the SXM5 board"
    if "H200" in n:
        return ("H200 NVL 141GB", f"name {name!r} (NVL)") if "NVL" in n else ("H200 SXM 141GB", f"name {name!r}")
    if re.search(r"\bB200\b", n):
        return "B200", f"name {name!r}"
    if "L40S" in n:
        return "L40S", f"name {name!r}"
    if re.search(r"\bL4\b", n):
        return "L4", f"name {name!r}"
    if re.search(r"\bA10\b", n):
        return "A10", f"name {name!r}"
    if "V100S" in n:
        return "V100S PCIe", f"name {name!r}"
    if "V100" in n:
        # SXM2 and DGX-Station (DGXS) parts share the SXM2 peaks; PCIe runs at lower clocks
        return ("V100 PCIe", f"name {name!r}") if "PCIE" in n else ("V100 SXM2", f"name {name!r} (SXM2/DGXS)")
    return None


def _amd(name: str, mem_gb: float, major: int | None, minor: int | None, cus: int | None) -> tuple[str, str] | None:
    """AMD devices: by name when ROCm reports a product name, else by gfx arch + memory + CU count.

    ROCm often reports the marketing name as "AMD Radeon Graphics"; then gfx9.0 (gfx90a) with 64 GB is one
    CDNA2 GCD: 110 CUs → MI250X, 104 CUs → MI250 or MI210 (same per-device peaks); gfx9.4 (gfx942) with
    ~128 / ~192 / ~256 GB → MI300A / MI300X / MI325X.
    """
    n = name.upper()
    for key in ("MI325X", "MI300X", "MI300A", "MI250X"):
        if key in n:
            return (key if key != "MI250X" else "MI250X (one GCD)"), f"name {name!r}"
    if "MI250" in n or "MI210" in n:
        return "MI250 (one GCD) / MI210", f"name {name!r}"
    why = f"name {name!r}, gfx{major}.{minor}, {mem_gb:.0f} GB, {cus} CUs"
    if major == 9 and minor == 0 and 50 < mem_gb < 70:
        if cus == 110:
            return "MI250X (one GCD)", why + " → MI250X GCD"
        if cus == 104:
            return "MI250 (one GCD) / MI210", why + " → MI250 GCD or MI210"
        return None
    if major == 9 and minor == 4:
        if 110 < mem_gb < 140:
            return "MI300A", why + " → MI300A"
        if 180 < mem_gb < 215:
            return "MI300X", why + " → MI300X"
        if 240 < mem_gb < 300:
            return "MI325X", why + " → MI325X"
    return None


def lookup(device_properties: list[dict], gpu_name: str | None) -> GpuSpec | None:
    """Peak table entry for the trace's first GPU, or None when the device is unknown or ambiguous."""
    props = device_properties[0] if device_properties else {}
    name = str(gpu_name or props.get("name") or "")
    if not name:
        return None
    mem_gb = float(props.get("totalGlobalMem") or 0) / _GB
    major = props.get("computeMajor", props.get("major"))
    minor = props.get("computeMinor", props.get("minor"))
    cus = props.get("numSms")
    upper = name.upper()
    if "AMD" in upper or "INSTINCT" in upper or re.search(r"\bMI\d{3}", upper):
        hit = _amd(name, mem_gb, major, minor, cus)
    else:
        hit = _nvidia(name, mem_gb)
    if hit is None:
        return None
    key, why = hit
    spec = SPECS[key]
    return dataclasses.replace(spec, tflops=dict(spec.tflops), matched_on=why)
