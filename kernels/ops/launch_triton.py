"""The part of kernels.ops.launch that reads Triton's internals, behind a version gate.

Everything here depends on how a Triton release lays out its launcher; kernels.ops.launch depends only on what
this module returns:
  - `hooks_set()`: whether a launch enter/exit hook is set (profilers such as proton), so launches must take
    Triton's own path. Triton 3.4-3.5 keep each hook as a callable or None, 3.6+ as a HookChain.
  - `TensorDescriptor`, `tensor_desc`, `descriptors`: host-side TMA descriptors (Triton >= 3.4).
  - `launcher_call(hit, a, stream, descriptors)`: a launch through the compiled kernel's launcher object
    (CudaLauncher.__call__(gridX, gridY, gridZ, stream, function, metadata, launch metadata, enter hook, exit hook,
    *args), the same from 3.3 to 3.9).
  - `raw_plan(compiled, a, tail, grid)`: a generated `fire(args, stream)` calling the launcher's C function
    directly with cached TMA encodings, or None. Written against Triton 3.5-3.6 (RAW_VERSIONS): CudaLauncher.__call__
    -> self.launch(grid, stream, function, cooperative, pdl, global scratch, profile scratch, *args), self.launch
    being the C function or, with descriptor arguments, a Python `inner` closure that encodes them first (Triton 3.9
    passes the metadata and hooks as named parameters instead). Outside the gate, or where a check below finds
    another layout, it returns None and every launch uses the launcher object: slower on the host, never wrong.
  - `c_call_source(...)`: the C call as op plans write it out (kernels.ops.launch._replay_code).

Why the C function at all: Triton 3.6's own launch path turns each host TensorDescriptor into a CUtensorMap on every
call (make_tensordesc_arg -> cuTensorMapEncodeTiled, in a Python loop over the arguments); with three descriptors
that was most of the 39 us per TMA op call on an H200 host (docs/KERNELS.md, "Launch"). Here each descriptor's
encoding comes from a cache keyed by what it depends on (data pointer, shape, strides; the launcher entry fixes
dtype and block): weights hit always, activations whenever the caching allocator hands back the same address. The
cache holds encodings, never tensors.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable

import torch
import triton

DESC_CACHE_MAX = 64  # encodings kept per descriptor argument of one launcher entry (then the cache starts over)
RAW_VERSIONS = ((3, 5), (3, 6))  # the Triton releases raw_plan's generated call was written against (inclusive)


def triton_version(text: str) -> tuple[int, int]:
    """(major, minor) of a Triton version string ('3.6.0', '3.5.1+git...'); (0, 0) when it does not parse."""
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def raw_supported(version: tuple[int, int]) -> bool:
    """True for the Triton releases whose launcher raw_plan knows (RAW_VERSIONS)."""
    return RAW_VERSIONS[0] <= version <= RAW_VERSIONS[1]


RAW_SUPPORTED = raw_supported(triton_version(triton.__version__))

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # Triton < 3.4: no host-side descriptors (kernels.ops.hopper_gemm then has no TMA path)
    TensorDescriptor = None


# ---------------------------------------------------------------------------------------------- launch hooks
try:  # Triton >= 3.4: launch enter/exit hooks live in knobs.runtime
    from triton import knobs as _knobs

    _RUNTIME = _knobs.runtime
except (ImportError, AttributeError):
    _RUNTIME = None


def _hook_active(hook) -> bool:
    # Triton 3.6 keeps each hook as a HookChain (never None; active when it holds calls), 3.4-3.5 as a callable or None
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return True if calls is None else bool(calls)


def hooks_set() -> bool:
    """With a launch hook set, launches take Triton's own path, which calls it. (Triton 3.6's own path also builds a
    launch-metadata dict and calls the empty hook chains on every launch, hooks or not; the fast path does neither.)"""
    return _RUNTIME is None or _hook_active(_RUNTIME.launch_enter_hook) or _hook_active(_RUNTIME.launch_exit_hook)


if _RUNTIME is not None and hasattr(_RUNTIME.launch_enter_hook, "calls"):  # Triton 3.6+: one check per launch, inline

    def hooks_set() -> bool:  # noqa: F811
        return bool(_RUNTIME.launch_enter_hook.calls or _RUNTIME.launch_exit_hook.calls)


# ------------------------------------------------------------------------------------------- TMA descriptors
_DESC_TEMPLATES: dict[tuple, object] = {}


def tensor_desc(t: torch.Tensor, block: tuple):
    """TensorDescriptor(t, t.shape, t.stride(), block) for a tensor the wrapper already checked (16-byte aligned base
    and rows, contiguous last dim, no empty dim): the first one per (dtype, block) is built and validated by Triton;
    later ones copy its fields and set base, shape and strides, skipping __post_init__'s checks (~2 us of host time
    per descriptor)."""
    tmpl = _DESC_TEMPLATES.get((t.dtype, block))
    if tmpl is None:
        d = TensorDescriptor(t, t.shape, t.stride(), list(block))
        tmpl = object.__new__(TensorDescriptor)
        tmpl.__dict__.update(d.__dict__)
        tmpl.base = None  # the template holds no tensor
        _DESC_TEMPLATES[(t.dtype, block)] = tmpl
        return d
    d = object.__new__(TensorDescriptor)
    d.__dict__.update(tmpl.__dict__)
    d.base, d.shape, d.strides = t, t.shape, t.stride()
    return d


def descriptors(a) -> tuple:
    """The arguments with each (tensor, block) pair made a TensorDescriptor (Triton's own launch path)."""
    return tuple(tensor_desc(v[0], v[1]) if type(v) is tuple else v for v in a)


def _encode(make, n_params: int, t: torch.Tensor, block, meta) -> list:
    """[CUtensorMap, *shape, *strides]: what Triton's launcher passes for one descriptor argument."""
    d = tensor_desc(t, block)
    return make(d, meta) if n_params == 2 else make(d, meta, None)


def desc_lookup(make, n_params: int, meta) -> Callable:
    """(tensor, block) -> Triton's [CUtensorMap, *shape, *strides] for one descriptor argument, from a cache keyed by
    what the encoding depends on (the launcher entry fixes dtype and block)."""
    cache: dict = {}

    def lookup(v):
        t, block = v
        k = (t.data_ptr(), t.shape, t.stride())
        enc = cache.get(k)
        if enc is None:
            if len(cache) >= DESC_CACHE_MAX:
                cache.clear()
            enc = cache[k] = _encode(make, n_params, t, block, meta)
        return enc

    lookup.cache = cache
    return lookup


def ptr_keyed(lookup: Callable, block) -> Callable:
    """tensor -> lookup((tensor, block)), cached by the tensor's data pointer alone: for op plans, whose key fixes
    shapes and strides."""
    cache: dict = {}

    def by_ptr(t):
        p = t.data_ptr()
        enc = cache.get(p)
        if enc is None:
            if len(cache) >= DESC_CACHE_MAX:
                cache.clear()
            enc = cache[p] = lookup((t, block))
        return enc

    by_ptr.cache = cache
    return by_ptr


# ------------------------------------------------------------------------------------------------ launching
def cacheable(compiled) -> bool:
    """Whether a compiled kernel exposes what launcher_call needs (a launcher entry is cached only then)."""
    return all(hasattr(compiled, n) for n in ("run", "function", "packed_metadata"))


def launcher_call(hit: tuple, a, stream: int, descriptors: Callable = descriptors) -> None:
    """One launch of a cached launcher entry (key, config, compiled kernel, constexpr tail, grid, raw fire) through
    the compiled kernel's launcher object; `descriptors` makes the (tensor, block) pairs the objects it takes."""
    _key, _cfg, compiled, tail, g, _ = hit
    compiled.run(
        g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata, None, None, None,
        *descriptors(a), *tail,
    )  # fmt: skip


def _c_args(kinds: tuple, arg: Callable[[int], str], desc: Callable[[int], str]) -> list[str]:
    """Each runtime argument as the C function takes it: a TMA descriptor as its cached encoding (spread), a tensor
    as its data pointer (an int: the C function then skips its data_ptr call and the cuPointerGetAttribute check per
    pointer argument; the wrappers have checked the devices), anything else as is."""
    out = []
    for i, kind in enumerate(kinds):
        if kind == "desc":
            out.append(f"*{desc(i)}({arg(i)})")
        elif kind == "ptr":
            out.append(f"{arg(i)}.data_ptr()")
        else:
            out.append(arg(i))
    return out


def fire_source(kinds: tuple) -> str:
    """The source of a launcher entry's `fire(a, stream)`: one call of the C function `_fn` with the 13 leading
    arguments (grid, stream, function, cooperative, pdl, the two scratch buffers, kernel metadata, launch metadata,
    enter and exit hooks), the runtime arguments `a` per `kinds` ('desc' | 'ptr' | 'val') and the constexpr tail."""
    parts = _c_args(kinds, lambda i: f"a[{i}]", lambda i: f"_d{i}")
    return (
        "def fire(a, stream):\n"
        f"    _fn(_g[0], _g[1], _g[2], stream, _f, *_h, _m, None, None, None, {', '.join(parts)}, *_tail)\n"
    )


def c_call_source(k: int, grid: tuple, function: int, kinds: tuple, tensors: list[str]) -> str:
    """The C call of launch k of an op plan, written out as fire_source writes it: `_fn{k}`, `_hd{k}`, `_m{k}`,
    `_tl{k}` and `_e{k}_{j}` (descriptor encodings by data pointer) are names in the plan's namespace; `tensors`
    holds each argument's expression."""
    parts = _c_args(kinds, lambda j: tensors[j], lambda j: f"_e{k}_{j}")
    dims = ", ".join(str(int(n)) for n in grid)
    return f"_fn{k}({dims}, stream, {int(function)}, *_hd{k}, _m{k}, None, None, None, {', '.join(parts)}, *_tl{k})"


def make_fire(fn, grid: tuple, function, head: tuple, metadata, tail: tuple, kinds: tuple, lookups: dict, name: str):
    """fire(a, stream) from fire_source, generated per launcher entry so a call is one Python frame around the C
    call. lookups: {argument index: desc_lookup} for the descriptor arguments."""
    ns = {"_fn": fn, "_g": tuple(grid), "_f": function, "_h": head, "_m": metadata, "_tail": tuple(tail)}
    ns.update({f"_d{i}": lk for i, lk in lookups.items()})
    src = fire_source(kinds)
    exec(compile(src, f"<fuselens launch {name}>", "exec"), ns)  # noqa: S102
    fire = ns["fire"]
    fire.kinds = kinds  # for op plans (c_call_source), which write the C call out themselves
    fire.ns = ns
    fire.source = src
    return fire


def raw_plan(compiled, a: tuple, tail: tuple, grid: tuple):
    """A `fire(args, stream)` calling the generated C launch function of a compiled kernel directly (make_fire), or
    None where this Triton's launcher is not the one this was written against (RAW_VERSIONS and the checks below).
    `a`: this launch's runtime arguments ((tensor, block) pairs for descriptors)."""
    if not RAW_SUPPORTED:
        return None
    try:
        from triton.backends.nvidia import driver as nv

        launcher = compiled.run
        params = list(inspect.signature(type(launcher).__call__).parameters)
        if params != ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]:
            return None
        if getattr(launcher, "global_scratch_size", 0) or getattr(launcher, "profile_scratch_size", 0):
            return None  # the launcher would allocate scratch per call
        fn = launcher.launch
        metas = {}
        desc_at = [i for i, v in enumerate(a) if type(v) is tuple]
        if not isinstance(fn, types.BuiltinFunctionType):
            free = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ()), strict=True))
            raw, indices, tmetas = free.get("launcher"), free.get("tensordesc_indices"), free.get("tensordesc_meta")
            if not isinstance(raw, types.BuiltinFunctionType) or indices is None or tmetas is None:
                return None
            if sorted(indices) != desc_at or None in tmetas:
                return None  # descriptors where the wrapper passed none, or lowered without TMA
            metas = dict(zip(desc_at, tmetas, strict=True))
            fn = raw
        elif desc_at:
            return None
        make = nv.make_tensordesc_arg
        n_params = len(inspect.signature(make).parameters)
        if metas and n_params not in (2, 3):
            return None
        head = (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None)
        # the C function's leading arguments: grid (3), stream, function, head, kernel metadata, launch metadata and
        # the two hooks; a Triton whose format differs is left on its own launcher object
        marked = hasattr(launcher, "profile_scratch_size") and hasattr(launcher, "launch_pdl")  # "iiiKKppOOOOOO"
        if getattr(nv, "_BASE_ARGS_FORMAT_LEN", 13 if marked else None) != 5 + len(head) + 4:
            return None
        kinds = tuple(
            "desc" if i in metas else "ptr" if isinstance(v, torch.Tensor) else "val" for i, v in enumerate(a)
        )
        lookups = {i: desc_lookup(make, n_params, m) for i, m in metas.items()}
        name = getattr(compiled, "name", "")
        return make_fire(fn, grid, compiled.function, head, compiled.packed_metadata, tail, kinds, lookups, name)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
