"""The FuseLens kernels as PyTorch custom ops, so a profiler trace can size them.

A Triton launch made straight from Python has no CPU op around it with `Input Dims`, so the analyzer could not
attribute bytes or FLOPs to our kernels. Each op below is a dispatcher op: with `record_shapes=True` the trace holds
a cpu_op named `fuselens::<op>` with the tensor arguments' dims and dtypes, and the kernel it launches links to it.
The fuselens / fuselens-gating forwards (kernels.models.fused_mlp) call these.

  fuselens::glu_gating(Tensor gate, Tensor up, str activation) -> Tensor
      act(gate) * up; gate, up [..., h]; launches fuselens_glu_gating_kernel
  fuselens::dual_gemm_glu(Tensor x, Tensor w_gate, Tensor w_up, str activation) -> Tensor
      act(x @ w_gate^T) * (x @ w_up^T); x [M, d], w_* [h, d] -> [M, h]; launches fuselens_dual_gemm_glu_kernel
      (M > 64, sm_90+) or fuselens_dual_gemm_glu_ptr_kernel
  fuselens::gemm_bias_act(Tensor x, Tensor weight, Tensor? bias, str activation) -> Tensor
      act(x @ weight^T + bias); x [M, d], weight [h, d], bias [h] -> [M, h]; launches fuselens_gemm_bias_act_kernel
      (M > 64, sm_90+) or fuselens_gemm_bias_act_ptr_kernel
activation: "gelu_tanh" | "silu" (glu ops), "gelu" (exact, erf) | "gelu_tanh" | "silu" | "identity" (gemm_bias_act).
These three are inference only: a call whose inputs need a gradient (grad mode on) raises RuntimeError. Training
goes through the ops of kernels.models.train_ops (same library, backward registered with register_autograd), which
the fuselens variant takes when grad mode is on. torch.compile traces the ops through their fake kernels (one graph
node each, no graph break).
"""

from __future__ import annotations

import torch

from kernels.ops.dual_gemm import dual_gemm_gated
from kernels.ops.gating import fused_gating
from kernels.ops.gemm_act import gemm_bias_act as _gemm_bias_act
from kernels.ops.launch import LAUNCH_MODE, Plans

# Registered with torch.library.Library (define + kernels), not @torch.library.custom_op: the latter wraps every call
# in an autograd function and a torch._dynamo.disable frame, ~20 us of host time per call on the H100 host
# (scripts/host_overhead.py: glu_gating 61.0 us through custom_op vs 41.1 us calling the wrapper directly).
#
# One Python kernel per call. Each entry from the C++ dispatcher into Python (PythonKernelHolder: GIL, IValue ->
# PyObject conversion of every argument, the call, the result back) costs a few microseconds of host time, so the
# computing kernel sits on the Autograd key itself: it refuses inputs that need a gradient and launches the Triton
# kernel in the same Python call. (A guard on Autograd that redispatches to a CUDA kernel enters Python twice per
# call: 16.2 us per glu_gating call vs 10.6 calling the wrapper directly on an H200 host.) Calls that carry
# other dispatch keys below autograd (FakeTensor / FunctionalTensor under torch.compile and other Python modes:
# the Python key; C++ functionalization: Functionalize) are redispatched below autograd, where the fake kernel
# (register_fake) or the plain CPU/CUDA kernels serve them. The CPU kernels serve TRITON_INTERPRET=1 runs.
_LIB = torch.library.Library("fuselens", "DEF")
_LIB.define("glu_gating(Tensor gate, Tensor up, str activation) -> Tensor")
_LIB.define("dual_gemm_glu(Tensor x, Tensor w_gate, Tensor w_up, str activation) -> Tensor")
_LIB.define("gemm_bias_act(Tensor x, Tensor weight, Tensor? bias, str activation) -> Tensor")
for _key in ("CUDA", "CPU"):
    _LIB.impl("glu_gating", fused_gating, _key)
    _LIB.impl("dual_gemm_glu", dual_gemm_gated, _key)
    _LIB.impl("gemm_bias_act", _gemm_bias_act, _key)

PLANS = {name: Plans(name) for name in ("glu_gating", "dual_gemm_glu", "gemm_bias_act")}
_BELOW_AUTOGRAD = torch._C._after_autograd_keyset
_PYTHON = torch._C.DispatchKey.Python
_FUNCTIONALIZE = torch._C.DispatchKey.Functionalize
_is_grad_enabled = torch.is_grad_enabled


def _refuse(name: str):
    raise RuntimeError(f"fuselens::{name} is inference-only (no backward); call it under torch.no_grad()")


def _redispatch(name: str):
    # the op handle's redispatch_boxed, not a second call: a call would enter the dispatcher again and record the op
    # twice in a profiler trace
    return getattr(torch.ops.fuselens, name).default._handle.redispatch_boxed


_GATING_PLANS, _DUAL_PLANS, _GEMM_PLANS = PLANS["glu_gating"], PLANS["dual_gemm_glu"], PLANS["gemm_bias_act"]


# Each op's call, once the dispatcher has nothing left to do (or is skipped, see unobserved()): refuse inputs that need
# a gradient, then compute through the op's `Plans` (kernels.ops.launch): after two calls with the same key the
# validation, kernel choice and argument building are replayed from the recorded launches. The key holds what those
# depend on: every tensor's shape, strides, dtype, device and 16-byte alignment (Triton specialises on it), and for
# dual_gemm_glu the weights' identity and version (its TMA kernel reads a cached interleaved copy). Written out per op
# (explicit tensor arguments: a generator over *args costs ~1 us per call).
def _glu_gating_call(gate, up, activation):
    if _is_grad_enabled() and (gate.requires_grad or up.requires_grad):
        _refuse("glu_gating")
    key = (
        activation, gate.shape, gate.stride(), gate.dtype, gate.get_device(), gate.data_ptr() & 15,
        up.shape, up.stride(), up.dtype, up.get_device(), up.data_ptr() & 15,
    )  # fmt: skip
    return _GATING_PLANS.call(key, fused_gating, (gate, up), (activation,))


def _dual_gemm_glu_call(x, w_gate, w_up, activation):
    if _is_grad_enabled() and (x.requires_grad or w_gate.requires_grad or w_up.requires_grad):
        _refuse("dual_gemm_glu")
    key = (
        activation, x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15,
        id(w_gate), w_gate._version, w_gate.shape, w_gate.stride(), w_gate.dtype, w_gate.get_device(),
        w_gate.data_ptr() & 15,
        id(w_up), w_up._version, w_up.shape, w_up.stride(), w_up.dtype, w_up.get_device(), w_up.data_ptr() & 15,
    )  # fmt: skip
    return _DUAL_PLANS.call(key, dual_gemm_gated, (x, w_gate, w_up), (activation,))


def _gemm_bias_act_call(x, weight, bias, activation):
    if _is_grad_enabled() and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        _refuse("gemm_bias_act")
    key = (
        activation, x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15,
        weight.shape, weight.stride(), weight.dtype, weight.get_device(), weight.data_ptr() & 15,
        None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device(), bias.data_ptr() & 15),
    )  # fmt: skip
    return _GEMM_PLANS.call(key, _gemm_bias_act, (x, weight, bias), (activation,))


def _autograd_kernels():
    """The ops' Autograd kernels (without them PyTorch's autograd fallback would let a backward run through with a
    warning and wrong gradients): the gradient check first (a compiled backward would otherwise skip the op), then
    fake / functional tensors go below autograd, everything else computes in this call."""
    redispatch_gating = _redispatch("glu_gating")
    redispatch_dual = _redispatch("dual_gemm_glu")
    redispatch_gemm = _redispatch("gemm_bias_act")

    def glu_gating_autograd(keyset, gate, up, activation):
        if keyset.has(_PYTHON) or keyset.has(_FUNCTIONALIZE):
            if _is_grad_enabled() and (gate.requires_grad or up.requires_grad):
                _refuse("glu_gating")
            return redispatch_gating(keyset & _BELOW_AUTOGRAD, gate, up, activation)
        return _glu_gating_call(gate, up, activation)

    def dual_gemm_glu_autograd(keyset, x, w_gate, w_up, activation):
        if keyset.has(_PYTHON) or keyset.has(_FUNCTIONALIZE):
            if _is_grad_enabled() and (x.requires_grad or w_gate.requires_grad or w_up.requires_grad):
                _refuse("dual_gemm_glu")
            return redispatch_dual(keyset & _BELOW_AUTOGRAD, x, w_gate, w_up, activation)
        return _dual_gemm_glu_call(x, w_gate, w_up, activation)

    def gemm_bias_act_autograd(keyset, x, weight, bias, activation):
        if keyset.has(_PYTHON) or keyset.has(_FUNCTIONALIZE):
            if _is_grad_enabled() and (
                x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
            ):
                _refuse("gemm_bias_act")
            return redispatch_gemm(keyset & _BELOW_AUTOGRAD, x, weight, bias, activation)
        return _gemm_bias_act_call(x, weight, bias, activation)

    return {
        "glu_gating": glu_gating_autograd,
        "dual_gemm_glu": dual_gemm_glu_autograd,
        "gemm_bias_act": gemm_bias_act_autograd,
    }


for _name, _kernel in _autograd_kernels().items():
    _LIB.impl(_name, _kernel, "Autograd", with_keyset=True)


@torch.library.register_fake("fuselens::glu_gating", lib=_LIB)
def _(gate, up, activation):
    return torch.empty_like(gate)


@torch.library.register_fake("fuselens::dual_gemm_glu", lib=_LIB)
def _(x, w_gate, w_up, activation):
    return x.new_empty((x.shape[0], w_gate.shape[0]))


@torch.library.register_fake("fuselens::gemm_bias_act", lib=_LIB)
def _(x, weight, bias, activation):
    return x.new_empty((x.shape[0], weight.shape[0]))


# The ops' builtin callables (OpOverload.__call__ is a Python frame around them): the dispatcher entry, so a profiler
# still records one fuselens::<op> per call with its Input Dims. Dynamo cannot trace a builtin, so while it traces
# (torch.compile) the wrappers call the OpOverload, which becomes one node of the graph.
_GLU_GATING = torch.ops.fuselens.glu_gating.default._op
_DUAL_GEMM_GLU = torch.ops.fuselens.dual_gemm_glu.default._op
_GEMM_BIAS_ACT = torch.ops.fuselens.gemm_bias_act.default._op
_is_compiling = torch.compiler.is_compiling

# Unobserved calls skip the dispatcher. Its entry into the Python kernel cost ~8 us of host time per call on the
# H100 host (fuselens::glu_gating 26.6 us, the same plan replay called from Python 18.2), more than
# anything else left in an op call. The entry only matters to whoever can see it, so the wrappers take it whenever
# something might: the profiler (the trace's fuselens::<op> with its Input Dims), Dynamo (above), TorchScript tracing,
# a torch-function mode (torch.device(...), FX), a dispatch mode or functorch transform (they add keys to the
# thread's included dispatch keys: FakeTensorMode, TorchDispatchMode, vmap/grad), and any tensor that is not a
# plain Tensor or Parameter (FakeTensor, FunctionalTensor, DTensor...). Otherwise the wrapper calls the op's Autograd
# kernel itself: the same gradient refusal, plans and kernels. FUSELENS_LAUNCH=jit always enters the dispatcher.
OP_DIRECT = LAUNCH_MODE != "jit"
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_profiling = torch.autograd._profiler_enabled
_function_mode = torch._C._is_torch_function_mode_enabled
_included = torch._C._dispatch_tls_local_include_set
# the thread's included keys outside any mode (torch 2.11-2.13); a dispatch mode or FakeTensorMode adds Python,
# functorch its layer keys, TorchScript tracing Tracer. Where a torch differs, every call takes the dispatcher.
_NOTHING_INCLUDED = (
    torch._C.DispatchKeySet(torch._C.DispatchKey.BackendSelect).add(torch._C.DispatchKey.ADInplaceOrView).raw_repr()
)


def unobserved() -> bool:
    """True when nothing could see a dispatcher entry (see above): the wrappers then call the kernel directly."""
    return OP_DIRECT and not _profiling() and not _function_mode() and _included().raw_repr() == _NOTHING_INCLUDED


def glu_gating(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    if _is_compiling():
        return torch.ops.fuselens.glu_gating.default(gate, up, activation)
    if type(gate) in _PLAIN_TYPES and type(up) in _PLAIN_TYPES and unobserved():
        return _glu_gating_call(gate, up, activation)
    return _GLU_GATING(gate, up, activation)


def dual_gemm_glu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str) -> torch.Tensor:
    if _is_compiling():
        return torch.ops.fuselens.dual_gemm_glu.default(x, w_gate, w_up, activation)
    if type(x) in _PLAIN_TYPES and type(w_gate) in _PLAIN_TYPES and type(w_up) in _PLAIN_TYPES and unobserved():
        return _dual_gemm_glu_call(x, w_gate, w_up, activation)
    return _DUAL_GEMM_GLU(x, w_gate, w_up, activation)


def gemm_bias_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str) -> torch.Tensor:
    if _is_compiling():
        return torch.ops.fuselens.gemm_bias_act.default(x, weight, bias, activation)
    if (
        type(x) in _PLAIN_TYPES
        and type(weight) in _PLAIN_TYPES
        and (bias is None or type(bias) in _PLAIN_TYPES)
        and unobserved()
    ):
        return _gemm_bias_act_call(x, weight, bias, activation)
    return _GEMM_BIAS_ACT(x, weight, bias, activation)
