"""The byte/FLOP formulas, one kernel (with its launching op's Input Dims / Input type / Input Strides) at a time.

analyzer.cost calls estimate_kernel once per unique (name, op, shapes) and maps the answer to every kernel.
Bytes are HBM traffic if nothing stays in cache: every input read once, every output written once. Where the
trace cannot tell (outputs of custom ops), the basis says so.

RULES is the ordered table of formulas (first row whose `when` holds wins), like analyzer.opinfo.classify.RULES.
Shapes, dtypes and GEMM problems come from analyzer.opinfo.tensors / dtypes / gemm; op names from analyzer.opinfo.names.
docs/COST_MODEL.md explains each rule and the checks against TraceLens's reference numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from analyzer.opinfo import attention as attn
from analyzer.opinfo import dtypes, names
from analyzer.opinfo import gemm as gemm_reader
from analyzer.opinfo.tensors import Tensor, UnknownDtype, broadcast, read_tensors, shape_text

_NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    bytes: float
    flops: float
    basis: str
    peak_key: str | None = None  # key into GpuSpec.tflops for % of peak FLOP/s ('bf16', 'tf32', …)


@dataclass(frozen=True)
class Call:
    """One kernel and the op call that launched it: what every rule reads."""

    name: str  # kernel name
    category: str
    ops: str  # classify's ops ('gelu+mul')
    op: str  # launching op ('aten::mm', 'triton_poi_fused_…', 'fuselens::dual_gemm_glu', '' for none)
    args: tuple[Tensor | None, ...]  # one entry per op argument (None: not a tensor)
    dims: object = None
    types: object = None
    concrete: object = None  # Concrete Inputs (values of scalar args: is_causal, …)

    @property
    def tensors(self) -> list[Tensor]:
        return [a for a in self.args if a is not None]

    @property
    def op_list(self) -> set[str]:
        return {o for o in self.ops.split("+") if o}


def unknown(why: str) -> Estimate:
    return Estimate(_NAN, _NAN, "unknown: " + why)


def _fmt(n: float) -> str:
    return f"{int(n):,}"


# ---------------------------------------------------------------------------------------------- GEMM
def gemm(c: Call) -> Estimate:
    g = gemm_reader.read(c.op, c.tensors)
    if isinstance(g, str):
        return unknown(g)
    return gemm_estimate(g, c.op, c.name)


def gemm_estimate(g: gemm_reader.Gemm, op: str, kernel_name: str) -> Estimate:
    """A + B (+ bias, its stored elements) + C (+ tensors read beside them, e.g. _scaled_mm's scales)."""
    base = names.op_base(op).rstrip("_")
    mn = g.out_batch * g.m * g.n
    if g.out is not None:
        c_bytes, c_note = g.out.bytes_of(mn), ""
    elif base == "_scaled_mm":
        c_bytes, c_note = _NAN, "; bytes unknown: _scaled_mm's output dtype is not recorded (no bf16/fp16 bias)"
    elif base == "_int_mm":
        c_bytes, c_note = float(mn * 4), ""  # int8 × int8 → int32
    else:
        c_bytes, c_note = g.a.bytes_of(mn), ""
    bias_bytes = g.bias.nbytes if g.bias is not None else 0
    extra = sum(x.nbytes for x in g.extra) if g.out is not None else 0  # scales, when the output is known
    total = g.a.nbytes + g.b.nbytes + bias_bytes + c_bytes + extra
    flops = g.flops + (mn if g.bias is not None else 0)  # + one add per output for the bias
    plus = " + bias" if g.bias is not None else ""
    basis = f"estimate: gemm {g.dims()} {g.a.short}{plus} from {op} input shapes{c_note}"
    return Estimate(float(total), float(flops), basis, dtypes.peak_key(g.a.dtype, kernel_name))


# ------------------------------------------------------------------------------------------ attention
ATTENTION_FWD = frozenset(attn.FORWARD_OPS)
ATTENTION_BWD = frozenset(attn.BACKWARD_OPS)


def attention(c: Call) -> Estimate:
    """SDPA / flash / memory-efficient / cuDNN attention (analyzer.opinfo.attention reads the call): bytes Q + K + V
    (+ mask) + O + logsumexp, K/V at their own H_kv heads (GQA read once per KV head); FLOPs 4·B·H·S_q·S_k·D, halved
    when causal (backward 2.5×)."""
    op = c.op
    a = attn.attention_problem(op, list(c.args), c.concrete, c.name)
    if a is None:
        return unknown(f"{op}: q, k, v are not 4-D tensors")
    total, what = attn.attention_bytes(a, list(c.args), lambda d: dtypes.itemsize(d) or _NAN)
    flops = attn.backward_flops(a) if a.backward else a.forward_flops
    causal = f"causal from the {a.causal_from}, FLOPs halved" if a.causal else a.label().rsplit(", ", 1)[1]
    basis = (
        f"estimate: attention{' backward' if a.backward else ''} {a.label().rsplit(', ', 1)[0]} "
        f"{a.dtype} ({what}; {causal}) from {op}"
    )
    return Estimate(total, flops, basis, dtypes.peak_key(a.dtype, c.name))


# --------------------------------------------------------------------------------------- elementwise
COPY_OPS = frozenset(["aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"])
FILL_OPS = frozenset(f"aten::{base}_" for base in names.WRITE_ONLY_OPS)
CLONE_OPS = frozenset(["aten::clone", "aten::contiguous"])


def elementwise(c: Call) -> Estimate:
    op, t = c.op, c.tensors
    if not t:
        return unknown(f"{op} has no tensor inputs")
    if op in COPY_OPS and len(t) >= 2:
        dst, src = t[0], t[1]
        return Estimate(
            float(src.nbytes + dst.bytes_of(dst.numel)),
            0.0,
            f"estimate: copy {src.text()} {src.short} → {dst.short} (read src + write dst) from {op}",
        )
    if op in FILL_OPS:
        self_ = t[0]
        return Estimate(float(self_.nbytes), 0.0, f"estimate: fill {self_.text()} {self_.short} (write only) from {op}")
    if op in CLONE_OPS:
        src = t[0]
        return Estimate(
            float(src.nbytes + src.bytes_of(src.numel)), 0.0, f"estimate: copy {src.text()} {src.short} from {op}"
        )
    base = names.op_base(op).rstrip("_")
    in_place = op.endswith("_") and not op.endswith("__")
    dst = c.args[-1] if c.args else None
    if not in_place and dst is not None and dst.shape and names.out_argument(op, len(c.args)):
        # the out= form: its last argument is the output buffer, written once, not read (an empty one, [0], is
        # resized to the inputs' broadcast shape)
        ins = [x for x in c.args[:-1] if x is not None]
        try:
            out_shape = broadcast(*(x.shape for x in ins)) if ins else dst.shape
            n_out = math.prod(out_shape)
        except ValueError:
            return unknown(f"{op} input shapes {[x.shape for x in ins]} do not broadcast")
        if dst.numel not in (0, n_out):
            return unknown(f"{op}'s out= tensor {dst.text()} is not its inputs' broadcast shape")
        text = " + ".join(f"{x.text()} {x.short}" for x in ins)
        return Estimate(
            float(sum(x.nbytes for x in ins) + n_out * (dtypes.itemsize(dst.dtype) or _NAN)),
            float(n_out * max(1, len(c.op_list))),
            f"estimate: pointwise {text} (inputs + write the out= buffer, {shape_text(out_shape)} {dst.short}; stride-0"
            f" dims read once) from {op}",
        )
    try:
        out_shape = broadcast(*(x.shape for x in t))
    except ValueError:
        return unknown(f"{op} input shapes {[x.shape for x in t]} do not broadcast")
    if in_place:
        out_dtype, out_numel = t[0].dtype, t[0].numel
    else:
        dimmed = [x.dtype for x in t if x.shape]
        zero_dim = [x.dtype for x in t if not x.shape]
        out_dtype = "bool" if base in names.COMPARISON_OPS else dtypes.promote(dimmed, zero_dim)
        out_numel = math.prod(out_shape)
    in_bytes = sum(x.nbytes for x in t)
    out_bytes = out_numel * (dtypes.itemsize(out_dtype) or _NAN)
    n_ops = max(1, len(c.op_list)) if c.ops else 1
    flops = float(out_numel * n_ops)  # nominal: one op per output element per decoded op (memory-bound kernels)
    ins = " + ".join(f"{x.text()} {x.short}" for x in t)
    how = "in-place: inputs + write self" if in_place else f"inputs + output {shape_text(out_shape)} {out_dtype}"
    return Estimate(
        float(in_bytes + out_bytes), flops, f"estimate: pointwise {ins} ({how}; stride-0 dims read once) from {op}"
    )


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


# aten ops that launch TensorIterator-style kernels but are not elementwise over broadcast inputs
_NOT_ELEMENTWISE = re.compile(
    r"conv|pool|mm|linear|cat|stack|index|gather|scatter|embedding|sort|topk|nonzero|unique|unfold|pad|repeat|roll|flip"
    r"|interpolate|upsample|grid_sample|nll|cross_entropy|ctc|lstm|gru|rnn|arange|linspace|tril|triu|diag|cumsum|one_hot"
    r"|bucketize|searchsorted|multinomial|histc|bincount|_foreach|slice_backward|select_backward|masked_select"
)


def normalization(c: Call) -> Estimate:
    op, t = c.op, c.tensors
    if not t:
        return unknown(f"{op} has no tensor inputs")
    x = t[0]
    grad = op in NORM_BWD_OPS
    total = sum(a.nbytes for a in t) + x.bytes_of(x.numel)
    what = "inputs + grad_input (weight/bias grads not counted)" if grad else "input + weight/bias + output"
    return Estimate(
        float(total), float(5 * x.numel), f"estimate: normalization {x.text()} {x.short} ({what}) from {op}"
    )


def reduction(c: Call) -> Estimate:
    op, t = c.op, c.tensors
    if not t:
        return unknown(f"{op} has no tensor inputs")
    x = t[0]
    total = sum(a.nbytes for a in t)
    if op in SCAN_OPS:
        total += x.bytes_of(x.numel)
        return Estimate(
            float(total), float(x.numel), f"estimate: scan {x.text()} {x.short} (input + same-size output) from {op}"
        )
    return Estimate(
        float(total),
        float(x.numel),
        f"estimate: reduction {x.text()} {x.short} (reads; the reduced output is not recorded, not counted) from {op}",
    )


def embedding(c: Call) -> Estimate:
    op, t = c.op, c.tensors
    if len(t) < 2 or len(t[0].shape) != 2:
        return unknown(f"{op}: expected weight [V, D] and indices")
    w, idx = t[0], t[1]
    rows = w.bytes_of(idx.numel * w.shape[1])
    return Estimate(
        float(idx.nbytes + 2 * rows),
        0.0,
        f"estimate: embedding gather {idx.numel} rows × {w.shape[1]} {w.short} (indices + rows read + output) from {op}",
    )


def gather(c: Call) -> Estimate:
    """gather(self, dim, index) / index_select(self, dim, index): the index read, one source element per output
    element read, the output (index-shaped for gather, the source with its dim resized for index_select) written.
    An embedding lookup runs as one of these under aten::embedding in recent PyTorch."""
    t = c.tensors
    if len(t) < 2:
        return unknown(f"{c.op}: expected a source tensor and an index")
    src, idx = t[0], t[1]
    if names.op_base(c.op) == "gather":
        out_n = idx.numel
    else:
        dim = int(_concrete_int(c.concrete, 1) or 0)
        rest = src.numel // max(src.shape[dim], 1) if src.shape else 1
        out_n = idx.numel * rest
    moved = src.bytes_of(out_n)
    return Estimate(
        float(idx.nbytes + 2 * moved),
        0.0,
        f"estimate: {names.op_base(c.op)} of {out_n:,} {src.short} elements (index + elements read + output) from {c.op}",
    )


def arange(c: Call) -> Estimate:
    """arange(end) / arange(start, end[, step]): writes ceil((end - start) / step) int64 elements (its Concrete
    Inputs; a float arange's dtype is not recorded: int64 assumed, 8 bytes, an estimate)."""
    vals = [_concrete_float(c.concrete, i) for i in range(3)]
    nums = [v for v in vals if v is not None]
    if not nums:
        return unknown("aten::arange recorded no end value (Concrete Inputs)")
    start, end, step = (0.0, nums[0], 1.0) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) > 2 else 1.0)
    n = max(0, math.ceil((end - start) / step)) if step else 0
    return Estimate(float(8 * n), 0.0, f"estimate: arange writes {n:,} int64 elements (dtype not recorded)")


def _concrete_float(concrete, i: int) -> float | None:
    if not isinstance(concrete, (list, tuple)) or i >= len(concrete):
        return None
    try:
        v = float(concrete[i])
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _concrete_int(concrete, i: int) -> int | None:
    v = _concrete_float(concrete, i)
    return int(v) if v is not None and v == int(v) else None


def concat(c: Call) -> Estimate:
    """cat/stack: inputs read + the same bytes written. 'TensorList' has no per-tensor dtype, but ATen's
    CatArrayBatchedCopy<T or OpaqueType<N>> kernel names the element size."""
    op, dims, types = c.op, c.dims, c.types
    lists = [d for d, t in zip(dims or [], types or [], strict=False) if t == "TensorList" and isinstance(d, list)]
    shapes = [s for d in lists for s in d if isinstance(s, list) and all(isinstance(x, int) for x in s)]
    m = re.search(
        r"CatArrayBatchedCopy\w*<(?:at::native::\(anonymous namespace\)::)?(?:OpaqueType<(\d+)u?>|([\w:]+))",
        c.name,
    )
    size = (int(m.group(1)) if m.group(1) else dtypes.itemsize(m.group(2))) if m else None
    if not shapes or size is None:
        return unknown(f"{op}: tensor-list shapes or element size not recorded")
    elems = sum(math.prod(s) for s in shapes)
    return Estimate(
        float(2 * elems * size),
        0.0,
        f"estimate: concat {len(shapes)} tensors, {elems:,} elements × {size} B (read + write; element size from the "
        f"kernel name) from {op}",
    )


# -------------------------------------------------------------------------------- Triton launchers
def _in_place_inductor(c: Call, t: list[Tensor]) -> bool:
    """An Inductor pointwise kernel with ONE tensor arg whose decoded ops all compute from tensor data.

    By construction that arg is read and written: Inductor passes a kernel every buffer it loads or stores (the
    trailing scalars are xnumel/rnumel); every kernel stores a result, and the only buffer is this one; its ops
    need tensor data, and the only buffer to load it from is this one. So it is an in_out_ptr (plain MLP
    torch.compile: triton_poi_fused_gelu_view_0 applies GELU in place on the addmm output).
    """
    parts = c.op_list
    return c.name.startswith("triton_poi_") and len(t) == 1 and bool(parts) and parts <= names.DATA_OPS


_BINARY = frozenset(["mul", "add", "sub", "div", "maximum", "minimum", "pow"])


def _in_out_first(c: Call, t: list[Tensor]) -> bool:
    """Inductor pointwise kernel (in_out_ptr0, in_ptr0): the gated-MLP product `act(gate) * up` written over gate.

    Inductor orders a kernel's buffers in_out_ptrs, in_ptrs, out_ptrs, and passes an in_out buffer reinterpreted
    in the output's shape while inputs keep their producers' shapes. Two args of one size and dtype where the FIRST
    has more dims than the second ([64,128,3072] then the up-projection GEMM's [8192,3072]) and the ops combine two
    tensors (mul/add/…): the first is the output view of an input buffer, read and written. A fresh output buffer
    would come last. The HF GEGLU kernel under torch.compile (H100, Nsight Compute): 100.7 MB read (both args) and
    the product written (3 × 50.3 MB of traffic with no cache reuse). Three or more args, or args of one shape,
    stay a lower bound (the basis says so)."""
    parts = c.op_list
    if not (c.name.startswith("triton_poi_") and len(t) == 2 and parts and parts <= names.DATA_OPS):
        return False
    first, second = t
    return (
        bool(parts & _BINARY)
        and first.numel == second.numel
        and first.dtype == second.dtype
        and len(first.shape) > len(second.shape)
    )


def triton_args(c: Call) -> Estimate:
    """Inductor (and Inductor-launched user) Triton kernels: the launching cpu_op carries the kernel's args.

    bytes = every tensor arg once. An Inductor in_out_ptr (an input buffer reused for the output) is read AND
    written: counted twice where the args show it (one arg: _in_place_inductor; the gated product written over
    gate: _in_out_first), else each arg once is a lower bound and the basis says so. GEMM
    templates: the GEMM problem from analyzer.opinfo.gemm (A of any rank, B as [K,N] or a weight [N,K]).
    """
    t = c.tensors
    if not t:
        return unknown(f"Triton kernel {c.op} recorded no tensor args")
    total = sum(a.nbytes for a in t)
    parts = " + ".join(f"{a.text()} {a.short}" for a in t)
    note = (
        "each tensor arg once: a lower bound where Inductor reused an input buffer for the output (in_out_ptr), "
        "which the trace does not mark"
    )
    if _in_place_inductor(c, t):
        total = 2 * t[0].nbytes
        note = "its only tensor arg is read and written in place: one buffer, and ops that need data"
    elif _in_out_first(c, t):
        total += t[0].nbytes
        note = (
            f"each tensor arg read once + the first written back: {t[0].text()} is an input buffer reinterpreted "
            f"in the output's shape (Inductor's in_out_ptr0), the other keeps its producer's shape"
        )
    flops = _NAN
    peak = None
    if c.category == "gemm":
        g = gemm_reader.read(c.op, t) if gemm_reader.is_template(c.op) else None
        if isinstance(g, gemm_reader.Gemm):
            flops = g.flops
            peak = dtypes.peak_key(g.dtype, c.name)
            if g.out is not None:  # A, B and the output buffer are all args: each moves once
                note = "each tensor arg once: A, B and the output buffer (+ any epilogue operand)"
            note += f"; FLOPs 2·M·N·K with {g.dims()} read as {g.how}"
    elif c.category in ("pointwise", "reduction", "normalization"):
        xnumel = max(a.numel for a in t)
        flops = float(xnumel * max(1, len(c.op_list)))  # nominal, like ATen pointwise
    return Estimate(float(total), flops, f"estimate: triton args {parts} ({note}) from cpu_op {c.op}", peak)


def custom_op_args(c: Call) -> Estimate:
    t = c.tensors
    if not t:
        return unknown(f"{c.op} has no tensor inputs")
    total = sum(a.nbytes for a in t)
    parts = " + ".join(f"{a.text()} {a.short}" for a in t)
    return Estimate(
        float(total),
        _NAN,
        f"estimate: {parts} (each tensor arg once; outputs returned rather than passed are not counted) from custom "
        f"op {c.op}",
    )


# ------------------------------------------------------------------------------------- FuseLens ops
# Our Triton kernels run inside torch.library custom ops (kernels/models/custom_ops.py, docs/KERNELS.md), so their launching op
# records the tensors; the trailing activation string is a non-tensor arg ('[]' in Input Dims, value not recorded).
FUSELENS_OPS = frozenset(["fuselens::glu_gating", "fuselens::dual_gemm_glu", "fuselens::gemm_bias_act"])


def _arg(args, i: int) -> Tensor | None:
    return args[i] if i < len(args) else None


def fuselens(c: Call) -> Estimate:
    """The three fuselens:: ops. bytes = tensor inputs read once + the output written once (its shape and dtype
    follow from the inputs: out = x's dtype). GEMM FLOPs are the tensor-core work only (2·M·N·K per product; the
    bias add, activation and gate·up product in the epilogue are not counted)."""
    op, args = c.op, c.args
    if op == "fuselens::glu_gating":
        gate, up = _arg(args, 0), _arg(args, 1)
        if gate is None or up is None or gate.shape != up.shape:
            return unknown(f"{op}: expected gate and up tensors of one shape")
        # fused_gating runs .contiguous() first (a copy kernel of its own if needed): the kernel reads every element
        n = gate.numel
        total = gate.bytes_of(n) + up.bytes_of(n) + gate.bytes_of(n)
        return Estimate(
            float(total),
            float(2 * n),  # nominal, like any pointwise kernel: act + mul per output element
            f"estimate: gating act·mul {gate.text()} {gate.short} (read gate + up, write out {gate.text()}) "
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
        return unknown(f"{op}: bias {second.text()} does not match N={n}")
    extra = second.nbytes if second is not None else 0
    total = x.nbytes + w.nbytes + extra + x.bytes_of(m * n)
    if gemm2:
        flops = 2 * (2.0 * m * n * k)
        what = f"2 GEMMs (gate, up) M={m} N={n} K={k} {x.short} + act·mul epilogue (x + w_gate + w_up + out [M,N])"
    else:
        flops = 2.0 * m * n * k
        bias = " + bias" if second is not None else ""
        what = f"gemm M={m} N={n} K={k} {x.short}{bias} + act epilogue (x + weight{bias} + out [M,N])"
    return Estimate(float(total), flops, f"estimate: {what} from {op} input shapes", dtypes.peak_key(x.dtype, c.name))


# The training ops (kernels/models/train_ops.py). Their cuBLAS GEMMs run under aten::mm / addmm cpu_ops of their own
# (the GEMM rule), so a kernel whose innermost op is one of these is ours: the forward's gating kernel (cuBLAS forward)
# or its dual GEMM that also stores g and u, and the backward's dH GEMM with the activation backward in its epilogue.
FUSELENS_TRAIN_OPS = frozenset(
    [
        "fuselens::glu_mlp_train",
        "fuselens::glu_mlp_backward",
        "fuselens::glu_mlp_train_apart",
        "fuselens::glu_dh_grad",
        "fuselens::gelu_mlp_train",
        "fuselens::gelu_mlp_backward",
    ]
)
_GLU_FORWARDS = ("fuselens::glu_mlp_train", "fuselens::glu_mlp_train_apart")
# A training op's forward runs inside an autograd.Function range of its own name (names.FUSELENS_TRAIN_WRAPPERS)
_TRAIN_WRAPPERS = names.FUSELENS_TRAIN_WRAPPERS


def fuselens_train(c: Call) -> Estimate:
    """The training ops' own kernels, from the op's input shapes:
    glu_mlp_train(x [M, d], w_gate [h, d], w_up, w_down [d, h], act, forward):
      gating kernel: reads g and u ([M, h] each, the halves of gu), writes h [M, h];
      dual GEMM (+ save): reads x, w_gate, w_up (as their interleaved copy, the same bytes), writes h, g, u; 2 GEMMs;
    glu_mlp_backward(dy [M, d], x, gu [M, 2h], w_gate, w_up, w_down [d, h], act, need_dx) and
    gelu_mlp_backward(dy, x, pre [M, h], w1, w2 [d, h], act, need_dx), dH kernel: reads dY and W_down, reads the
      saved activations and writes their gradients over them; one GEMM M x h x d (the epilogue's work not counted).
      W_down is the third argument from the end: so also in traces of the older schema, which passed h after the
      saved activations (glu: 9 arguments, gelu: 8);
    glu_dh_grad(dy [M, d], w_down [d, h], g [M, h], u [M, h], act) (g and u saved apart): the same kernel;
    glu_mlp_train_apart: as glu_mlp_train."""
    op, args = _TRAIN_WRAPPERS.get(c.op, c.op), c.args
    if op == "fuselens::glu_dh_grad":
        dy, wd, g, u = (_arg(args, i) for i in range(4))
        if any(t is None or len(t.shape) != 2 for t in (dy, wd, g, u)):
            return unknown(f"{op}: expected dy [M, d], W_down [d, h], g and u [M, h]")
        m, d, h = dy.shape[0], dy.shape[1], wd.shape[1]
        total = dy.nbytes + wd.nbytes + 2 * (g.nbytes + u.nbytes)
        what = (
            f"dH GEMM M={m} N={h} K={d} {dy.short} + activation backward epilogue (dY + W_down + saved g, u "
            f"{g.text()} read and their gradients written in place)"
        )
        return Estimate(
            float(total), 2.0 * m * h * d, f"estimate: {what} from {op} input shapes", dtypes.peak_key(dy.dtype, c.name)
        )
    if op.endswith("_backward"):
        dy, saved = _arg(args, 0), _arg(args, 2)
        wd = _arg(args, len(args) - 3) if len(args) >= 6 else None
        if dy is None or saved is None or wd is None or len(dy.shape) != 2 or len(wd.shape) != 2:
            return unknown(f"{op}: expected dy [M, d], the saved activations and W_down [d, h]")
        m, d, h = dy.shape[0], dy.shape[1], wd.shape[1]
        total = dy.nbytes + wd.nbytes + 2 * saved.nbytes
        what = (
            f"dH GEMM M={m} N={h} K={d} {dy.short} + activation backward epilogue (dY + W_down + saved "
            f"{saved.text()} read and its gradient written in place)"
        )
        return Estimate(
            float(total), 2.0 * m * h * d, f"estimate: {what} from {op} input shapes", dtypes.peak_key(dy.dtype, c.name)
        )
    x, wg, wu = _arg(args, 0), _arg(args, 1), _arg(args, 2)
    if op not in _GLU_FORWARDS or x is None or wg is None or wu is None or len(x.shape) != 2:
        return unknown(f"{op}: no kernel of its own expected here ({c.name})")
    m, d, h = x.shape[0], x.shape[1], wg.shape[0]
    mh = x.bytes_of(m * h)
    if c.category == "gemm":  # the dual GEMM that saves g and u
        total = x.nbytes + wg.nbytes + wu.nbytes + 3 * mh
        what = f"2 GEMMs (gate, up) M={m} N={h} K={d} {x.short}, writing g, u and act(g)·u ([M,h] each)"
        return Estimate(
            float(total), 4.0 * m * h * d, f"estimate: {what} from {op} input shapes", dtypes.peak_key(x.dtype, c.name)
        )
    return Estimate(
        float(3 * mh),
        float(2 * m * h),
        f"estimate: gating act·mul [{m}, {h}] {x.short} (read g + u, write h) from {op} input shapes",
    )


# ------------------------------------------------------------------------------------------ dispatch
_AUTOGRAD_FUNCTION = re.compile(r"^[A-Z][A-Za-z0-9_]*(?<!Backward)(?<!Backward\d)$")
_INDEX_OPS = frozenset(
    ["index", "index_put", "gather", "scatter", "scatter_add", "embedding", "cat", "index_copy", "index_add"]
)
_HELPER_OPS = frozenset(["splitk_reduce", "scal", "epilogue", "conv_setup", "copy", "fill"])


def is_helper(ops) -> np.ndarray:
    """Per kernel: does it set up or clean up for its op call's main kernel (split-K reduce, layout copies)?"""
    return np.isin(np.asarray(ops, dtype=object), list(_HELPER_OPS))


def autograd_function(c: Call) -> Estimate:
    """A Python autograd.Function forward (e.g. LigerGELUMulFunction) records its tensor inputs; being functional,
    its output is a new tensor of the inputs' broadcast shape (Backward nodes record only grad_outputs, so they
    stay unknown)."""
    est = elementwise(c)
    return Estimate(est.bytes, est.flops, est.basis.replace(f"from {c.op}", f"from autograd.Function {c.op}"))


def no_model(c: Call) -> Estimate:
    return unknown(f"no byte model for {c.op} ({c.category} kernel{', ops ' + c.ops if c.ops else ''})")


def _launches_itself(c: Call) -> bool:
    """Inductor's (and Inductor-launched user) Triton kernels run under a cpu_op of their own name."""
    return c.op == c.name or (c.op.startswith("triton_") and c.name.startswith("triton"))


def _aten_pointwise(c: Call) -> bool:
    return (
        c.op.startswith("aten::")
        and c.category == "pointwise"
        and not (c.op_list & _INDEX_OPS)
        and not _NOT_ELEMENTWISE.search(c.op)
    )


def _functional(c: Call) -> bool:
    return bool(
        _AUTOGRAD_FUNCTION.match(c.op)
        and not re.search("Compiled|Graph", c.op)  # not whole compiled graphs
        and c.category == "pointwise"
        and not (c.op_list & _INDEX_OPS)
    )


# The rules, in order: the first row whose `when` holds computes the estimate. To add a rule (a new op family),
# add a row above any row that would also match, with a test on a real trace's kernel in tests/analyzer/test_cost.py.
RULES: tuple[tuple[str, Callable[[Call], bool], Callable[[Call], Estimate]], ...] = (
    ("Triton kernel under a cpu_op of its own name", _launches_itself, triton_args),
    ("fuselens:: custom ops", lambda c: c.op in FUSELENS_OPS, fuselens),
    ("fuselens:: training ops", lambda c: c.op in FUSELENS_TRAIN_OPS or c.op in _TRAIN_WRAPPERS, fuselens_train),
    ("GEMM aten ops", lambda c: c.op.startswith("aten::") and names.is_gemm_op(c.op), gemm),
    ("attention aten ops", lambda c: c.op in ATTENTION_FWD or c.op in ATTENTION_BWD, attention),
    ("normalization aten ops", lambda c: c.op in NORM_OPS or c.op in NORM_BWD_OPS, normalization),
    ("reduction and scan aten ops", lambda c: c.op in REDUCE_OPS or c.op in SCAN_OPS, reduction),
    ("embedding", lambda c: c.op == "aten::embedding", embedding),
    ("gather / index_select", lambda c: c.op in ("aten::gather", "aten::index_select"), gather),
    ("arange", lambda c: c.op == "aten::arange", arange),
    ("cat / stack", lambda c: c.op in ("aten::cat", "aten::_cat", "aten::stack"), concat),
    ("elementwise aten ops (pointwise kernel)", _aten_pointwise, elementwise),
    ("copy / fill / clone", lambda c: c.op in COPY_OPS or c.op in FILL_OPS or c.op in CLONE_OPS, elementwise),
    ("other aten ops", lambda c: c.op.startswith("aten::"), no_model),
    (
        "custom op ns::op",
        lambda c: "::" in c.op and c.category in ("pointwise", "normalization", "reduction"),
        custom_op_args,
    ),
    ("autograd.Function forward", _functional, autograd_function),
)


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
        args = read_tensors(dims, types, strides, strict=True)
    except UnknownDtype as err:
        return unknown(f"input type {err.args[0]!r} of {op} has no element size in the dtype table")
    call = Call(name, category, ops or "", op, tuple(args), dims, types, concrete)
    for _what, when, rule in RULES:
        if when(call):
            return rule(call)
    return unknown(f"no byte model for {category} kernels under {op or 'no op'}")
