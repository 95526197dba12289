"""Small helpers shared by the Triton kernel wrappers (no kernels here)."""

from __future__ import annotations

import os


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU (TRITON_INTERPRET=1, how CI tests them)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_device(*tensors) -> None:
    """Kernels run on CUDA tensors, or on CPU tensors only under the interpreter; say so in one line otherwise."""
    for t in tensors:
        if t is None:
            continue
        if t.device.type == "cpu" and not interpreting():
            raise ValueError("FuseLens Triton kernels need CUDA tensors (or TRITON_INTERPRET=1 for CPU tensors)")


SUPPORTED_DTYPES_DOC = "float32, float16, bfloat16"
