"""The one dtype table: every tensor 'Input type' spelling Kineto writes → short name, bytes per element, kind.

Kineto records c10 scalar-type names ('c10::BFloat16', 'float', 'long int', 'c10::Float8_e4m3fnuz'); kernel
templates spell C++ types ('CatArrayBatchedCopy<c10::BFloat16, …>', 'OpaqueType<2>'); users type torch names
('torch.bfloat16', 'bfloat16'). All of them resolve here, so a new spelling is added once.
"""

from __future__ import annotations

import json
from typing import NamedTuple


class DType(NamedTuple):
    short: str  # the name every table and JSON shows ('bf16', 'fp8_e4m3fnuz')
    bytes: int  # bytes per element as stored (fp4 x2 and quint4x2 pack two values in one byte)
    kind: int  # promotion kind: 0 bool, 1 integer, 2 floating, 3 complex


# fmt: off
# c10 spelling → (short name, bytes per element, kind). PyTorch 1.9 … 2.11 'Input type' values.
_C10: dict[str, tuple[str, int, int]] = {
    "bool": ("bool", 1, 0),
    "unsigned char": ("uint8", 1, 1), "signed char": ("int8", 1, 1),
    "short int": ("int16", 2, 1), "short": ("int16", 2, 1), "unsigned short": ("uint16", 2, 1),
    "int": ("int32", 4, 1), "unsigned int": ("uint32", 4, 1),
    "long int": ("int64", 8, 1), "long": ("int64", 8, 1), "long long": ("int64", 8, 1),
    "unsigned long": ("uint64", 8, 1), "unsigned long int": ("uint64", 8, 1),
    "unsigned long long": ("uint64", 8, 1),
    "c10::Half": ("fp16", 2, 2), "c10::BFloat16": ("bf16", 2, 2), "float": ("fp32", 4, 2), "double": ("fp64", 8, 2),
    "c10::Float8_e4m3fn": ("fp8_e4m3", 1, 2), "c10::Float8_e5m2": ("fp8_e5m2", 1, 2),
    "c10::Float8_e4m3fnuz": ("fp8_e4m3fnuz", 1, 2), "c10::Float8_e5m2fnuz": ("fp8_e5m2fnuz", 1, 2),
    "c10::Float8_e8m0fnu": ("fp8_e8m0", 1, 2), "c10::Float4_e2m1fn_x2": ("fp4_e2m1x2", 1, 2),
    "c10::complex<c10::Half>": ("complex32", 4, 3), "c10::complex<float>": ("complex64", 8, 3),
    "c10::complex<double>": ("complex128", 16, 3),
    "c10::qint8": ("qint8", 1, 1), "c10::quint8": ("quint8", 1, 1), "c10::qint32": ("qint32", 4, 1),
    "c10::quint4x2": ("quint4x2", 1, 1), "c10::quint2x4": ("quint2x4", 1, 1),
}
# torch dtype names (str(torch.bfloat16) without 'torch.') → the same entries
_TORCH: dict[str, str] = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "uint16": "unsigned short",
    "int32": "int", "uint32": "unsigned int", "int64": "long int", "uint64": "unsigned long",
    "float16": "c10::Half", "half": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
    "float64": "double", "float8_e4m3fn": "c10::Float8_e4m3fn", "float8_e5m2": "c10::Float8_e5m2",
    "float8_e4m3fnuz": "c10::Float8_e4m3fnuz", "float8_e5m2fnuz": "c10::Float8_e5m2fnuz",
    "float8_e8m0fnu": "c10::Float8_e8m0fnu", "float4_e2m1fn_x2": "c10::Float4_e2m1fn_x2",
    "complex32": "c10::complex<c10::Half>", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
    "qint8": "c10::qint8", "quint8": "c10::quint8", "qint32": "c10::qint32", "quint4x2": "c10::quint4x2",
    "quint2x4": "c10::quint2x4",
}
# 'Input type' values that are not tensors (scalars, lists, undefined optionals; 'TensorList' has no per-tensor dtype)
NOT_TENSOR_TYPES = frozenset(
    {"", "Scalar", "ScalarList", "GenericList", "TensorList", "Int", "Bool", "Double", "Device", "Layout",
     "ScalarType", "MemoryFormat", "String", "None"}
)
# fmt: on

DTYPES: dict[str, DType] = {name: DType(*v) for name, v in _C10.items()}
DTYPES.update({f"torch.{t}": DTYPES[c] for t, c in _TORCH.items()})
DTYPES.update({t: DTYPES[c] for t, c in _TORCH.items() if t not in DTYPES})
DTYPES.update({d.short: d for d in list(DTYPES.values()) if d.short not in DTYPES})  # 'bf16' resolves to itself
# c10 spellings only: what a tensor's 'Input type' can be (the test over real traces checks every spelling is here)
DTYPE_BYTES: dict[str, int] = {name: v[1] for name, v in _C10.items()}
_BY_SHORT: dict[str, DType] = {d.short: d for d in DTYPES.values()}
# C++ types a kernel template names: 'CatArrayBatchedCopy<c10::BFloat16, …>', '<long, …>'
_CPP_ALIASES = {"at::Half": "c10::Half", "at::BFloat16": "c10::BFloat16", "__half": "c10::Half",
                "__nv_bfloat16": "c10::BFloat16", "half": "c10::Half"}  # fmt: skip


def dtype(name: str | None) -> DType | None:
    """The entry for any spelling (c10, torch, short, C++ template type); None when it is not a sized dtype."""
    if not name:
        return None
    hit = DTYPES.get(name)
    if hit is None:
        alias = _CPP_ALIASES.get(name)
        hit = DTYPES.get(alias) if alias else None
    return hit


def short(name: str | None) -> str | None:
    """'c10::BFloat16' → 'bf16'; None for non-tensor arguments ('Scalar', '', 'TensorList') and unknown spellings."""
    hit = dtype(name)
    return hit.short if hit else None


def itemsize(name: str | None) -> int | None:
    """Bytes per element of any spelling; None when unknown."""
    hit = dtype(name)
    return hit.bytes if hit else None


def kind(short_name: str) -> int:
    hit = _BY_SHORT.get(short_name)
    return hit.kind if hit else 1


def promote(shorts: list[str], zero_dim: list[str] = ()) -> str | None:
    """PyTorch type promotion, simplified, on short names: dimensioned tensors decide; a 0-dim tensor only lifts the
    kind (a double scalar tensor times a bf16 tensor stays bf16); bf16 with fp16 → fp32; the wider dtype of one kind
    otherwise (int mixes: the wider int, as torch does for tensors of one kind)."""
    if not shorts:
        shorts, zero_dim = list(zero_dim), []
    if not shorts:
        return None
    top = max(kind(d) for d in shorts)
    zero_kind = max((kind(d) for d in zero_dim), default=-1)
    if zero_kind > top:
        return {1: "int64", 2: "fp32"}.get(zero_kind, "complex64")
    same = {d for d in shorts if kind(d) == top}
    if {"fp16", "bf16"} <= same:
        return "fp32"
    return max(sorted(same), key=lambda d: _BY_SHORT[d].bytes if d in _BY_SHORT else 0)


def peak_key(short_name: str | None, kernel_name: str = "") -> str | None:
    """Key into GpuSpec.tflops for a matrix kernel of this input dtype. FP32 GEMMs run on TF32 tensor cores only when
    allowed; the kernel name says which (s1688 / tf32 / xf32 = TF32 MMA)."""
    if short_name == "fp32":
        low = kernel_name.lower()
        return "tf32" if ("tf32" in low or "s1688" in low or "xf32" in low) else "fp32"
    if short_name in ("bf16", "fp16"):
        return short_name
    return "fp8" if short_name and short_name.startswith("fp8") else None


def peak_keys(type_lists) -> set[str]:
    """Peak keys of the dtypes named in KERNEL_SUMMARY 'dtypes' cells (JSON lists of 'Input type' names)."""
    keys: set[str] = set()
    for cell in type_lists:
        try:
            names = json.loads(cell) if cell else []
        except ValueError:
            continue
        for n in names if isinstance(names, list) else []:
            k = peak_key(short(n) if isinstance(n, str) else None)
            if k:
                keys.add(k)
    return keys
