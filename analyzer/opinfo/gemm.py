"""The one GEMM-problem reader: (batch, M, N, K, dtype) and the operand tensors of the GEMM an op runs.

aten::mm [[M,K],[K,N](,out)]; addmm [bias,[M,K],[K,N]]; bmm [[B,M,K],[B,K,N]]; baddbmm/addbmm [bias,[B,M,K],
[B,K,N]]; linear [[…,K],[N,K](,bias)] (weight given as [N, K]); matmul [[…,M,K],[K,N]] or batched; mv/addmv;
_scaled_mm (a, b, scale_a, scale_b, bias?, scale_result?); _int_mm. Inductor GEMM templates
(`triton_tem_fused_…`, `triton_mm_…`, `triton_bmm_…`) record their buffers as the template reads them, in an
order and layout of Inductor's choosing: an input of any rank ([64,128,3072] is M=8192 rows of K=3072), a weight
as [K, N] or [N, K], the output buffer; `_template` picks the reading that an output argument confirms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from analyzer.opinfo import names
from analyzer.opinfo.tensors import Tensor, broadcast, tensors

GEMM_OPS = names.GEMM_OPS
_WITH_BIAS = frozenset(["addmm", "_addmm_activation", "baddbmm", "addbmm", "addmv"])


@dataclass(frozen=True)
class Gemm:
    m: int
    n: int
    k: int
    dtype: str | None  # A's dtype (short name)
    batch: int = 1
    a: Tensor | None = field(default=None, compare=False)
    b: Tensor | None = field(default=None, compare=False)
    bias: Tensor | None = field(default=None, compare=False)
    out: Tensor | None = field(default=None, compare=False)  # an output buffer passed as an argument
    extra: tuple[Tensor, ...] = field(default=(), compare=False)  # other tensors it reads (_scaled_mm's scales)
    batch_out: int | None = field(default=None, compare=False)  # addbmm sums the batch into one [M, N]
    how: str = field(default="", compare=False)  # how the problem was read ('[M,K]·[N,K] weight', …)

    @property
    def key(self) -> tuple:
        return ("gemm", self.batch, self.m, self.n, self.k, self.dtype)

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def out_batch(self) -> int:
        return self.batch if self.batch_out is None else self.batch_out

    def label(self) -> str:
        b = f"{self.batch}× " if self.batch != 1 else ""
        return f"{b}M={self.m} N={self.n} K={self.k} {self.dtype or '?'}"

    def dims(self) -> str:
        return (f"B={self.batch} " if self.batch > 1 else "") + f"M={self.m} N={self.n} K={self.k}"


def is_template(name: str | None) -> bool:
    """An Inductor GEMM template kernel (its launching cpu_op carries the kernel's own name and buffers)."""
    dec = names.inductor(name)
    return dec is not None and (dec.kind in ("mm", "bmm") or (dec.kind == "tem" and "flex_attention" not in dec.words))


def read(op_name: str | None, ts: list[Tensor]) -> Gemm | str:
    """The GEMM an op runs, from its tensor arguments; a one-line reason when it cannot be read."""
    base = names.op_base(op_name).rstrip("_")
    if is_template(op_name):
        return _template(ts)
    if base not in GEMM_OPS:
        return f"{op_name} is not a GEMM op"
    if base in _WITH_BIAS:
        if len(ts) < 3:
            return f"{op_name} without 3 tensor inputs"
        return _shapes(base, op_name, ts[1], ts[2], bias=ts[0])
    if base == "linear":
        if len(ts) < 2:
            return "aten::linear without input and weight"
        x, w = ts[0], ts[1]
        if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
            return f"aten::linear input {x.text()} and weight {w.text()} are not […,K] and [N,K]"
        bias = ts[2] if len(ts) > 2 else None
        m = math.prod(x.shape[:-1])
        return Gemm(m, w.shape[0], w.shape[1], x.dtype, 1, x, w, bias, how="[…,K]·[N,K] weight")
    if len(ts) < 2:
        return f"{op_name} without two tensor inputs"
    if base == "_scaled_mm":
        # (a, b, scale_a, scale_b, bias?, scale_result?): scales are fp32; a bf16/fp16 bias fixes the out dtype
        out = next((x for x in ts[4:] if x.dtype in ("bf16", "fp16")), None)
        return _shapes(base, op_name, ts[0], ts[1], out=out, extra=tuple(ts[2:]))
    out = ts[2] if len(ts) > 2 else None  # mm(a, b, out=c): Inductor's extern_kernels.mm passes the output
    return _shapes(base, op_name, ts[0], ts[1], out=out)


def _shapes(base, op_name, a: Tensor, b: Tensor, bias=None, out=None, extra=()) -> Gemm | str:
    sa, sb = a.shape, b.shape
    if len(sa) == 2 and len(sb) == 2:
        batch, m, k, n, kb = 1, sa[0], sa[1], sb[1], sb[0]
    elif len(sa) == 2 and len(sb) == 1:  # matrix-vector
        batch, m, k, n, kb = 1, sa[0], sa[1], 1, sb[0]
    elif len(sa) >= 3 and len(sb) == 2:  # matmul folds leading dims into M
        batch, m, k, n, kb = 1, math.prod(sa[:-1]), sa[-1], sb[1], sb[0]
    elif len(sa) >= 3 and len(sb) >= 3:
        try:
            bshape = broadcast(sa[:-2], sb[:-2])
        except ValueError:
            return f"{op_name} batch dims {sa[:-2]} and {sb[:-2]} do not broadcast"
        batch, m, k, n, kb = math.prod(bshape), sa[-2], sa[-1], sb[-1], sb[-2]
    else:
        return f"{op_name} with input ranks {len(sa)} and {len(sb)}"
    if k != kb:
        return f"{op_name} inputs {a.text()} and {b.text()} do not share K"
    batch_out = 1 if base == "addbmm" else None
    return Gemm(m, n, k, a.dtype, batch, a, b, bias, out, tuple(extra), batch_out, "[M,K]·[K,N]")


def _template(ts: list[Tensor]) -> Gemm | str:
    """Inductor GEMM template: find A (any rank, seen as rows × last dim; or its transpose, as a weight-gradient
    template reads the activations: x^T·dY) and B ([K,N] or a weight [N,K]; batched: [B,K,N]) among the buffers.
    Inductor passes (A, B, …, out): readings whose output buffer (M×N elements, neither operand) is the LAST
    tensor come first, then any output buffer, then untransposed A, then argument order."""
    best: tuple | None = None
    last = len(ts) - 1
    for i, a in enumerate(ts):
        if len(a.shape) < 2:
            continue
        for j, b in enumerate(ts):
            if j == i or len(b.shape) < 2:
                continue
            for batch, m, n, k, how in _readings(a, b):
                outs = [x for x, t in enumerate(ts) if x not in (i, j) and t.numel == batch * m * n]
                out = ts[outs[-1]] if outs else None
                score = (bool(outs) and outs[-1] == last, bool(outs), a.dtype == b.dtype, "ᵀ" not in how, -i, -j)
                if best is None or score > best[0]:
                    best = (score, Gemm(m, n, k, a.dtype, batch, a, b, None, out, how=how))
    if best is None:
        return "GEMM template: no [M,K]·[K,N] or [M,K]·[N,K] pair among its tensor args"
    return best[1]


def _readings(a: Tensor, b: Tensor):
    """(batch, M, N, K, how) for A·B (or Aᵀ·B) with these shapes."""
    rows, cols = math.prod(a.shape[:-1]), a.shape[-1]
    if len(b.shape) == 2:
        for m, k, lhs in ((rows, cols, "[M,K]"), (cols, rows, "[K,M]ᵀ")):
            if b.shape[0] == k:
                yield 1, m, b.shape[1], k, f"{lhs}·[K,N]"
            if b.shape[1] == k and b.shape[0] != k:
                yield 1, m, b.shape[0], k, f"{lhs}·[N,K] weight"
    elif len(a.shape) == 3 and len(b.shape) == 3 and a.shape[0] == b.shape[0] and b.shape[1] == cols:
        yield a.shape[0], a.shape[1], b.shape[2], cols, "[B,M,K]·[B,K,N]"


def gemm_problem(op_name: str | None, dims, types, strides=None) -> Gemm | None:
    """The GEMM of an op from its recorded shapes, or None when it runs none we can read."""
    if not (names.is_gemm_op(op_name) or is_template(op_name)):
        return None
    g = read(op_name, tensors(dims, types, strides))
    return g if isinstance(g, Gemm) else None


# FuseLens' fused GEMM kernels (kernels/ops, docs/KERNELS.md) run under their dispatcher op, whose recorded input
# shapes say which GEMMs the kernel computes. Tensor arguments in order (non-tensor ones are not in `ts`):
#   fuselens::dual_gemm_glu(x [.., K], w_gate [N, K], w_up [N, K])       two GEMMs M x N x K
#   fuselens::gemm_bias_act(x [.., K], w [N, K], bias?)                  one GEMM M x N x K
#   fuselens::glu_mlp_train(x [M, d], w_gate [h, d], w_up, w_down)       its GEMM kernel: the dual GEMM, 2 x (M x h x d)
#   fuselens::glu_mlp_train_apart                                         the same (g and u saved as two tensors)
#   fuselens::glu_mlp_backward / gelu_mlp_backward(dy [M, d], …, w_down [d, h])  its GEMM kernel: dH = dY W_down,
#       M x h x d (its other GEMMs are cuBLAS calls under aten ops of their own); W_down is the last tensor
#   fuselens::glu_dh_grad(dy [M, d], w_down [d, h], g, u)                 that dH GEMM alone (the apart layout)
_FUSED_GEMMS = {
    "fuselens::dual_gemm_glu": 2,
    "fuselens::gemm_bias_act": 1,
    "fuselens::glu_mlp_train": 2,
    "fuselens::glu_mlp_train_apart": 2,
}


def fused_gemm_problems(op_name: str | None, ts) -> tuple[tuple[int, int, int], ...] | None:
    """(M, N, K) of each GEMM a FuseLens op's fused GEMM kernel runs, from the op's tensor inputs; None for any other
    op or shapes that do not fit (then nothing is ruled out)."""
    op = names.FUSELENS_TRAIN_WRAPPERS.get(str(op_name or ""), str(op_name or ""))
    ts = [t for t in ts if t is not None and t.shape]
    if op in _FUSED_GEMMS and len(ts) >= 2:
        x, w = ts[0], ts[1]
        if len(x.shape) < 2 or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
            return None
        return ((math.prod(x.shape[:-1]), w.shape[0], w.shape[1]),) * _FUSED_GEMMS[op]
    if op in ("fuselens::glu_mlp_backward", "fuselens::gelu_mlp_backward") and len(ts) >= 4:
        dy, wd = ts[0], ts[-1]
        if len(dy.shape) != 2 or len(wd.shape) != 2 or wd.shape[0] != dy.shape[1]:
            return None
        return ((dy.shape[0], wd.shape[1], dy.shape[1]),)
    if op == "fuselens::glu_dh_grad" and len(ts) >= 2:
        dy, wd = ts[0], ts[1]
        if len(dy.shape) != 2 or len(wd.shape) != 2 or wd.shape[0] != dy.shape[1]:
            return None
        return ((dy.shape[0], wd.shape[1], dy.shape[1]),)
    return None
