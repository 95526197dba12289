"""Which implementation the `fuselens` variant runs for an MLP call, chosen by measuring the candidates at the first
call of each (device, workload, activation, dtype, token bucket, d_model, hidden), not by rules about shapes.

Paths (PATHS; every one computes the same forward, so the choice is only about speed):
  dual_gemm   gated: fuselens::dual_gemm_glu (persistent TMA kernel on sm_90+ with aligned rows and M > 64, else the
              pointer kernel) + cuBLAS down_proj
  dual_gemm+gemm  gated: the same dual GEMM + down_proj through fuselens::gemm_bias_act (our persistent TMA GEMM,
              identity epilogue); a candidate only where that TMA kernel applies (tma_down_applies)
  gemm_act    plain: fuselens::gemm_bias_act (fc1 + bias + GELU in one kernel) + cuBLAS fc2
  gating      gated: cuBLAS gate_proj and up_proj + fuselens::glu_gating + cuBLAS down_proj
  cat_gating  gated: gate_proj and up_proj as ONE cuBLAS GEMM over the concatenated [2h, d] weight (cached) +
              fuselens::glu_gating reading the two halves of its [M, 2h] output in place + cuBLAS down_proj: one
              launch fewer and twice the tiles per GEMM (a 77-row GEMM fills more SMs; at 8192 rows the last wave
              is a smaller share)
  pad_dual_gemm, pad_cat_gating  gated, only where d_model's rows are not 16-byte aligned (77 x 1001 -> 3000 bf16):
              x padded with zero columns to the next aligned width, the weights padded once (cached; zero columns
              of gate/up, zero rows of down add nothing), then dual_gemm (TMA kernel now applies) or cat_gating on
              aligned GEMMs; the output is the first d_model columns of the padded down_proj output (a view)
  aten        the module's own forward: cuBLAS GEMMs + ATen elementwise kernels (where fusion cannot pay)
Why measure: fusion wins where the GEMMs are big enough to hide the epilogue and the gate/up round trip is
expensive (the HF shape: dual GEMM 164 us vs 223 for cuBLAS + gating), and can lose where a 77-row GEMM leaves most
SMs idle or rows are not 16-byte aligned (the pointer kernel then competes with cuBLAS's tuned kernels).

The probe (`choose`): each candidate is warmed up (which also tunes its Triton kernels), then timed like the bench
(kernels.ops.timing: CUDA events, L2 flushed by a read, launches queued ahead) in two interleaved passes; the
fastest mean wins. Inside CUDA-graph capture, or for CPU tensors (the interpreter), there is nothing to time: the
first path applies. Decisions are cached in-process (`decisions()`), and a profiler trace names the path that ran
as a record_function range `fuselens::path=<path>` around the forward.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

from fuselens import settings
from kernels.models import custom_ops as ops
from kernels.models.workloads import GatedMLP, PlainMLP
from kernels.ops.triton_util import reraise_if_fatal

PATHS = {
    "gated": ("dual_gemm", "dual_gemm+gemm", "gating", "cat_gating", "pad_dual_gemm", "pad_cat_gating", "aten"),
    "plain": ("gemm_act", "aten"),
}
PAD_PATHS = ("pad_dual_gemm", "pad_cat_gating")  # candidates only where d_model's rows are not 16-byte aligned
FUSED_PATHS = {"gated": ("dual_gemm", "dual_gemm+gemm", "pad_dual_gemm"), "plain": ("gemm_act",)}
PROBE_PASSES = 2

# FUSELENS_PATH=<path> skips the measurement wherever that path applies: the runner sets it for its Nsight Compute
# child process, so the bytes it counts are those of the path the traced run chose (read once, at import).
FORCED_PATH = settings.forced_path()
_DECISIONS: dict[tuple, str] = {}
_GENERATION = [0]  # bumped by clear(): the models' own decision dicts (fuselens_forward) start over
_PROBES: dict[tuple, dict[str, float]] = {}


def kind_of(model) -> str:
    if isinstance(model, GatedMLP):
        return "gated"
    if isinstance(model, PlainMLP):
        return "plain"
    raise TypeError(f"fuselens: unsupported module {type(model).__name__}")


def decision_key(model, x2d: torch.Tensor) -> tuple:
    """Tokens go by power-of-two bucket: a probe per exact token count would re-time every path at each new batch
    size; within a bucket the GEMMs keep their shape class."""
    kind = kind_of(model)
    h, d = (model.gate_proj if kind == "gated" else model.fc1).weight.shape
    bucket = 1 << max(x2d.shape[0] - 1, 0).bit_length()
    return (x2d.get_device(), kind, model.activation, x2d.dtype, bucket, d, h)  # device -1: CPU


def _param(model, sub: str, name: str = "weight"):
    # model.<sub>.<name> without nn.Module.__getattr__ (two of them per weight: ~1.8 us on the 2-core dev box, where
    # the three weights of a gated MLP cost 5.5 us per forward this way and 0.2 us through the dicts)
    return model._modules[sub]._parameters[name]


# (tag, id(first weight)) -> (weak references to the weights, their versions, the derived tensor): weight copies the
# paths need (concatenated, padded), built once and rebuilt when a weight changes in place (version counter) or is
# replaced; dropped when the first weight is freed, and for the paths a probe did not choose (_drop_unchosen).
_DERIVED: dict[tuple, tuple] = {}


def _derived(tag: str, weights: tuple, build):
    key = (tag, id(weights[0]))
    hit = _DERIVED.get(key)
    if hit is not None:
        refs, versions, value = hit
        if all(r() is w for r, w in zip(refs, weights, strict=True)) and versions == tuple(w._version for w in weights):
            return value
    value = build(*weights)
    if hit is None or hit[0][0]() is not weights[0]:
        weakref.finalize(weights[0], _DERIVED.pop, key, None)
    _DERIVED[key] = (tuple(weakref.ref(w) for w in weights), tuple(w._version for w in weights), value)
    return value


def _aligned_width(d: int, dtype: torch.dtype) -> int:
    """The smallest width >= d whose rows are a multiple of 16 bytes (what TMA and cuBLAS's vector kernels need)."""
    per16 = 16 // dtype.itemsize
    return -(-d // per16) * per16


def _pad_cols(w: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(w, (0, width - w.shape[1])).contiguous()


def _pad_rows(w: torch.Tensor, height: int) -> torch.Tensor:
    return F.pad(w, (0, 0, 0, height - w.shape[0])).contiguous()


def pad_applies(model, x2d: torch.Tensor) -> bool:
    d = x2d.shape[1]
    return isinstance(model, GatedMLP) and _aligned_width(d, x2d.dtype) != d


def _cat_gating(x2d, w_cat, wd, activation):
    y = F.linear(x2d, w_cat)
    h = w_cat.shape[0] // 2
    return F.linear(ops.glu_gating(y[:, :h], y[:, h:], activation), wd)


def run_path(path: str, model, x2d: torch.Tensor) -> torch.Tensor:
    """The forward of `model` on 2-D x through one path."""
    if isinstance(model, GatedMLP):
        wg, wu, wd = _param(model, "gate_proj"), _param(model, "up_proj"), _param(model, "down_proj")
        if path == "dual_gemm":
            return F.linear(ops.dual_gemm_glu(x2d, wg, wu, model.activation), wd)
        if path == "dual_gemm+gemm":
            return ops.gemm_bias_act(ops.dual_gemm_glu(x2d, wg, wu, model.activation), wd, None, "identity")
        if path == "gating":
            return F.linear(ops.glu_gating(F.linear(x2d, wg), F.linear(x2d, wu), model.activation), wd)
        if path == "cat_gating":
            return _cat_gating(x2d, _derived("cat", (wg, wu), lambda a, b: torch.cat((a, b))), wd, model.activation)
        if path in PAD_PATHS:
            d = x2d.shape[1]
            dp = _aligned_width(d, x2d.dtype)
            xp = F.pad(x2d, (0, dp - d))
            wd_p = _derived("pad_down", (wd,), lambda w: _pad_rows(w, dp))
            if path == "pad_dual_gemm":
                wg_p, wu_p = _derived("pad_gate_up", (wg, wu), lambda a, b: (_pad_cols(a, dp), _pad_cols(b, dp)))
                y = F.linear(ops.dual_gemm_glu(xp, wg_p, wu_p, model.activation), wd_p)
            else:
                w_cat = _derived("pad_cat", (wg, wu), lambda a, b: _pad_cols(torch.cat((a, b)), dp))
                y = _cat_gating(xp, w_cat, wd_p, model.activation)
            return y[:, :d]
    elif isinstance(model, PlainMLP) and path == "gemm_act":
        h = ops.gemm_bias_act(x2d, _param(model, "fc1"), _param(model, "fc1", "bias"), "gelu")
        return F.linear(h, _param(model, "fc2"), _param(model, "fc2", "bias"))
    if path == "aten":
        return model(x2d)
    raise ValueError(f"fuselens: path {path!r} does not apply to {type(model).__name__}")


_PATH_TAGS = {
    "cat_gating": ("cat",),
    "pad_dual_gemm": ("pad_down", "pad_gate_up"),
    "pad_cat_gating": ("pad_down", "pad_cat"),
}


def _drop_unchosen(model, chosen: str) -> None:
    """Free the weight copies of the candidates a probe did not choose (a Llama-3-8B layer's concatenated gate/up
    weight is 235 MB)."""
    keep = set(_PATH_TAGS.get(chosen, ()))
    ids = {id(_param(model, n)) for n in ("gate_proj", "up_proj", "down_proj")}
    for key in [k for k in _DERIVED if k[1] in ids and k[0] not in keep]:
        _DERIVED.pop(key, None)


def tma_down_applies(model, x2d: torch.Tensor) -> bool:
    """dual_gemm+gemm is a candidate only where our down GEMM runs the TMA kernel (its input, the dual GEMM's fresh
    [M, h] output, and the weight are TMA-able): elsewhere it would be the pointer kernel against cuBLAS."""
    from kernels.ops import hopper_gemm

    wd = model.down_proj.weight
    return hopper_gemm.usable(x2d.new_empty((x2d.shape[0], wd.shape[1])), wd)


def _time_us(fn) -> float:
    from kernels.ops.timing import median_us

    n = 40
    est = median_us(fn, n_iter=5, warmup=0, flush_l2=True)["median_us"]
    if est > 2000:  # a 4 ms LLM forward: 10 calls are plenty, and keep the probe under ~0.3 s per path
        n = 10
    return median_us(fn, n_iter=n, warmup=0, flush_l2=True)["median_us"]


def choose(model, x2d: torch.Tensor) -> str:
    """The path for this call: cached, or measured now."""
    key = decision_key(model, x2d)
    path = _DECISIONS.get(key)
    if path is not None:
        return path
    paths = [p for p in PATHS[key[1]] if p != "dual_gemm+gemm" or tma_down_applies(model, x2d)]
    if not pad_applies(model, x2d):
        paths = [p for p in paths if p not in PAD_PATHS]
    if FORCED_PATH in paths:
        return FORCED_PATH
    if not x2d.is_cuda or torch.cuda.is_current_stream_capturing():
        return paths[0]  # nothing to time here; not cached, so a later eager call still measures
    times: dict[str, list[float]] = {p: [] for p in paths}
    usable = []
    for p in paths:
        try:
            for _ in range(2):  # the first call tunes and compiles the path's Triton kernels
                run_path(p, model, x2d)
            torch.cuda.synchronize()
            usable.append(p)
        except (RuntimeError, ValueError) as exc:  # e.g. out of resources: the path is not a candidate
            reraise_if_fatal(exc, f"the {p} path's first calls")
            if "inference-only" in str(exc):
                raise  # grad mode with weights that need grads: say so, do not fall back to ATen silently
            times[p] = [float("inf")]
            _PROBES.setdefault(key, {})[f"{p} error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    for _ in range(PROBE_PASSES):
        for p in usable:
            times[p].append(_time_us(lambda p=p: run_path(p, model, x2d)))
    means = {p: sum(t) / len(t) for p, t in times.items()}
    path = min(paths, key=lambda p: means[p])
    _DECISIONS[key] = path
    if key[1] == "gated":
        _drop_unchosen(model, path)
    _PROBES.setdefault(key, {}).update({p: round(us, 2) for p, us in means.items()})
    return path


def fuselens_forward(model, x: torch.Tensor) -> torch.Tensor:
    """The `fuselens` variant: the measured-fastest path for this call (see the module docstring).

    Each model keeps its decisions in a small dict of its own, keyed by what varies between its calls (rows, dtype,
    device, activation): decision_key reads the weights' shapes through nn.Module attribute lookups, ~4 us of host
    time per forward on the dev box. clear() empties these too (a generation number)."""
    x2d = x.reshape(-1, x.shape[-1])
    if _is_grad_enabled() and (x.requires_grad or _trains(model)):
        return _train_forward(model, x, x2d)
    mine = model.__dict__.get("_fuselens_paths")
    if mine is None or mine[0] != _GENERATION[0]:
        mine = model.__dict__["_fuselens_paths"] = (_GENERATION[0], {})
    k = (x2d.shape[0], x2d.dtype, x2d.get_device(), getattr(model, "activation", None))
    path = mine[1].get(k)
    if path is None:
        path = choose(model, x2d)
        if _DECISIONS.get(decision_key(model, x2d)) == path:  # measured and cached (not a capture-time default)
            mine[1][k] = path
    if torch.autograd._profiler_enabled():
        with torch.profiler.record_function(f"fuselens::path={path}"):
            y = run_path(path, model, x2d)
    else:
        y = run_path(path, model, x2d)
    return y.view(*x.shape[:-1], y.shape[-1])


# Training (grad mode on and the weights or x need gradients): the paths are the FuseLens training op
# (kernels.models.train_ops: cuBLAS gate/up into one [M, 2h] buffer + our gating kernel + cuBLAS down; backward with
# the activation's backward in the epilogue of dH = dY W_down) and the module's ATen forward, chosen the same way, by
# timing each one's forward + backward (torch.autograd.grad: the probe leaves every .grad untouched).
TRAIN_PATHS = {"gated-train": ("train_fused", "train_dual", "aten"), "plain-train": ("train_fused", "aten")}
PATHS.update(TRAIN_PATHS)
FUSED_PATHS.update({"gated-train": ("train_fused", "train_dual"), "plain-train": ("train_fused",)})
_is_grad_enabled = torch.is_grad_enabled


def _trains(model) -> bool:
    return any(p.requires_grad for p in model._parameters.values()) or any(
        p.requires_grad for m in model._modules.values() for p in m._parameters.values() if p is not None
    )


def train_key(model, x2d: torch.Tensor) -> tuple:
    key = decision_key(model, x2d)
    dtype = _autocast_cast(x2d)(x2d[:0]).dtype  # the dtype the ops run in (autocast's, under autocast)
    return (key[0], f"{key[1]}-train", key[2], dtype, *key[4:])


def _keep(t: torch.Tensor) -> torch.Tensor:
    return t


def _autocast_cast(x2d: torch.Tensor):
    """Mixed precision (fp32 weights under torch.autocast): the training ops take one dtype, so x and the weights go
    to autocast's dtype first, as autocast does for F.linear (differentiable casts: the gradients reach the fp32
    weights through them). The custom ops have no autocast kernel of their own."""
    dev = x2d.device.type
    if not torch.is_autocast_enabled(dev):
        return _keep
    dt = torch.get_autocast_dtype(dev)
    return lambda t: t if t.dtype == dt else t.to(dt)


def run_train_path(path: str, model, x2d: torch.Tensor) -> torch.Tensor:
    """The differentiable forward of `model` on 2-D x through one training path."""
    if path in ("train_fused", "train_dual"):
        from kernels.models import train_ops

        cast = _autocast_cast(x2d)
        if isinstance(model, GatedMLP):
            wg, wu, wd = (cast(_param(model, n)) for n in ("gate_proj", "up_proj", "down_proj"))
            forward = "dual" if path == "train_dual" else "cublas"
            return train_ops.glu_mlp(cast(x2d), wg, wu, wd, model.activation, forward)
        if path == "train_dual":
            raise ValueError("fuselens: train_dual applies to gated MLPs only")
        if isinstance(model, PlainMLP):
            return train_ops.gelu_mlp(
                cast(x2d),
                cast(_param(model, "fc1")),
                cast(_param(model, "fc1", "bias")),
                cast(_param(model, "fc2")),
                cast(_param(model, "fc2", "bias")),
            )
    if path == "aten":
        return model(x2d)
    raise ValueError(f"fuselens: training path {path!r} does not apply to {type(model).__name__}")


def choose_train(model, x2d: torch.Tensor) -> str:
    key = train_key(model, x2d)
    path = _DECISIONS.get(key)
    if path is not None:
        return path
    paths = TRAIN_PATHS[key[1]]
    if "train_dual" in paths:
        from kernels.ops.mlp_backward import save_applies

        if not save_applies(_autocast_cast(x2d)(x2d), _param(model, "gate_proj"), _param(model, "up_proj")):
            paths = tuple(p for p in paths if p != "train_dual")
    if FORCED_PATH in paths:
        return FORCED_PATH
    if not x2d.is_cuda or torch.cuda.is_current_stream_capturing():
        return paths[0]
    wrt = [p for p in model.parameters() if p.requires_grad] + ([x2d] if x2d.requires_grad else [])
    gy = torch.randn((x2d.shape[0], model.parameters().__next__().shape[1]), device=x2d.device, dtype=key[3])

    def step(p):
        torch.autograd.grad(run_train_path(p, model, x2d), wrt, gy)

    times: dict[str, list[float]] = {p: [] for p in paths}
    usable = []
    for p in paths:
        try:
            for _ in range(2):  # the first call tunes the path's kernels
                step(p)
            torch.cuda.synchronize()
            usable.append(p)
        except (RuntimeError, ValueError) as exc:  # e.g. out of resources: the path is not a candidate
            reraise_if_fatal(exc, f"the {p} path's first calls")
            times[p] = [float("inf")]
            _PROBES.setdefault(key, {})[f"{p} error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    for _ in range(PROBE_PASSES):
        for p in usable:
            times[p].append(_time_us(lambda p=p: step(p)))
    means = {p: sum(t) / len(t) for p, t in times.items()}
    path = min(paths, key=lambda p: means[p])
    _DECISIONS[key] = path
    _PROBES.setdefault(key, {}).update({p: round(us, 2) for p, us in means.items()})
    return path


def _train_forward(model, x: torch.Tensor, x2d: torch.Tensor) -> torch.Tensor:
    path = choose_train(model, x2d)
    if torch.autograd._profiler_enabled():
        with torch.profiler.record_function(f"fuselens::path={path}"):
            y = run_train_path(path, model, x2d)
    else:
        y = run_train_path(path, model, x2d)
    return y.view(*x.shape[:-1], y.shape[-1])


def decisions() -> list[dict]:
    """Every decision made in this process, with the probe's mean µs per path (bench and runner manifests)."""
    names = ("device", "kind", "activation", "dtype", "tokens_bucket", "d_model", "hidden")
    return [
        {**dict(zip(names, key, strict=True)), "dtype": str(key[3]).removeprefix("torch."), "path": path}
        | {"probe_us": _PROBES.get(key, {})}
        for key, path in _DECISIONS.items()
    ]


def decision_for(model, x: torch.Tensor, train: bool = False) -> dict | None:
    """The decision a `fuselens` call on x would use (a training step's with train), or None before the first such
    call."""
    key = (train_key if train else decision_key)(model, x.reshape(-1, x.shape[-1]))
    if key not in _DECISIONS:
        return None
    return {"path": _DECISIONS[key], "probe_us": _PROBES.get(key, {}), "fused": _DECISIONS[key] in FUSED_PATHS[key[1]]}


def clear() -> None:
    _GENERATION[0] += 1
    _DECISIONS.clear()
    _PROBES.clear()
