"""The byte/FLOP formulas, one kernel (with its launching op's Input Dims / Input type / Input Strides) at a time.

analyzer.cost calls estimate_kernel once per unique (name, op, shapes) and maps the answer to every kernel.
Bytes are HBM traffic if nothing stays in cache: every input read once, every output written once. Where the
trace cannot tell (outputs of custom ops, in/out buffers of Inductor kernels), the basis says so.
docs/COST_MODEL.md explains each rule and the checks against TraceLens's reference numbers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from analyzer.ops import attention as attn

# bytes per element for every tensor 'Input type' spelling seen in real traces (PyTorch 1.9 … 2.8)
# fmt: off
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8, "int": 4,
    "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "unsigned short": 2,
    "unsigned int": 4, "unsigned long": 8, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1, "c10::Float8_e8m0fnu": 1, "c10::Float4_e2m1fn_x2": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "c10::qint8": 1, "c10::quint8": 1, "c10::qint32": 4, "c10::quint4x2": 1,
}
# 'Input type' values that are not tensors (scalars, lists, undefined optionals; 'TensorList' has no per-tensor dtype)
NOT_TENSOR_TYPES = frozenset(
    {"", "Scalar", "ScalarList", "GenericList", "TensorList", "Int", "Bool", "Double", "Device", "Layout",
     "ScalarType", "MemoryFormat", "String", "None"}
)
SHORT = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16", "long int": "int64",
    "long": "int64", "int": "int32", "short int": "int16", "short": "int16", "signed char": "int8",
    "unsigned char": "uint8", "bool": "bool", "c10::Float8_e4m3fn": "fp8_e4m3", "c10::Float8_e5m2": "fp8_e5m2",
    "c10::Float8_e4m3fnuz": "fp8_e4m3fnuz", "c10::Float8_e5m2fnuz": "fp8_e5m2fnuz",
}
# fmt: on
_KIND = {"bool": 0, "c10::complex<float>": 3, "c10::complex<double>": 3, "c10::complex<c10::Half>": 3}
_FLOAT = {"float", "double", "c10::Half", "c10::BFloat16"}
_NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    bytes: float
    flops: float
    basis: str
    peak_key: str | None = None  # key into GpuSpec.tflops for % of peak FLOP/s ('bf16', 'tf32', …)


@dataclass(frozen=True)
class Arg:
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def unique(self) -> int:
        """Elements actually stored: a stride-0 (expanded/broadcast) dim repeats the same memory."""
        if self.strides is None or len(self.strides) != len(self.shape):
            return self.numel
        return math.prod(d for d, s in zip(self.shape, self.strides, strict=True) if s != 0) if all(self.shape) else 0

    @property
    def nbytes(self) -> int:
        return self.unique * DTYPE_BYTES[self.dtype]

    @property
    def short(self) -> str:
        return SHORT.get(self.dtype, self.dtype)


class UnknownDtype(ValueError):
    """An 'Input type' that is neither a sized tensor dtype nor a known non-tensor type."""


def unknown(why: str) -> Estimate:
    return Estimate(_NAN, _NAN, "unknown: " + why)


def tensor_args(dims, types, strides) -> list[Arg | None]:
    """One entry per op input: an Arg for a tensor, None for scalars, lists and undefined tensors."""
    dims = dims or []
    types = types or []
    out: list[Arg | None] = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if not isinstance(d, list) or any(not isinstance(x, int) for x in d):
            out.append(None)
            continue
        if t not in DTYPE_BYTES:
            if t not in NOT_TENSOR_TYPES and d:
                raise UnknownDtype(t)  # a tensor we cannot size: never silently leave it out of a sum
            out.append(None)
            continue
        s = strides[i] if strides and i < len(strides) else None
        ok = isinstance(s, list) and len(s) == len(d) and all(isinstance(x, int) for x in s)
        out.append(Arg(tuple(d), t, tuple(s) if ok else None))
    return out


def _fmt(n: float) -> str:
    return f"{int(n):,}"


# ---------------------------------------------------------------------------------------------- GEMM
GEMM_OPS = frozenset(
    [
        "aten::mm",
        "aten::addmm",
        "aten::addmm_",
        "aten::bmm",
        "aten::baddbmm",
        "aten::baddbmm_",
        "aten::addbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_scaled_mm",
        "aten::_int_mm",
        "aten::mv",
        "aten::addmv",
    ]
)


def _peak_key(dtype: str, kernel_name: str) -> str | None:
    if dtype == "float":
        # FP32 GEMMs run on TF32 tensor cores only when allowed; the kernel name says which (s1688 = TF32 MMA)
        low = kernel_name.lower()
        return "tf32" if ("tf32" in low or "s1688" in low or "xf32" in low) else "fp32"
    return {"c10::BFloat16": "bf16", "c10::Half": "fp16"}.get(dtype, "fp8" if "Float8" in dtype else None)


def gemm(op: str, args: list[Arg | None], kernel_name: str) -> Estimate:
    t = [a for a in args if a is not None]
    bias = None
    out = None
    if op in ("aten::addmm", "aten::addmm_", "aten::baddbmm", "aten::baddbmm_", "aten::addbmm", "aten::addmv"):
        if len(t) < 3:
            return unknown(f"{op} without 3 tensor inputs")
        bias, a, b = t[0], t[1], t[2]
    elif op == "aten::linear":
        if len(t) < 2:
            return unknown("aten::linear without input and weight")
        a, w = t[0], t[1]
        bias = t[2] if len(t) > 2 else None
        if len(w.shape) != 2 or not a.shape:
            return unknown("aten::linear weight is not 2-D")
        m = math.prod(a.shape[:-1])
        return _gemm_estimate(op, 1, m, w.shape[0], w.shape[1], a, w, bias, None, kernel_name, a_bytes=a.nbytes)
    else:
        if len(t) < 2:
            return unknown(f"{op} without two tensor inputs")
        a, b = t[0], t[1]
        out = t[2] if len(t) > 2 else None  # mm(a, b, out=c): Inductor's extern_kernels.mm passes the output
        if op == "aten::_scaled_mm":
            # (a, b, scale_a, scale_b, bias?, scale_result?): scales are fp32; a bf16/fp16 bias fixes the out dtype
            out = next((x for x in t[4:] if x.dtype in ("c10::BFloat16", "c10::Half")), None)
            extra_bytes = sum(x.nbytes for x in t[2:])
    sa, sb = a.shape, b.shape
    if len(sa) == 2 and len(sb) == 2:
        batch, m, k, n = 1, sa[0], sa[1], sb[1]
    elif len(sa) == 2 and len(sb) == 1:  # matrix-vector
        batch, m, k, n = 1, sa[0], sa[1], 1
    elif len(sa) >= 3 and len(sb) == 2:  # matmul folds leading dims into M
        batch, m, k, n = 1, math.prod(sa[:-1]), sa[-1], sb[1]
    elif len(sa) >= 3 and len(sb) >= 3:
        try:
            bshape = _broadcast(sa[:-2], sb[:-2])
        except ValueError:
            return unknown(f"{op} batch dims {sa[:-2]} and {sb[:-2]} do not broadcast")
        batch, m, k, n = math.prod(bshape), sa[-2], sa[-1], sb[-1]
    else:
        return unknown(f"{op} with input ranks {len(sa)} and {len(sb)}")
    batch_out = 1 if op == "aten::addbmm" else batch  # addbmm sums the batch into one [M, N]
    est = _gemm_estimate(op, batch, m, n, k, a, b, bias, out, kernel_name, batch_out=batch_out)
    if op == "aten::_scaled_mm" and out is not None:
        # the output is not an input here: count it as written, plus the scale/bias tensors read
        est = Estimate(est.bytes + extra_bytes, est.flops, est.basis, est.peak_key)
    return est


def _gemm_estimate(op, batch, m, n, k, a, b, bias, out, kernel_name, a_bytes=None, batch_out=None) -> Estimate:
    batch_out = batch if batch_out is None else batch_out
    if out is not None:
        c_bytes, c_note = batch_out * m * n * DTYPE_BYTES[out.dtype], ""
    elif op == "aten::_scaled_mm":
        c_bytes, c_note = _NAN, "; bytes unknown: _scaled_mm's output dtype is not recorded (no bf16/fp16 bias)"
    elif op == "aten::_int_mm":
        c_bytes, c_note = batch_out * m * n * 4, ""  # int8 × int8 → int32
    else:
        c_bytes, c_note = batch_out * m * n * DTYPE_BYTES[a.dtype], ""
    bias_bytes = bias.nbytes if bias is not None else 0
    total = (a.nbytes if a_bytes is None else a_bytes) + b.nbytes + bias_bytes + c_bytes
    flops = 2.0 * batch * m * n * k + (batch_out * m * n if bias is not None else 0)  # + one add per output for bias
    dims = (f"B={batch} " if batch > 1 else "") + f"M={m} N={n} K={k}"
    extra = " + bias" if bias is not None else ""
    basis = f"estimate: gemm {dims} {a.short}{extra} from {op} input shapes{c_note}"
    return Estimate(float(total), float(flops), basis, _peak_key(a.dtype, kernel_name))


# ------------------------------------------------------------------------------------------ attention
ATTENTION_FWD = frozenset(attn.FORWARD_OPS)
ATTENTION_BWD = frozenset(attn.BACKWARD_OPS)


def attention(op: str, args: list[Arg | None], kernel_name: str, concrete=None) -> Estimate:
    """SDPA / flash / memory-efficient / cuDNN attention (analyzer.ops.attention reads the call): bytes Q + K + V
    (+ mask) + O + logsumexp, K/V at their own H_kv heads (GQA read once per KV head); FLOPs 4·B·H·S_q·S_k·D, halved
    when causal (backward 2.5×)."""
    a = attn.attention_problem(op, args, concrete, kernel_name)
    if a is None:
        return unknown(f"{op}: q, k, v are not 4-D tensors")
    total, what = attn.attention_bytes(a, args, lambda d: DTYPE_BYTES[d])
    flops = attn.backward_flops(a) if a.backward else a.forward_flops
    causal = f"causal from the {a.causal_from}, FLOPs halved" if a.causal else a.label().rsplit(", ", 1)[1]
    basis = (
        f"estimate: attention{' backward' if a.backward else ''} {a.label().rsplit(', ', 1)[0]} "
        f"{SHORT.get(a.dtype, a.dtype)} ({what}; {causal}) from {op}"
    )
    return Estimate(total, flops, basis, _peak_key(a.dtype, kernel_name))


# --------------------------------------------------------------------------------------- elementwise
COPY_OPS = frozenset(["aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"])
FILL_OPS = frozenset(
    ["aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_", "aten::bernoulli_", "aten::random_"]
)
CLONE_OPS = frozenset(["aten::clone", "aten::contiguous"])
_BOOL_OUT = frozenset(
    [
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_not",
        "logical_xor",
        "isnan",
        "isinf",
        "isfinite",
        "isin",
    ]
)


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        dims = {s[len(s) - nd + i] for s in shapes if len(s) - nd + i >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(shapes)
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _result_dtype(tensors: list[Arg]) -> str:
    """PyTorch type promotion, simplified: dimensioned tensors decide; a 0-dim tensor only lifts the kind."""
    dimmed = [t for t in tensors if t.shape] or tensors
    kind = max(_kind(t.dtype) for t in dimmed)
    zero_kind = max((_kind(t.dtype) for t in tensors if not t.shape), default=-1)
    if zero_kind > kind:
        return {1: "long int", 2: "float"}.get(zero_kind, "c10::complex<float>")
    same = [t.dtype for t in dimmed if _kind(t.dtype) == kind]
    if {"c10::Half", "c10::BFloat16"} <= set(same):
        return "float"
    return max(same, key=lambda d: DTYPE_BYTES[d])


def _kind(dtype: str) -> int:
    return _KIND.get(dtype, 2 if dtype in _FLOAT or "Float8" in dtype else 1)


def elementwise(op: str, args: list[Arg | None], ops: str) -> Estimate:
    t = [a for a in args if a is not None]
    if not t:
        return unknown(f"{op} has no tensor inputs")
    if op in COPY_OPS and len(t) >= 2:
        dst, src = t[0], t[1]
        total = src.nbytes + dst.numel * DTYPE_BYTES[dst.dtype]
        return Estimate(
            float(total),
            0.0,
            f"estimate: copy {_shape(src)} {src.short} → {dst.short} (read src + write dst) from {op}",
        )
    if op in FILL_OPS:
        self_ = t[0]
        return Estimate(
            float(self_.nbytes), 0.0, f"estimate: fill {_shape(self_)} {self_.short} (write only) from {op}"
        )
    if op in CLONE_OPS:
        src = t[0]
        return Estimate(
            float(src.nbytes + src.numel * DTYPE_BYTES[src.dtype]),
            0.0,
            f"estimate: copy {_shape(src)} {src.short} from {op}",
        )
    try:
        out_shape = _broadcast(*(x.shape for x in t))
    except ValueError:
        return unknown(f"{op} input shapes {[x.shape for x in t]} do not broadcast")
    base = op.split("::")[-1].rstrip("_")
    in_place = op.endswith("_") and not op.endswith("__")
    if in_place:
        out_dtype, out_numel = t[0].dtype, t[0].numel
    else:
        out_dtype = "bool" if base in _BOOL_OUT else _result_dtype(t)
        out_numel = math.prod(out_shape)
    in_bytes = sum(x.nbytes for x in t)
    out_bytes = out_numel * DTYPE_BYTES[out_dtype]
    n_ops = max(1, len([o for o in ops.split("+") if o])) if ops else 1
    flops = float(out_numel * n_ops)  # nominal: one op per output element per decoded op (memory-bound kernels)
    ins = " + ".join(f"{_shape(x)} {x.short}" for x in t)
    how = (
        "in-place: inputs + write self"
        if in_place
        else f"inputs + output {_shape_t(out_shape)} {SHORT.get(out_dtype, out_dtype)}"
    )
    return Estimate(
        float(in_bytes + out_bytes), flops, f"estimate: pointwise {ins} ({how}; stride-0 dims read once) from {op}"
    )


def _shape(a: Arg) -> str:
    return _shape_t(a.shape)


def _shape_t(s) -> str:
    return "[" + ",".join(str(x) for x in s) + "]"


# ------------------------------------------------------------------------- normalization / reduction
NORM_OPS = frozenset(
    [
        "aten::layer_norm",
        "aten::native_layer_norm",
        "aten::rms_norm",
        "aten::_fused_rms_norm",
        "aten::group_norm",
        "aten::native_group_norm",
        "aten::batch_norm",
        "aten::native_batch_norm",
        "aten::_batch_norm_impl_index",
        "aten::cudnn_batch_norm",
        "aten::miopen_batch_norm",
        "aten::instance_norm",
        "aten::_softmax",
        "aten::softmax",
        "aten::_log_softmax",
        "aten::log_softmax",
        "aten::_native_batch_norm_legit",
        "aten::_native_batch_norm_legit_no_training",
    ]
)
NORM_BWD_OPS = frozenset(
    [
        "aten::native_layer_norm_backward",
        "aten::_fused_rms_norm_backward",
        "aten::native_group_norm_backward",
        "aten::native_batch_norm_backward",
        "aten::cudnn_batch_norm_backward",
        "aten::miopen_batch_norm_backward",
        "aten::_softmax_backward_data",
        "aten::_log_softmax_backward_data",
    ]
)
REDUCE_OPS = frozenset(
    [
        "aten::sum",
        "aten::mean",
        "aten::amax",
        "aten::amin",
        "aten::max",
        "aten::min",
        "aten::argmax",
        "aten::argmin",
        "aten::norm",
        "aten::linalg_vector_norm",
        "aten::var",
        "aten::std",
        "aten::var_mean",
        "aten::std_mean",
        "aten::prod",
        "aten::all",
        "aten::any",
        "aten::logsumexp",
        "aten::nll_loss_forward",
        "aten::nll_loss2d_forward",
        "aten::mse_loss",
        "aten::l1_loss",
        "aten::binary_cross_entropy_with_logits",
        "aten::count_nonzero",
    ]
)
SCAN_OPS = frozenset(["aten::cumsum", "aten::cumprod", "aten::logcumsumexp"])


def normalization(op: str, args: list[Arg | None]) -> Estimate:
    t = [a for a in args if a is not None]
    if not t:
        return unknown(f"{op} has no tensor inputs")
    x = t[0]
    grad = op in NORM_BWD_OPS
    out = x.numel * DTYPE_BYTES[x.dtype]
    total = sum(a.nbytes for a in t) + out
    what = "inputs + grad_input (weight/bias grads not counted)" if grad else "input + weight/bias + output"
    return Estimate(
        float(total), float(5 * x.numel), f"estimate: normalization {_shape(x)} {x.short} ({what}) from {op}"
    )


def reduction(op: str, args: list[Arg | None]) -> Estimate:
    t = [a for a in args if a is not None]
    if not t:
        return unknown(f"{op} has no tensor inputs")
    x = t[0]
    total = sum(a.nbytes for a in t)
    if op in SCAN_OPS:
        total += x.numel * DTYPE_BYTES[x.dtype]
        return Estimate(
            float(total), float(x.numel), f"estimate: scan {_shape(x)} {x.short} (input + same-size output) from {op}"
        )
    return Estimate(
        float(total),
        float(x.numel),
        f"estimate: reduction {_shape(x)} {x.short} (reads; the reduced output is not recorded, not counted) from {op}",
    )


def embedding(op: str, args: list[Arg | None]) -> Estimate:
    t = [a for a in args if a is not None]
    if len(t) < 2 or len(t[0].shape) != 2:
        return unknown(f"{op}: expected weight [V, D] and indices")
    w, idx = t[0], t[1]
    rows = idx.numel * w.shape[1] * DTYPE_BYTES[w.dtype]
    return Estimate(
        float(idx.nbytes + 2 * rows),
        0.0,
        f"estimate: embedding gather {idx.numel} rows × {w.shape[1]} {w.short} (indices + rows read + output) from {op}",
    )


# -------------------------------------------------------------------------------- Triton launchers
# Ops that compute from tensor data and whose result Inductor must store: a pointwise kernel made only of these
# reads a tensor and writes one. Generators (full, arange, rand …), copies, indexing and asserts are not here.
# fmt: off
_DATA_OPS = frozenset([
    "abs", "add", "sub", "mul", "div", "neg", "exp", "exp2", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "pow",
    "reciprocal", "square", "sigmoid", "tanh", "relu", "gelu", "silu", "mish", "hardswish", "hardsigmoid",
    "hardtanh", "leaky_relu", "elu", "softplus", "erf", "sin", "cos", "clamp", "clamp_min", "clamp_max", "maximum",
    "minimum", "sign", "floor", "ceil", "round", "trunc", "gelu_backward", "silu_backward", "sigmoid_backward",
    "tanh_backward", "threshold_backward",
])
# fmt: on


def _in_place_inductor(name: str, ops: str, t: list[Arg]) -> bool:
    """An Inductor pointwise kernel with ONE tensor arg whose decoded ops all compute from tensor data.

    By construction that arg is read and written: Inductor passes a kernel every buffer it loads or stores (the
    trailing scalars are xnumel/rnumel); every kernel stores a result, and the only buffer is this one; its ops
    need tensor data, and the only buffer to load it from is this one. So it is an in_out_ptr (plain MLP
    torch.compile: triton_poi_fused_gelu_view_0 applies GELU in place on the addmm output). With two or more
    args no such argument exists: gelu(a)·b written over a (in_out_ptr0, in_ptr0) and gelu(a)·a written to a new
    buffer (in_ptr0, out_ptr0) record the same names, shapes and xnumel, so those stay a lower bound.
    """
    parts = [o for o in ops.split("+") if o]
    return name.startswith("triton_poi_") and len(t) == 1 and bool(parts) and all(o in _DATA_OPS for o in parts)


def triton_args(name: str, category: str, ops: str, args: list[Arg | None], op: str) -> Estimate:
    """Inductor (and Inductor-launched user) Triton kernels: the launching cpu_op carries the kernel's args.

    bytes = every tensor arg once. An Inductor in_out_ptr (an input buffer reused for the output) is read AND
    written, so for such kernels this is low by that buffer's size; the trace does not say which arg it is,
    except for a one-arg pointwise kernel (_in_place_inductor), which is counted read + write.
    """
    t = [a for a in args if a is not None]
    if not t:
        return unknown(f"Triton kernel {op} recorded no tensor args")
    total = sum(a.nbytes for a in t)
    parts = " + ".join(f"{_shape(a)} {a.short}" for a in t)
    note = (
        "each tensor arg once: a lower bound where Inductor reused an input buffer for the output (in_out_ptr), "
        "which the trace does not mark"
    )
    if _in_place_inductor(name, ops, t):
        total = 2 * t[0].nbytes
        note = "its only tensor arg is read and written in place: one buffer, and ops that need data"
    flops = _NAN
    peak = None
    if category == "gemm":
        two_d = [a for a in t if len(a.shape) == 2]
        pair = next(((x, y) for i, x in enumerate(two_d) for y in two_d[i + 1 :] if x.shape[1] == y.shape[0]), None)
        if pair:
            (m, k), n = pair[0].shape, pair[1].shape[1]
            flops = 2.0 * m * n * k
            peak = _peak_key(pair[0].dtype, name)
            note += f"; FLOPs 2·M·N·K with M={m} N={n} K={k} from the first [M,K]·[K,N] arg pair"
    elif category in ("pointwise", "reduction", "normalization"):
        xnumel = max(a.numel for a in t)
        flops = float(xnumel * max(1, len(ops.split("+")) if ops else 1))  # nominal, like ATen pointwise
    return Estimate(float(total), flops, f"estimate: triton args {parts} ({note}) from cpu_op {op}", peak)


def custom_op_args(op: str, args: list[Arg | None]) -> Estimate:
    t = [a for a in args if a is not None]
    if not t:
        return unknown(f"{op} has no tensor inputs")
    total = sum(a.nbytes for a in t)
    parts = " + ".join(f"{_shape(a)} {a.short}" for a in t)
    return Estimate(
        float(total),
        _NAN,
        f"estimate: {parts} (each tensor arg once; outputs returned rather than passed are not counted) from custom op {op}",
    )


def concat(op: str, dims, types, kernel_name: str) -> Estimate:
    """cat/stack: inputs read + the same bytes written. 'TensorList' has no per-tensor dtype, but ATen's
    CatArrayBatchedCopy<T or OpaqueType<N>> kernel names the element size."""
    lists = [d for d, t in zip(dims or [], types or [], strict=False) if t == "TensorList" and isinstance(d, list)]
    shapes = [s for d in lists for s in d if isinstance(s, list) and all(isinstance(x, int) for x in s)]
    m = re.search(
        r"CatArrayBatchedCopy\w*<(?:at::native::\(anonymous namespace\)::)?(?:OpaqueType<(\d+)u?>|([\w:]+))",
        kernel_name,
    )
    size = (int(m.group(1)) if m.group(1) else _CAT_TYPES.get(m.group(2))) if m else None
    if not shapes or size is None:
        return unknown(f"{op}: tensor-list shapes or element size not recorded")
    elems = sum(math.prod(s) for s in shapes)
    return Estimate(
        float(2 * elems * size),
        0.0,
        f"estimate: concat {len(shapes)} tensors, {elems:,} elements × {size} B (read + write; element size from the kernel name) from {op}",
    )


_CAT_TYPES = {
    "float": 4,
    "double": 8,
    "long": 8,
    "int": 4,
    "c10::BFloat16": 2,
    "c10::Half": 2,
    "bool": 1,
    "unsigned char": 1,
}
# aten ops that launch TensorIterator-style kernels but are not elementwise over broadcast inputs
_NOT_ELEMENTWISE = re.compile(
    r"conv|pool|mm|linear|cat|stack|index|gather|scatter|embedding|sort|topk|nonzero|unique|unfold|pad|repeat|roll|flip"
    r"|interpolate|upsample|grid_sample|nll|cross_entropy|ctc|lstm|gru|rnn|arange|linspace|tril|triu|diag|cumsum|one_hot"
    r"|bucketize|searchsorted|multinomial|histc|bincount|_foreach|slice_backward|select_backward|masked_select"
)


# ------------------------------------------------------------------------------------- FuseLens ops
# Our Triton kernels run inside torch.library custom ops (kernels/models/custom_ops.py, docs/KERNELS.md), so their launching op
# records the tensors; the trailing activation string is a non-tensor arg ('[]' in Input Dims, value not recorded).
FUSELENS_OPS = frozenset(["fuselens::glu_gating", "fuselens::dual_gemm_glu", "fuselens::gemm_bias_act"])


def _arg(args: list[Arg | None], i: int) -> Arg | None:
    return args[i] if i < len(args) else None


def fuselens(op: str, args: list[Arg | None], kernel_name: str) -> Estimate:
    """The three fuselens:: ops. bytes = tensor inputs read once + the output written once (its shape and dtype
    follow from the inputs: out = x's dtype). GEMM FLOPs are the tensor-core work only (2·M·N·K per product; the
    bias add, activation and gate·up product in the epilogue are not counted)."""
    if op == "fuselens::glu_gating":
        gate, up = _arg(args, 0), _arg(args, 1)
        if gate is None or up is None or gate.shape != up.shape:
            return unknown(f"{op}: expected gate and up tensors of one shape")
        # fused_gating runs .contiguous() first (a copy kernel of its own if needed): the kernel reads every element
        n = gate.numel
        read = n * (DTYPE_BYTES[gate.dtype] + DTYPE_BYTES[up.dtype])
        out = n * DTYPE_BYTES[gate.dtype]
        return Estimate(
            float(read + out),
            float(2 * n),  # nominal, like any pointwise kernel: act + mul per output element
            f"estimate: gating act·mul {_shape(gate)} {gate.short} (read gate + up, write out {_shape(gate)}) "
            f"from {op} input shapes",
        )
    gemm2 = op == "fuselens::dual_gemm_glu"
    x, w = _arg(args, 0), _arg(args, 1)
    second = _arg(args, 2)  # dual: w_up [N, K]; gemm_bias_act: bias [N] or None (undefined: not a tensor)
    if x is None or w is None or len(x.shape) < 2 or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        return unknown(f"{op}: expected x [M, K] and a weight [N, K]")
    m, k, n = math.prod(x.shape[:-1]), x.shape[-1], w.shape[0]
    if gemm2 and (second is None or second.shape != w.shape):
        return unknown(f"{op}: expected w_gate and w_up of one shape [N, K]")
    if not gemm2 and second is not None and second.numel != n:
        return unknown(f"{op}: bias {_shape(second)} does not match N={n}")
    out = m * n * DTYPE_BYTES[x.dtype]
    extra = second.nbytes if second is not None else 0
    total = x.nbytes + w.nbytes + extra + out
    if gemm2:
        flops = 2 * (2.0 * m * n * k)
        what = f"2 GEMMs (gate, up) M={m} N={n} K={k} {x.short} + act·mul epilogue (x + w_gate + w_up + out [M,N])"
    else:
        flops = 2.0 * m * n * k
        bias = " + bias" if second is not None else ""
        what = f"gemm M={m} N={n} K={k} {x.short}{bias} + act epilogue (x + weight{bias} + out [M,N])"
    return Estimate(float(total), flops, f"estimate: {what} from {op} input shapes", _peak_key(x.dtype, kernel_name))


# ------------------------------------------------------------------------------------------ dispatch
_AUTOGRAD_FUNCTION = re.compile(r"^[A-Z][A-Za-z0-9_]*(?<!Backward)(?<!Backward\d)$")
_INDEX_OPS = frozenset(
    ["index", "index_put", "gather", "scatter", "scatter_add", "embedding", "cat", "index_copy", "index_add"]
)
_HELPER_OPS = frozenset(["splitk_reduce", "scal", "epilogue", "conv_setup", "copy", "fill"])


def is_helper(ops) -> np.ndarray:
    """Per kernel: does it set up or clean up for its op call's main kernel (split-K reduce, layout copies)?"""
    return np.isin(np.asarray(ops, dtype=object), list(_HELPER_OPS))


def estimate_kernel(
    *,
    name: str,
    category: str,
    ops: str,
    op_name: str,
    dims,
    types,
    strides,
    shapes_known: bool,
    graph_replay: bool,
    has_launch: bool = True,
    concrete=None,
) -> Estimate:
    op = op_name or ""
    if category == "communication":
        return unknown("communication kernel (network/NVLink bytes are not modelled)")
    if not shapes_known or dims is None:
        if graph_replay:
            return unknown("CUDA-graph replay: kernels carry no per-kernel shapes")
        if not op and not has_launch:
            return unknown("no runtime launch in the trace for this kernel (launched before the profiled window?)")
        if not op:
            return unknown("launched outside any op that records shapes (e.g. a user Triton kernel)")
        return unknown(f"launching op {op} recorded no Input Dims (record_shapes off?)")
    try:
        args = tensor_args(dims, types, strides)
    except UnknownDtype as err:
        return unknown(f"input type {err.args[0]!r} of {op} has no element size in the dtype table")
    if op == name or (op.startswith("triton_") and name.startswith("triton")):
        return triton_args(name, category, ops, args, op)
    if op in FUSELENS_OPS:
        return fuselens(op, args, name)
    if op in GEMM_OPS:
        return gemm(op, args, name)
    if op in ATTENTION_FWD or op in ATTENTION_BWD:
        return attention(op, args, name, concrete)
    if op in NORM_OPS or op in NORM_BWD_OPS:
        return normalization(op, args)
    if op in REDUCE_OPS or op in SCAN_OPS:
        return reduction(op, args)
    if op == "aten::embedding":
        return embedding(op, args)
    if op in ("aten::cat", "aten::_cat", "aten::stack"):
        return concat(op, dims, types, name)
    if op.startswith("aten::"):
        if category == "pointwise" and not (set(ops.split("+")) & _INDEX_OPS) and not _NOT_ELEMENTWISE.search(op):
            return elementwise(op, args, ops)
        if op in COPY_OPS or op in FILL_OPS or op in CLONE_OPS:
            return elementwise(op, args, ops)
        return unknown(f"no byte model for {op} ({category} kernel{', ops ' + ops if ops else ''})")
    if "::" in op and category in ("pointwise", "normalization", "reduction"):
        return custom_op_args(op, args)
    functional = _AUTOGRAD_FUNCTION.match(op) and not re.search("Compiled|Graph", op)  # not whole compiled graphs
    if functional and category == "pointwise" and not (set(ops.split("+")) & _INDEX_OPS):
        # a Python autograd.Function forward (e.g. LigerGELUMulFunction) records its tensor inputs; being
        # functional, its output is a new tensor of the inputs' broadcast shape (Backward nodes record only
        # grad_outputs, so they stay unknown)
        est = elementwise(op, args, ops)
        return Estimate(
            est.bytes, est.flops, est.basis.replace(f"from {op}", f"from autograd.Function {op}"), est.peak_key
        )
    return unknown(f"no byte model for {category} kernels under {op or 'no op'}")
