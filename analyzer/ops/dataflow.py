"""What one kernel computes, for the fusion diff: its op set, its GEMM problem (M, N, K, dtype) and its tensors.

Everything here reads the launching CPU op (name, 'Input Dims', 'Input type') or the kernel's name; nothing here
touches DataFrames, so each function can be tested on single real trace events.

Op sets are canonical aten-style names ('mm', 'add', 'gelu', 'gelu_backward', 'copy', …): an eager kernel's come
from its op ('aten::gelu' -> {'gelu'}), an Inductor kernel's from its name ('triton_poi_fused__unsafe_view_gelu_mul_0'
-> {'gelu', 'mul'}), anything else's from words in its name or launching op / autograd function
('LigerGELUMulFunction' -> {'gelu', 'mul'}, '_dual_gemm_kernel' -> {'mm'}). Views never launch a kernel, so they are
dropped from every set.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

# --- dtypes -----------------------------------------------------------------------------------------------------

# Kineto's 'Input type' strings (c10 scalar type names) -> (short name, bytes per element).
_DTYPES: dict[str, tuple[str, int]] = {
    "c10::BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8_e4m3", 1),
    "c10::Float8_e5m2": ("fp8_e5m2", 1),
    "c10::Float8_e4m3fnuz": ("fp8_e4m3", 1),
    "c10::Float8_e5m2fnuz": ("fp8_e5m2", 1),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "short": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4),
}
# Type promotion among the float types a pointwise op mixes (bf16 * fp16 -> fp32, like torch).
_FLOAT_RANK = {"fp8_e4m3": 0, "fp8_e5m2": 0, "bf16": 1, "fp16": 1, "fp32": 2, "fp64": 3}
ITEMSIZE = {short: size for short, size in _DTYPES.values()}


def dtype_short(type_name: str | None) -> str | None:
    """'c10::BFloat16' -> 'bf16'; None for non-tensor arguments ('Scalar', 'ScalarList', '', 'TensorList')."""
    hit = _DTYPES.get(type_name or "")
    return hit[0] if hit else None


def _promote(dtypes: list[str]) -> str | None:
    if not dtypes:
        return None
    if len(set(dtypes)) == 1:
        return dtypes[0]
    floats = [d for d in dtypes if d in _FLOAT_RANK]
    if not floats:
        return None  # int/bool mixes: the result dtype depends on values we do not see
    top = max(_FLOAT_RANK[d] for d in floats)
    tops = {d for d in floats if _FLOAT_RANK[d] == top}
    if len(tops) > 1:  # bf16 with fp16 promotes to fp32
        return "fp32"
    return tops.pop()


# --- tensors ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str | None  # short name; None when unknown

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> float:
        """Bytes of one copy in HBM (NaN when the dtype is unknown)."""
        size = ITEMSIZE.get(self.dtype or "")
        return float(self.numel * size) if size else float("nan")

    def matrix(self) -> str:
        """'8192×3072': rows (all leading dims) × last dim, how a GEMM sees it."""
        if len(self.shape) < 2:
            return "×".join(str(s) for s in self.shape) or "scalar"
        return f"{math.prod(self.shape[:-1])}×{self.shape[-1]}"


def tensor_args(dims, types) -> list[Tensor | None]:
    """One entry per op argument: a Tensor for a tensor argument with at least one dim, else None.

    0-dim tensors (dims []) are treated as scalars: one element is noise next to the activations we track.
    """
    if not isinstance(dims, (list, tuple)):
        return []
    types = list(types) if isinstance(types, (list, tuple)) else []
    out: list[Tensor | None] = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        short = dtype_short(t)
        if short is None or not isinstance(d, (list, tuple)) or not d:
            out.append(None)
            continue
        try:
            shape = tuple(int(x) for x in d)
        except (TypeError, ValueError):
            out.append(None)
            continue
        if any(x < 0 for x in shape):
            out.append(None)
            continue
        out.append(Tensor(shape, short))
    return out


# --- op names -----------------------------------------------------------------------------------------------------

# Never launch a kernel: dropped from every op set.
VIEW_OPS = frozenset(
    [
        "_unsafe_view",
        "view",
        "reshape",
        "t",
        "permute",
        "transpose",
        "expand",
        "expand_as",
        "squeeze",
        "unsqueeze",
        "as_strided",
        "alias",
        "detach",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unbind",
        "unflatten",
        "flatten",
        "narrow",
        "view_as",
        "_reshape_alias",
        "numpy_t",
    ]
)
# aten name -> canonical ops. Missing names map to themselves.
_ALIASES: dict[str, tuple[str, ...]] = {
    "addmm": ("mm", "add"),
    "_addmm_activation": ("mm", "add"),
    "baddbmm": ("mm", "add"),
    "addbmm": ("mm", "add"),
    "bmm": ("mm",),
    "matmul": ("mm",),
    "linear": ("mm",),
    "_scaled_mm": ("mm",),
    "_int_mm": ("mm",),
    "clone": ("copy",),
    "contiguous": ("copy",),
    "_to_copy": ("copy",),
    "to": ("copy",),
    "copy": ("copy",),
    "native_layer_norm": ("layer_norm",),
    "native_layer_norm_backward": ("layer_norm_backward",),
    "_fused_rms_norm": ("rms_norm",),
    "_softmax": ("softmax",),
    "_log_softmax": ("log_softmax",),
    "_softmax_backward_data": ("softmax_backward",),
    "_log_softmax_backward_data": ("log_softmax_backward",),
    "native_dropout": ("dropout",),
    "native_dropout_backward": ("dropout_backward",),
    "_native_batch_norm_legit": ("batch_norm",),
    "_native_batch_norm_legit_functional": ("batch_norm",),
    "_native_batch_norm_legit_no_training": ("batch_norm",),
    "native_batch_norm": ("batch_norm",),
    "cudnn_batch_norm": ("batch_norm",),
    "native_batch_norm_backward": ("batch_norm_backward",),
    "cudnn_batch_norm_backward": ("batch_norm_backward",),
    "cudnn_convolution": ("convolution",),
    "_convolution": ("convolution",),
    "conv2d": ("convolution",),
    "conv1d": ("convolution",),
    "rsub": ("sub",),
    "true_divide": ("div",),
    "multiply": ("mul",),
    "sigmoid": ("sigmoid",),
    "fill": ("fill",),
    "zero": ("fill",),
    "zeros": ("fill",),
    "zeros_like": ("fill",),
    "ones_like": ("fill",),
    "full": ("fill",),
    "full_like": ("fill",),
    "new_zeros": ("fill",),
    # words the classifier uses for FuseLens kernels ('_gemm_act_kernel' -> mm+bias+act)
    "bias": ("add",),
    "act": ("gelu", "silu", "relu", "sigmoid", "tanh"),  # 'an activation': any of them
}
GEMM_OPS = frozenset(
    ["mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_scaled_mm", "_int_mm"]
)
# Ops whose output has the broadcast shape of their tensor inputs (what we need to follow a tensor between kernels).
POINTWISE_OPS = frozenset(
    [
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "abs",
        "exp",
        "exp2",
        "log",
        "log1p",
        "expm1",
        "sqrt",
        "rsqrt",
        "pow",
        "reciprocal",
        "sigmoid",
        "tanh",
        "relu",
        "gelu",
        "silu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "hardtanh",
        "leaky_relu",
        "elu",
        "softplus",
        "erf",
        "sin",
        "cos",
        "where",
        "masked_fill",
        "clamp",
        "clamp_min",
        "clamp_max",
        "maximum",
        "minimum",
        "lerp",
        "addcmul",
        "addcdiv",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "threshold_backward",
        "hardswish_backward",
        "fill",
        "copy",
        "dropout",
        "dropout_backward",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_not",
        "logical_and",
        "logical_or",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "sign",
        "round",
        "floor",
        "ceil",
        "trunc",
        "square",
        "fmod",
        "remainder",
    ]
)
# Output shape = first tensor input's (normalisations, softmax): follows the activation through the op.
SAME_AS_FIRST_OPS = frozenset(
    [
        "layer_norm",
        "rms_norm",
        "batch_norm",
        "group_norm",
        "softmax",
        "log_softmax",
        "layer_norm_backward",
        "softmax_backward",
        "log_softmax_backward",
        "cumsum",
    ]
)

_COMPARISONS = frozenset(["eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or"])
_CASTS = frozenset(["to", "_to_copy", "type_as"])

_NS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::")


def canonical_ops(op_name: str) -> frozenset[str]:
    """'aten::mul_' -> {'mul'}; 'aten::addmm' -> {'mm', 'add'}; 'aten::view' -> {} (views launch nothing)."""
    if not op_name:
        return frozenset()
    base = _NS.sub("", op_name.strip()).split(".")[0]
    if not base or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base):
        return frozenset()
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]  # in place: mul_ computes what mul does
    if base.endswith("_") and base.startswith("_") and base.count("_") > 1:
        base = base[:-1]  # _foreach_add_ -> _foreach_add
    if base in VIEW_OPS:
        return frozenset()
    return frozenset(_ALIASES.get(base, (base,)))


def is_gemm_op(op_name: str) -> bool:
    return _NS.sub("", (op_name or "").strip()).split(".")[0].rstrip("_") in GEMM_OPS


# --- Inductor kernel names ----------------------------------------------------------------------------------------

_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem|for|spl|mm|bmm)_(?:fused_)?(?P<ops>.*?)(?:_\d+)*$")
# SDPA ops Inductor names in a pointwise kernel that prepares their input (RoPE + layout copy for cuDNN): not work the
# kernel does, so no op of its set
ATTENTION_WORDS = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "scaled_dot_product_attention",
)
# Multi-word aten names Inductor writes into kernel names ('_'-joined, so they cannot be split at '_' blindly).
_MULTIWORD = sorted(
    {
        "_unsafe_view",
        "_unsafe_index",
        "_unsafe_index_put",
        "_to_copy",
        "_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
        "_native_batch_norm_legit_functional",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit",
        "native_batch_norm_backward",
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_dropout",
        "native_dropout_backward",
        "_fused_rms_norm",
        "rms_norm",
        "layer_norm",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "threshold_backward",
        "hardswish_backward",
        "var_mean",
        "clamp_min",
        "clamp_max",
        "constant_pad_nd",
        "index_put",
        "index_select",
        "index_add",
        "scatter_add",
        "scatter_reduce",
        "select_scatter",
        "slice_scatter",
        "as_strided",
        "as_strided_scatter",
        "masked_fill",
        "split_with_sizes",
        "embedding_dense_backward",
        "nll_loss_forward",
        "nll_loss_backward",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "convolution_backward",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "logical_not",
        "logical_and",
        "logical_or",
        "full_like",
        "zeros_like",
        "ones_like",
        "empty_like",
        "new_zeros",
        "new_empty",
        "_addmm_activation",
        "leaky_relu",
        "_scaled_mm",
        *ATTENTION_WORDS,
    },
    key=len,
    reverse=True,
)


def is_inductor_name(name: str) -> bool:
    return bool(_INDUCTOR.match(name or ""))


@lru_cache(maxsize=4096)
def inductor_ops(name: str) -> frozenset[str]:
    """Ops an Inductor kernel name lists: 'triton_poi_fused__unsafe_view_gelu_mul_0' -> {'gelu', 'mul'};
    'triton_tem_fused_addmm_gelu_0' -> {'mm', 'add', 'gelu'}. Empty for any other name."""
    m = _INDUCTOR.match(name or "")
    if not m:
        return frozenset()
    rest = m.group("ops")
    kind = m.group(1)
    found: list[str] = []
    if kind in ("mm", "bmm"):
        found.append("mm")
    while rest:
        hit = next((w for w in _MULTIWORD if rest.startswith(w) and (len(rest) == len(w) or rest[len(w)] == "_")), None)
        if hit is not None:
            found.append(hit)
            rest = rest[len(hit) :]
        elif rest.startswith("_"):
            rest = rest[1:]  # the '_' between two names
        else:
            word, _, rest = rest.partition("_")
            found.append(word)
    ops: set[str] = set()
    for w in found:
        if kind in ("poi", "red", "per") and w in ATTENTION_WORDS:
            continue
        ops |= canonical_ops(w)
    return frozenset(ops)


# --- free text: kernel names, autograd functions, record_function ranges ------------------------------------------

# Words (lower-cased, after splitting CamelCase and '_') that name ops. Only these words count: 'kernel', 'forward',
# 'fused', 'dual', 'liger' say nothing about what is computed.
_WORD_OPS: dict[str, tuple[str, ...]] = {
    "geglu": ("gelu", "mul"),
    "swiglu": ("silu", "mul"),
    "reglu": ("relu", "mul"),
    "gelu": ("gelu",),
    "silu": ("silu",),
    "swish": ("silu",),
    "relu": ("relu",),
    "sigmoid": ("sigmoid",),
    "tanh": ("tanh",),
    "mul": ("mul",),
    "add": ("add",),
    "bias": ("add",),
    "residual": ("add",),
    "gemm": ("mm",),
    "matmul": ("mm",),
    "mm": ("mm",),
    "linear": ("mm",),
    "addmm": ("mm", "add"),
    "bmm": ("mm",),
    "layernorm": ("layer_norm",),
    "rmsnorm": ("rms_norm",),
    "softmax": ("softmax",),
    "dropout": ("dropout",),
}
_ACTIVATIONS = ("gelu", "silu", "relu", "sigmoid", "tanh", "softmax", "layer_norm", "rms_norm", "dropout")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@lru_cache(maxsize=4096)
def text_ops(text: str) -> frozenset[str]:
    """Ops named by words in free text: 'LigerGELUMulFunction' -> {'gelu', 'mul'}; '_geglu_tanh_backward_kernel' ->
    {'gelu', 'mul', 'tanh', 'gelu_backward', …} (a backward kernel computes the activations' backward ops too)."""
    if not text:
        return frozenset()
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub("_", text)) if w]
    joined = "".join(words)
    ops: set[str] = set()
    for w in words:
        ops.update(_WORD_OPS.get(w, ()))
    for fused_word in ("layernorm", "rmsnorm", "geglu", "swiglu"):  # 'LayerNorm' splits into 'layer', 'norm'
        if fused_word in joined:
            ops.update(_WORD_OPS[fused_word])
    if "backward" in words or "bwd" in words:
        ops |= {f"{op}_backward" for op in ops if op in _ACTIVATIONS}
    return frozenset(ops)


# --- GEMM problems ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gemm:
    m: int
    n: int
    k: int
    dtype: str | None
    batch: int = 1

    @property
    def key(self) -> tuple:
        return ("gemm", self.batch, self.m, self.n, self.k, self.dtype)

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    def label(self) -> str:
        b = f"{self.batch}× " if self.batch != 1 else ""
        return f"{b}M={self.m} N={self.n} K={self.k} {self.dtype or '?'}"


def gemm_problem(op_name: str, dims, types) -> Gemm | None:
    """(M, N, K, dtype) of the GEMM an op runs, from its input shapes; None when the op is not a GEMM we can read.

    aten::mm [[M,K],[K,N](,out)]; aten::addmm [bias,[M,K],[K,N]]; aten::bmm [[B,M,K],[B,K,N]];
    aten::linear [[…,K],[N,K](,bias)]; aten::matmul [[…,M,K],[K,N]]. Inductor templates ('triton_tem_fused_…mm…')
    list their buffers in an order we do not know, so the first [M,K]·[K,N] pair among them is taken.
    """
    base = _NS.sub("", (op_name or "").strip()).split(".")[0].rstrip("_")
    ts = [t for t in tensor_args(dims, types) if t is not None]
    if base in ("mm", "_scaled_mm", "_int_mm") and len(ts) >= 2:
        return _mk(ts[0], ts[1])
    if base in ("addmm", "_addmm_activation") and len(ts) >= 3:
        return _mk(ts[1], ts[2])
    if base in ("bmm",) and len(ts) >= 2:
        return _mk_batched(ts[0], ts[1])
    if base in ("baddbmm", "addbmm") and len(ts) >= 3:
        return _mk_batched(ts[1], ts[2])
    if base == "linear" and len(ts) >= 2:
        x, w = ts[0], ts[1]
        if len(w.shape) == 2 and x.shape and x.shape[-1] == w.shape[1]:
            return Gemm(math.prod(x.shape[:-1]), w.shape[0], w.shape[1], x.dtype)
        return None
    if base == "matmul" and len(ts) >= 2:
        a, b = ts[0], ts[1]
        if len(b.shape) == 2 and len(a.shape) >= 2 and a.shape[-1] == b.shape[0]:
            return Gemm(math.prod(a.shape[:-1]), b.shape[1], b.shape[0], a.dtype)
        if len(a.shape) == 3 and len(b.shape) == 3:
            return _mk_batched(a, b)
        return None
    if is_inductor_name(base) and "mm" in inductor_ops(base):
        two_d = [t for t in ts if len(t.shape) == 2]
        for i, a in enumerate(two_d):
            for b in two_d[i + 1 :]:
                if a.shape[1] == b.shape[0] and a.dtype == b.dtype:
                    return Gemm(a.shape[0], b.shape[1], a.shape[1], a.dtype)
    return None


def _mk(a: Tensor, b: Tensor) -> Gemm | None:
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        return None
    return Gemm(a.shape[0], b.shape[1], a.shape[1], a.dtype)


def _mk_batched(a: Tensor, b: Tensor) -> Gemm | None:
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[2] != b.shape[1] or a.shape[0] != b.shape[0]:
        return None
    return Gemm(a.shape[1], b.shape[2], a.shape[2], a.dtype, batch=a.shape[0])


# --- what a kernel reads and writes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorIO:
    inputs: tuple[Tensor, ...]  # tensors the kernel reads (as its op lists them)
    output: Tensor | None  # the tensor it writes; None when its shape cannot be told from the op
    fresh: tuple[Tensor, ...] | None = None  # inputs a recent kernel can have written (None: all of them)

    @property
    def linkable(self) -> tuple[Tensor, ...]:
        return self.inputs if self.fresh is None else self.fresh


def tensor_io(op_name: str, dims, types) -> TensorIO:
    """Inputs and output of the op that launched a kernel, from its recorded shapes.

    GEMMs write [M, N] (batched: [B, M, N]; linear/matmul keep the leading dims); pointwise ops write the broadcast
    shape of their inputs in the promoted dtype; norms/softmax write their first input's shape; copy_ writes its
    destination (first argument) and reads the source. Anything else: output None (unknown, never guessed).
    """
    args = tensor_args(dims, types)
    ts = [t for t in args if t is not None]
    base = _NS.sub("", (op_name or "").strip()).split(".")[0]
    inplace = base.endswith("_") and not base.startswith("_")
    base = base.rstrip("_") if inplace else base
    ops = canonical_ops(op_name)
    if not ts:
        return TensorIO((), None)
    if base in GEMM_OPS:
        g = gemm_problem(op_name, dims, types)
        if g is None:
            return TensorIO(tuple(ts), None)
        if base in ("linear", "matmul") and len(ts[0].shape) > 2 and g.batch == 1:
            shape = (*ts[0].shape[:-1], g.n)
        elif base in ("bmm", "baddbmm") or g.batch != 1:
            shape = (g.batch, g.m, g.n)
        else:
            shape = (g.m, g.n)
        n_in = {"mm": 2, "_scaled_mm": 2, "_int_mm": 2, "bmm": 2, "matmul": 2}.get(base, 3)
        return TensorIO(tuple(ts[:n_in]), Tensor(shape, g.dtype))
    if base == "copy" and len(ts) >= 2:  # copy_(dst, src): reads src, writes dst
        return TensorIO((ts[1],), ts[0])
    if base in _CASTS:  # the target dtype is an argument the trace does not type: size unknown, never guessed
        return TensorIO((ts[0],), Tensor(ts[0].shape, None))
    if base.endswith(("_backward", "_backward_data")):
        # grad_output first, then activations saved in the forward pass: only the gradient can come from a kernel
        # of this backward region (gelu_backward(grad, self) reads the forward gate output as `self`)
        out = ts[1] if len(ts) > 1 else ts[0]
        return TensorIO(tuple(ts), Tensor(out.shape, _promote([t.dtype for t in ts if t.dtype])), fresh=(ts[0],))
    if ops and ops <= SAME_AS_FIRST_OPS:
        return TensorIO(tuple(ts), ts[0])
    if ops and ops <= POINTWISE_OPS:
        if inplace:
            return TensorIO(tuple(ts), ts[0])
        try:
            shape = _broadcast([t.shape for t in ts])
        except ValueError:
            return TensorIO(tuple(ts), None)
        dtype = "bool" if ops <= _COMPARISONS else _promote([t.dtype for t in ts if t.dtype])
        return TensorIO(tuple(ts), Tensor(shape, dtype))
    return TensorIO(tuple(ts), None)


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(1, nd + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(reversed(out))


def dims_text(dims) -> str:
    """Input dims as compact text for tables: [[8192, 768], [768, 3072]] -> '[8192,768] [768,3072]'."""
    if not isinstance(dims, (list, tuple)):
        return ""
    parts = []
    for d in dims:
        if isinstance(d, (list, tuple)) and d:
            parts.append("[" + ",".join(str(x) for x in d) + "]")
    return " ".join(parts)
