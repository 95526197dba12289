"""Training ops: the FuseLens MLPs with a backward, as dispatcher ops of the `fuselens` library (kernels.models.custom_ops)
whose gradient is registered with torch.library.register_autograd, so eager autograd and torch.compile (AOTAutograd
traces the forward op, the formula and the backward op as graph nodes) both see it.

  fuselens::glu_mlp_train(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, str activation, str forward)
      -> (Tensor y, Tensor gu, Tensor h)
      y = h W_down^T, h = act(g) * u, gu = [g | u] = [x Wg^T | x Wu^T] ([M, 2h], saved for the backward)
  fuselens::glu_mlp_backward(Tensor dy, Tensor x, Tensor(a!) gu, Tensor w_gate, Tensor w_up, Tensor w_down,
                             str activation, bool need_dx) -> (Tensor dx, Tensor dw_gate, Tensor dw_up)
  fuselens::glu_mlp_train_apart(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, str activation, str forward)
      -> (Tensor y, Tensor g, Tensor u, Tensor h)          the same, g and u saved as two [M, h] tensors; its backward
  fuselens::glu_dh_grad(Tensor dy, Tensor w_down, Tensor(a!) g, Tensor(b!) u, str activation) -> ()
      is that op (g, u <- dg, du) between the registered formula's cuBLAS GEMMs, so du can be freed before dWg
  fuselens::gelu_mlp_train(Tensor x, Tensor w1, Tensor b1, Tensor w2, Tensor b2, str activation)
      -> (Tensor y, Tensor pre, Tensor h)        pre = x W1^T + b1, h = gelu(pre), y = h W2^T + b2
  fuselens::gelu_mlp_backward(Tensor dy, Tensor x, Tensor(a!) pre, Tensor w1, Tensor w2, str activation,
                              bool need_dx) -> (Tensor dx, Tensor dw1, Tensor db1)
  (need_dx False: dx is an empty [0, d] tensor, its GEMM skipped; dW_down = dY^T h and db2 are computed by the
  registered backward formula itself, before the op, so h can be released first)

What is saved and what is recomputed (memory; bench/results/kernels_train_<gpu>.md reports the peak per variant):
x, gu (= Liger's a and b) and h (= the input down_proj's autograd saves in eager and Liger) are kept; act(g) and
act'(g) are recomputed in the backward's epilogue, as Liger recomputes them. gu and h are non-differentiable outputs
(no zero-filled gradients materialised for them), and h is dropped right after dW_down (h and, apart, u are held on
the autograd context, not in save_for_backward, so saved-tensor hooks do not see them: activation checkpointing
still gives the right gradients but keeps them alive). dH = dY W_down is never written: the
epilogue of its GEMM (kernels.ops.mlp_backward) turns it into [dg | du] straight over gu (Liger also writes over its
saved a and b), so the backward allocates no [M, h] gradient of h (eager and Liger do). Because gu is overwritten,
a second backward through the same graph (retain_graph=True) is refused.

Where g and u live (glu_mlp picks by `saves_apart`). Counting the backward's live tensors besides x, y, dY and the
weights (alike for every variant), with dW_down ([d, h]) computed first and h ([M, h]) freed right after it:
  joint, gu = [g | u] one [M, 2h] tensor: 3Mh + hd at the start (gu, h, dW_down); 2Mh + Md + 3hd at the end (gu,
      dW_down, dX and the [2h, d] result of the one weight-gradient GEMM).
  apart, two [M, h] tensors: dWu = du^T X, then du is freed, then dWg = dg^T X: the end is
      max(2Mh + Md + 2hd, Mh + Md + 3hd), min(Mh, hd) below the joint end. That pays where the end is the peak,
      Md + 2hd > Mh (Md only where x needs its gradient). Llama-2-7B (4096 x 4096 -> 11008, bf16) peaks at 494 MiB
      joint, 408 apart (Liger: 462); HF GEGLU (8192 x 768 -> 3072) peaks at its start either way (160 MiB) and keeps
      the one weight-gradient GEMM over gu.

Frozen weights (a base model under LoRA): glu_mlp takes the apart layout wherever the gate or up weight needs no
gradient, and its formula computes only the gradients asked for; the plain op still computes dW1 and db1.

The forward, two ways (`forward`; the fuselens variant measures both, kernels.models.dispatch.choose_train):
  "cublas"  gate and up as two cuBLAS GEMMs writing the two halves of gu in place (mm's out= takes a row-strided
            view without a copy; apart: into g and u), the FuseLens gating kernel reading them by row stride, cuBLAS
            down_proj;
  "dual"    the dual GEMM over the interleaved weight (kernels.ops.mlp_backward.dual_gemm_save: the inference
            kernel's main loop, an epilogue that stores g, u and act(g) * u), cuBLAS down_proj. The interleaved copy
            is rebuilt every step (the optimizer changes the weights): 2 x 2 h d bytes read and written.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.models.custom_ops import _LIB
from kernels.ops import mlp_backward
from kernels.ops.activations import TORCH_ACTS
from kernels.ops.gating import fused_gating
from kernels.ops.triton_util import interpreting

_LIB.define(
    "glu_mlp_train(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, str activation, str forward)"
    " -> (Tensor, Tensor, Tensor)"
)
_LIB.define(
    "glu_mlp_backward(Tensor dy, Tensor x, Tensor(a!) gu, Tensor w_gate, Tensor w_up, Tensor w_down,"
    " str activation, bool need_dx) -> (Tensor, Tensor, Tensor)"
)
_LIB.define(
    "glu_mlp_train_apart(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, str activation, str forward)"
    " -> (Tensor, Tensor, Tensor, Tensor)"
)
_LIB.define("glu_dh_grad(Tensor dy, Tensor w_down, Tensor(a!) g, Tensor(b!) u, str activation) -> ()")
_LIB.define(
    "gelu_mlp_train(Tensor x, Tensor w1, Tensor b1, Tensor w2, Tensor b2, str activation) -> (Tensor, Tensor, Tensor)"
)
_LIB.define(
    "gelu_mlp_backward(Tensor dy, Tensor x, Tensor(a!) pre, Tensor w1, Tensor w2, str activation,"
    " bool need_dx) -> (Tensor, Tensor, Tensor)"
)

# which implementation each call's dH epilogue ran ("ws": the Gluon kernel, "tma": the Triton one, "torch": the
# fallback), by (activation, dtype, M, h): tests and the bench read it
EPILOGUE_RAN: dict[tuple, str] = {}


def _check(name: str, x: torch.Tensor, *ws: torch.Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"fuselens::{name}: x must be 2-D [tokens, d_model], got {tuple(x.shape)}")
    for w in ws:
        if w.dtype != x.dtype or w.device != x.device:
            raise ValueError(f"fuselens::{name}: weights must match x's dtype and device ({x.dtype}, {x.device})")


def saves_apart(tokens: int, d_model: int, hidden: int, need_dx: bool = True) -> bool:
    """Whether the gated training op saves g and u as two tensors (module doc: where the joint [g | u]'s end of the
    backward, [M, d] dX + [2h, d] weight gradient, outweighs the [M, h] h that is live at its start)."""
    dx = tokens * d_model if need_dx else 0
    return dx + 2 * hidden * d_model > tokens * hidden


def layout_apart(x2d: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> bool:
    """glu_mlp's choice: g and u apart where saves_apart says so for this step, or where the gate or up weight is
    frozen (a base model under LoRA), since the apart backward computes only the gradients asked for."""
    if not (w_gate.requires_grad and w_up.requires_grad):
        return True
    return saves_apart(x2d.shape[0], x2d.shape[1], w_gate.shape[0], x2d.requires_grad)


def _glu_forward(name, x, w_gate, w_up, w_down, activation, forward, apart):
    """(y, saved, h): saved is gu = [g | u] or, `apart`, the pair (g, u)."""
    _check(name, x, w_gate, w_up, w_down)
    if activation not in mlp_backward.GATED_GRADS:
        raise ValueError(f"fuselens::{name}: activation must be gelu_tanh or silu, got {activation!r}")
    x = x.contiguous()
    if forward == "dual":
        if not mlp_backward.save_applies(x, w_gate, w_up):
            raise ValueError(
                f"fuselens::{name}: forward 'dual' needs the TMA dual GEMM (fp16/bf16, > 64 rows,"
                " 16-byte rows, hidden a multiple of 8, sm_90+)"
            )
        h, saved = mlp_backward.dual_gemm_save(x, w_gate, w_up, activation, apart=apart)
        return torch.mm(h, w_down.t()), saved, h
    if forward != "cublas":
        raise ValueError(f"fuselens::{name}: forward must be 'cublas' or 'dual', got {forward!r}")
    n = w_gate.shape[0]
    if apart:
        g, u = torch.mm(x, w_gate.t()), torch.mm(x, w_up.t())
        saved = (g, u)
    else:
        saved = x.new_empty((x.shape[0], 2 * n))
        g, u = saved[:, :n], saved[:, n:]
        torch.mm(x, w_gate.t(), out=g)
        torch.mm(x, w_up.t(), out=u)
    if g.is_cuda or interpreting():
        h = fused_gating(g, u, activation)
    else:
        h = (TORCH_ACTS[activation](g.float()) * u.float()).to(x.dtype)
    return torch.mm(h, w_down.t()), saved, h


def glu_mlp_train_impl(x, w_gate, w_up, w_down, activation, forward):
    return _glu_forward("glu_mlp_train", x, w_gate, w_up, w_down, activation, forward, apart=False)


def glu_mlp_train_apart_impl(x, w_gate, w_up, w_down, activation, forward):
    y, (g, u), h = _glu_forward("glu_mlp_train_apart", x, w_gate, w_up, w_down, activation, forward, apart=True)
    return y, g, u, h


def glu_dh_grad_impl(dy, w_down, g, u, activation):
    """g, u <- dg, du in place (the apart layout's backward kernel; glu_mlp_backward_impl's first step)."""
    if activation not in mlp_backward.GATED_GRADS:
        raise ValueError(f"fuselens::glu_dh_grad: activation must be gelu_tanh or silu, got {activation!r}")
    want = (dy.shape[0], w_down.shape[1])
    if tuple(g.shape) != want or tuple(u.shape) != want or w_down.shape[0] != dy.shape[1]:
        raise ValueError(
            f"fuselens::glu_dh_grad: expected dy [M, d], w_down [d, h], g and u [M, h]; got {tuple(dy.shape)},"
            f" {tuple(w_down.shape)}, {tuple(g.shape)}, {tuple(u.shape)}"
        )
    _check("glu_dh_grad", dy, w_down, g, u)
    dy = dy.contiguous()
    EPILOGUE_RAN[(activation, dy.dtype, dy.shape[0], w_down.shape[1])] = mlp_backward.dh_grad(
        dy, w_down, (g, u), activation
    )


def glu_mlp_backward_impl(dy, x, gu, w_gate, w_up, w_down, activation, need_dx):
    n = w_gate.shape[0]
    dy = dy.contiguous()
    EPILOGUE_RAN[(activation, dy.dtype, dy.shape[0], n)] = mlp_backward.dh_grad(dy, w_down, gu, activation)
    if need_dx:
        dx = torch.mm(gu[:, :n], w_gate)
        dx.addmm_(gu[:, n:], w_up)
    else:  # x needs no gradient (the first layer's input): eager's mm backward skips this GEMM too
        dx = x.new_empty((0, x.shape[1]))
    dw_gu = torch.mm(gu.t(), x)  # [2h, d]: rows :n are dWg, n: are dWu (one GEMM, K = tokens)
    return dx, dw_gu[:n], dw_gu[n:]


def gelu_mlp_train_impl(x, w1, b1, w2, b2, activation):
    _check("gelu_mlp_train", x, w1, b1, w2, b2)
    if activation != "gelu":
        raise ValueError(f"fuselens::gelu_mlp_train: activation must be gelu, got {activation!r}")
    x = x.contiguous()
    pre = torch.addmm(b1, x, w1.t())
    h = F.gelu(pre)
    return torch.addmm(b2, h, w2.t()), pre, h


def gelu_mlp_backward_impl(dy, x, pre, w1, w2, activation, need_dx):
    dy = dy.contiguous()
    EPILOGUE_RAN[(activation, dy.dtype, dy.shape[0], w1.shape[0])] = mlp_backward.dh_grad(dy, w2, pre, activation)
    # bias gradients in fp32 (a column sum over thousands of tokens), returned in the weight's dtype
    return (
        torch.mm(pre, w1) if need_dx else x.new_empty((0, x.shape[1])),
        torch.mm(pre.t(), x),
        pre.sum(0, dtype=torch.float32).to(pre.dtype),
    )


for _key in ("CUDA", "CPU"):
    _LIB.impl("glu_mlp_train", glu_mlp_train_impl, _key)
    _LIB.impl("glu_mlp_backward", glu_mlp_backward_impl, _key)
    _LIB.impl("glu_mlp_train_apart", glu_mlp_train_apart_impl, _key)
    _LIB.impl("glu_dh_grad", glu_dh_grad_impl, _key)
    _LIB.impl("gelu_mlp_train", gelu_mlp_train_impl, _key)
    _LIB.impl("gelu_mlp_backward", gelu_mlp_backward_impl, _key)


@torch.library.register_fake("fuselens::glu_mlp_train", lib=_LIB)
def _(x, w_gate, w_up, w_down, activation, forward):
    m, n = x.shape[0], w_gate.shape[0]
    return x.new_empty((m, w_down.shape[0])), x.new_empty((m, 2 * n)), x.new_empty((m, n))


@torch.library.register_fake("fuselens::glu_mlp_train_apart", lib=_LIB)
def _(x, w_gate, w_up, w_down, activation, forward):
    m, n = x.shape[0], w_gate.shape[0]
    return x.new_empty((m, w_down.shape[0])), x.new_empty((m, n)), x.new_empty((m, n)), x.new_empty((m, n))


@torch.library.register_fake("fuselens::glu_dh_grad", lib=_LIB)
def _(dy, w_down, g, u, activation):
    return None


@torch.library.register_fake("fuselens::glu_mlp_backward", lib=_LIB)
def _(dy, x, gu, w_gate, w_up, w_down, activation, need_dx):
    return (
        torch.empty_like(x) if need_dx else x.new_empty((0, x.shape[1])),
        torch.empty_like(w_gate),
        torch.empty_like(w_up),
    )


@torch.library.register_fake("fuselens::gelu_mlp_train", lib=_LIB)
def _(x, w1, b1, w2, b2, activation):
    m, n = x.shape[0], w1.shape[0]
    return x.new_empty((m, w2.shape[0])), x.new_empty((m, n)), x.new_empty((m, n))


@torch.library.register_fake("fuselens::gelu_mlp_backward", lib=_LIB)
def _(dy, x, pre, w1, w2, activation, need_dx):
    return (
        torch.empty_like(x) if need_dx else x.new_empty((0, x.shape[1])),
        torch.empty_like(w1),
        w1.new_empty((w1.shape[0],)),
    )


def _setup(ctx, inputs, output):
    x, *weights, activation = inputs
    _, saved, h = output
    ctx.activation = activation
    ctx.used = False
    # gu / pre and h are outputs only for the backward: no gradient flows into them, and without these two calls
    # autograd would hand the backward zero-filled gradients for both (Llama-2-7B bf16: 258 MiB allocated and
    # memset per step, 1.74x Liger's peak before).
    ctx.mark_non_differentiable(saved, h)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, saved, *weights)
    # h is held outside save_for_backward so the backward can drop it after its one use (dW_down = dY^T h), before
    # the [2h, d] weight-gradient GEMM allocates: the step's peak is then Liger's (which frees its saved down_proj
    # input at the same point), not one [M, h] above it. h is a non-differentiable output (no grad_fn), so the
    # reference makes no cycle; saved-tensor hooks (offloading) do not see it.
    ctx.h = [h]


def _setup_glu(ctx, inputs, output):
    _setup(ctx, inputs[:-1], output)  # inputs end with (activation, forward)


def _setup_glu_apart(ctx, inputs, output):
    x, w_gate, w_up, w_down, activation, _forward = inputs
    y, g, u, h = output
    _setup(ctx, (x, w_gate, w_up, w_down, activation), (y, g, h))
    ctx.mark_non_differentiable(g, u, h)
    # u, like h, is held outside save_for_backward so the backward can drop it (as du) before dWg allocates
    ctx.u = [u]


def _once(ctx) -> None:
    # the backward overwrites the saved gu / pre with their gradients (see the module docstring)
    if ctx.used:
        raise RuntimeError(
            "fuselens training ops overwrite their saved activations: a second backward is not supported"
        )
    ctx.used = True


def _down_grads(ctx, dy, need: bool = True):
    """dW_down = dY^T h where W_down needs its gradient (and h released: ctx held the only other reference)."""
    h = ctx.h.pop()
    return torch.mm(dy.t(), h) if need else None


def _glu_backward(ctx, dy, _dgu, _dh):
    _once(ctx)
    if dy is None:  # y took no part in the loss
        return None, None, None, None, None, None
    x, gu, w_gate, w_up, w_down = ctx.saved_tensors
    dy = dy.contiguous()
    dwd = _down_grads(ctx, dy, ctx.needs_input_grad[3])
    need_dx = ctx.needs_input_grad[0]
    dx, dwg, dwu = torch.ops.fuselens.glu_mlp_backward(dy, x, gu, w_gate, w_up, w_down, ctx.activation, need_dx)
    return dx if need_dx else None, dwg, dwu, dwd, None, None


def _glu_apart_backward(ctx, dy, _dg, _du, _dh):
    _once(ctx)
    if dy is None:
        return None, None, None, None, None, None
    x, g, w_gate, w_up, w_down = ctx.saved_tensors
    u = ctx.u.pop()
    dy = dy.contiguous()
    need_dx, need_dwg, need_dwu, need_dwd = ctx.needs_input_grad[:4]
    dwd = _down_grads(ctx, dy, need_dwd)
    if not (need_dx or need_dwg or need_dwu):  # only W_down trains
        return None, None, None, dwd, None, None
    torch.ops.fuselens.glu_dh_grad(dy, w_down, g, u, ctx.activation)  # g, u now hold dg, du
    dx = torch.mm(u, w_up) if need_dx else None
    dwu = torch.mm(u.t(), x) if need_dwu else None
    del u  # du's last use: released before dWg allocates (module doc)
    if need_dx:
        dx.addmm_(g, w_gate)
    return dx, torch.mm(g.t(), x) if need_dwg else None, dwu, dwd, None, None


def _gelu_backward(ctx, dy, _dpre, _dh):
    _once(ctx)
    if dy is None:
        return None, None, None, None, None, None
    x, pre, w1, b1, w2, b2 = ctx.saved_tensors
    dy = dy.contiguous()
    dw2 = _down_grads(ctx, dy, ctx.needs_input_grad[3])
    db2 = dy.sum(0, dtype=torch.float32).to(dy.dtype) if ctx.needs_input_grad[4] else None
    need_dx = ctx.needs_input_grad[0]
    dx, dw1, db1 = torch.ops.fuselens.gelu_mlp_backward(dy, x, pre, w1, w2, ctx.activation, need_dx)
    return dx if need_dx else None, dw1, db1, dw2, db2, None


torch.library.register_autograd("fuselens::glu_mlp_train", _glu_backward, setup_context=_setup_glu, lib=_LIB)
torch.library.register_autograd(
    "fuselens::glu_mlp_train_apart", _glu_apart_backward, setup_context=_setup_glu_apart, lib=_LIB
)
torch.library.register_autograd("fuselens::gelu_mlp_train", _gelu_backward, setup_context=_setup, lib=_LIB)


def glu_mlp(x2d, w_gate, w_up, w_down, activation: str, forward: str = "cublas", apart: bool | None = None):
    """The gated MLP's output through the training op (differentiable); forward "cublas" or "dual", g and u saved
    apart or as one [g | u] (None: by saves_apart, and apart wherever the gate or up weight is frozen, since the apart
    backward computes only the gradients asked for; module doc)."""
    if apart is None:
        apart = layout_apart(x2d, w_gate, w_up)
    op = torch.ops.fuselens.glu_mlp_train_apart if apart else torch.ops.fuselens.glu_mlp_train
    return op(x2d, w_gate, w_up, w_down, activation, forward)[0]


def gelu_mlp(x2d, w1, b1, w2, b2) -> torch.Tensor:
    """The plain MLP's output through the training op (differentiable)."""
    return torch.ops.fuselens.gelu_mlp_train(x2d, w1, b1, w2, b2, "gelu")[0]
