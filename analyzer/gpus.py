"""GPU peak table (STUB — to be replaced by the classify/cost owner).

lookup(device_properties, gpu_name) -> GpuSpec | None
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSpec:
    name: str
    hbm_gbps: float  # peak HBM bandwidth, 1e9 B/s
    tflops: dict[str, float] = field(default_factory=dict)  # dense peak by dtype: 'bf16', 'fp16', 'fp32', 'tf32', 'fp8'
    l2_bytes: float = float("nan")
    source: str = ""  # where the peaks come from (datasheet URL/title)


def lookup(device_properties: list[dict], gpu_name: str | None) -> GpuSpec | None:
    return None
