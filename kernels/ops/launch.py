"""How the shipped Triton kernels are tuned and launched: explicit keys, one tuning per key, then the compiled kernel
called directly.

Why not `triton.autotune` + `kernel[grid](...)`:
  - Keys. triton.autotune keys on the names it is given plus the dtypes of arguments that HAVE a dtype; a TMA
    tensor descriptor has none, and the activation (a constexpr) was not in our keys, so a second model of the same
    shape (SwiGLU after GEGLU, fp16 after bf16) reused the first one's tuning. Here the key is built by each
    wrapper and always holds the device, dtype, activation and every other constexpr flag.
  - Host time. Every call through the autotuner builds argument dicts, runs the config's pre_hook and then
    JITFunction.run binds and specialises every argument again: 30-40 us of the 47-85 us of host time per op call
    measured on the H100 host (docs/KERNELS.md, run 9d). After the first call for a key, `launch` calls the
    compiled kernel's launcher with a cached grid rule and the constexpr tail already in signature order.

TMA descriptors: a wrapper passes a (tensor, block) pair where the kernel takes a tensor descriptor. Triton 3.6's own
launch path turns each host TensorDescriptor into a CUtensorMap on every call (make_tensordesc_arg ->
cuTensorMapEncodeTiled, in a Python loop over the arguments): with three descriptors that was most of the 39 us per
TMA op call on the r2 H200 host. Here the fast path calls the generated C launcher itself (`_raw_plan`) with each
descriptor's encoding taken from a cache keyed by what the encoding depends on (data pointer, shape, strides; the
launcher entry fixes dtype and block): weights hit always, and activations hit whenever the caching allocator hands
back the same address. The cache holds encodings, never tensors.

Specialisation: Triton compiles a kernel per "specialisation" of its integer and pointer arguments (an int equal to 1,
or divisible by 16; a pointer 16-byte aligned). A compiled kernel reused for an argument outside its specialisation
would read misaligned memory, so a launcher is cached per `spec`: the raw sizes and strides, the pointers'
alignment (data_ptr & 15), the device, dtype and constexpr flags, which fix the specialisation and the grid too.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import types
import weakref
from collections.abc import Callable
from threading import get_ident

import torch

from kernels.ops.triton_util import INTERPRETING, timed_both_ways

# FUSELENS_FAST_LAUNCH=0 sends every call through JITFunction.run (scripts/host_overhead.py times both ways).
FAST_LAUNCH = os.environ.get("FUSELENS_FAST_LAUNCH", "1") != "0"
# FUSELENS_RAW_LAUNCH=0 keeps the fast path on Triton's launcher object (CudaLauncher.__call__, which encodes every
# TMA descriptor per call) instead of the generated C launch function with cached encodings.
RAW_LAUNCH = os.environ.get("FUSELENS_RAW_LAUNCH", "1") != "0"
_DESC_CACHE_MAX = 64  # encodings kept per descriptor argument of one launcher entry (then the cache starts over)

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # Triton < 3.4: no host-side descriptors (kernels.ops.hopper_gemm then has no TMA path)
    TensorDescriptor = None


try:  # Triton >= 3.4: launch enter/exit hooks (set by profilers such as proton) live in knobs.runtime
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


def _hooks_set() -> bool:
    """With a launch hook set, launches take Triton's own path, which calls it. (Triton 3.6's own path also builds a
    launch-metadata dict and calls the empty hook chains on every launch, hooks or not; the fast path does neither.)"""
    return _RUNTIME is None or _hook_active(_RUNTIME.launch_enter_hook) or _hook_active(_RUNTIME.launch_exit_hook)


if _RUNTIME is not None and hasattr(_RUNTIME.launch_enter_hook, "calls"):  # Triton 3.6: one check per launch, inline

    def _hooks_set() -> bool:  # noqa: F811
        return bool(_RUNTIME.launch_enter_hook.calls or _RUNTIME.launch_exit_hook.calls)


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


def _descriptors(a) -> tuple:
    """The arguments with each (tensor, block) pair made a TensorDescriptor (Triton's own launch path)."""
    return tuple(tensor_desc(v[0], v[1]) if type(v) is tuple else v for v in a)


def _raw_plan(compiled, a: tuple, tail: tuple, grid: tuple):
    """A function fire(args, stream) calling the generated C launch function of a compiled kernel directly, or None
    where this Triton's launcher is not the one this was written against (Triton 3.5-3.6: CudaLauncher.__call__(gridX,
    gridY, gridZ, stream, function, *args) -> self.launch(grid, stream, function, cooperative, pdl, global scratch,
    profile scratch, *args), self.launch being the C function or, with descriptor arguments, a Python `inner` that
    encodes them and then calls it). `a`: this launch's runtime arguments ((tensor, block) pairs for descriptors).

    fire passes each tensor as its data pointer (an int: the C function then skips its data_ptr call and the
    cuPointerGetAttribute check per pointer argument; the wrappers have checked the devices) and each descriptor as
    its cached encoding; it is generated per launcher entry, so a call is one Python frame around the C call."""
    if not RAW_LAUNCH:
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
        ns = {"_fn": fn, "_g": tuple(grid), "_f": compiled.function, "_h": head, "_m": compiled.packed_metadata}
        ns["_tail"] = tuple(tail)
        parts = []
        for i, v in enumerate(a):
            if i in metas:
                ns[f"_d{i}"] = _desc_lookup(make, n_params, metas[i])
                parts.append(f"*_d{i}(a[{i}])")
            elif isinstance(v, torch.Tensor):
                parts.append(f"a[{i}].data_ptr()")
            else:
                parts.append(f"a[{i}]")
        src = (
            "def fire(a, stream):\n"
            f"    _fn(_g[0], _g[1], _g[2], stream, _f, *_h, _m, None, None, None, {', '.join(parts)}, *_tail)\n"
        )
        exec(compile(src, f"<fuselens launch {getattr(compiled, 'name', '')}>", "exec"), ns)  # noqa: S102
        fire = ns["fire"]
        # for op plans (_replay_code), which write the C call out themselves: what each argument is
        fire.kinds = tuple(
            "desc" if i in metas else "ptr" if isinstance(v, torch.Tensor) else "val" for i, v in enumerate(a)
        )
        fire.ns = ns
        return fire
    except (ImportError, AttributeError, TypeError, ValueError):
        return None


def _ptr_keyed(lookup: Callable, block) -> Callable:
    """tensor -> lookup((tensor, block)), cached by the tensor's data pointer alone: for op plans, whose key fixes
    shapes and strides."""
    cache: dict = {}

    def by_ptr(t):
        p = t.data_ptr()
        enc = cache.get(p)
        if enc is None:
            if len(cache) >= _DESC_CACHE_MAX:
                cache.clear()
            enc = cache[p] = lookup((t, block))
        return enc

    by_ptr.cache = cache
    return by_ptr


def _desc_lookup(make, n_params: int, meta) -> Callable:
    """(tensor, block) -> Triton's [CUtensorMap, *shape, *strides] for one descriptor argument, from a cache keyed by
    what the encoding depends on (the launcher entry fixes dtype and block)."""
    cache: dict = {}

    def lookup(v):
        t, block = v
        k = (t.data_ptr(), t.shape, t.stride())
        enc = cache.get(k)
        if enc is None:
            if len(cache) >= _DESC_CACHE_MAX:
                cache.clear()
            enc = cache[k] = _encode(make, n_params, t, block, meta)
        return enc

    lookup.cache = cache
    return lookup


def _encode(make, n_params: int, t: torch.Tensor, block, meta) -> list:
    """[CUtensorMap, *shape, *strides]: what Triton's launcher passes for one descriptor argument."""
    d = tensor_desc(t, block)
    return make(d, meta) if n_params == 2 else make(d, meta, None)


def _fire(hit: tuple, a, device_index: int, descriptors: Callable = _descriptors) -> None:
    """One launch from a cached launcher entry (key, config, compiled kernel, constexpr tail, grid, raw fire) with the
    runtime arguments `a` ((tensor, block) pairs where the kernel takes a TMA descriptor; `descriptors` makes them
    the objects Triton's own launcher takes)."""
    stream = torch._C._cuda_getCurrentRawStream(device_index)
    fire = hit[5]
    if fire is not None:
        try:
            fire(a, stream)
            return
        except TypeError:  # arguments the C function's format refuses (_raw_plan misread this Triton): its own path
            pass
    _key, _cfg, compiled, tail, g, _ = hit
    compiled.run(
        g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata, None, None, None,
        *descriptors(a), *tail,
    )  # fmt: skip


# ---------------------------------------------------------------- op plans: one op call replayed as its launches
# An op call (kernels.models.custom_ops) validates its inputs, picks a kernel (TMA or pointer), allocates its output and
# builds each launch's arguments: ~10-20 us of Python on the r1/r2 hosts, the same work every call for inputs of the
# same shapes, strides, dtypes and alignment. `Plans` records the launches of one such call (the second with a given
# key: the first may tune and measure) and replays them for later calls with the same key: allocate the output,
# substitute this call's tensors into the recorded arguments, fire each launch from its cached launcher entry. Recorded
# tensors that are neither an input nor the output (a weight copy such as the interleaved gate/up weight) are held by
# weak reference: the key names the weights' identity and version, and a copy that was freed (its weight freed or
# updated) voids the plan. A plan applies only when the call's GPU work is exactly its recorded launches (every wrapper
# here: other work, such as a .contiguous() copy, makes a temporary tensor that is dead when the plan is built, and such
# calls are not planned).
_RECORDING: dict[int, list] = {}  # thread id -> the launches of the call it is recording


def _record(tuned, spec, hit, a) -> None:
    rec = _RECORDING.get(get_ident())
    if rec is not None:
        rec.append((tuned, spec, hit, a))


OP_PLANS = os.environ.get("FUSELENS_OP_PLANS", "1") != "0"
_PLANS_MAX = 256  # plans kept per op (then the dict starts over)
_BUILDING = object()


class Plans:
    """The plans of one op: key -> plan, _BUILDING (seen once: record the next call) or None (not plannable)."""

    def __init__(self, name: str):
        self.name = name
        self.plans: dict = {}
        self.replays = 0  # calls served by a plan (tests count them)

    def call(self, key, impl: Callable, inputs: tuple, rest: tuple):
        """impl(*inputs, *rest), through a plan when one applies. inputs: the op's tensor arguments (or None)."""
        plan = self.plans.get(key)
        if plan is not None and plan is not _BUILDING and FAST_LAUNCH and OP_PLANS and not _hooks_set():
            out = plan(inputs)
            if out is not None:
                self.replays += 1
                return out
            self.plans.pop(key, None)
            plan = None
        if INTERPRETING or not (FAST_LAUNCH and OP_PLANS):
            return impl(*inputs, *rest)
        if plan is None:
            out = impl(*inputs, *rest)  # raises for bad inputs before any plan is kept
            if key not in self.plans:  # None: not plannable
                if len(self.plans) >= _PLANS_MAX:
                    self.plans.clear()
                self.plans[key] = _BUILDING  # the first call may tune and measure: record the second
            return out
        if plan is not _BUILDING or torch.cuda.is_current_stream_capturing():  # a plan while hooks are set; capture
            return impl(*inputs, *rest)
        rec = _RECORDING[get_ident()] = []  # this thread's launches only
        try:
            out = impl(*inputs, *rest)
        finally:
            _RECORDING.pop(get_ident(), None)
        try:
            built = _build_plan(rec, inputs, out)
        except (TypeError, ValueError, AttributeError, KeyError, SyntaxError):  # a launcher this code cannot write out
            built = None
        del rec  # a temporary tensor of this call (held only by the record) must be dead before the check below
        self.plans[key] = built[0] if built is not None and all(r() is not None for r in built[1]) else None
        return out


def _build_plan(rec: list, inputs: tuple, out):
    """(callable(inputs) -> output replaying the recorded launches, its weak references), or None where the call is
    not plannable."""
    if not rec or not isinstance(out, torch.Tensor) or not out.is_contiguous():
        return None
    ids = {id(t): i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
    if len(ids) != sum(isinstance(t, torch.Tensor) for t in inputs):
        return None  # one tensor passed twice: the recorded arguments could not tell the two apart
    launches = []
    weak = []
    out_seen = False
    for tuned, spec, hit, a in rec:
        if hit is None:
            return None
        tmpl = []
        for v in a:
            t, block = v if type(v) is tuple else (v, None)
            if isinstance(t, torch.Tensor):
                if t is out:
                    ref, out_seen = ("out",), True
                elif id(t) in ids:
                    ref = ("in", ids[id(t)])
                else:
                    ref = ("weak", weakref.ref(t))
                    weak.append(ref[1])
            else:
                ref = ("const", t)
            tmpl.append((ref, block))
        launches.append((tuned, spec, hit, tuple(tmpl)))
    if not out_seen:
        return None
    shape, device_index = tuple(out.shape), out.get_device()
    first = next(i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor))
    if inputs[first].dtype != out.dtype or inputs[first].get_device() != device_index:
        return None
    a = t = v = out = rec = None  # the caller checks the weak references once this call's temporaries are gone
    return _replay_code(launches, first, shape, device_index), weak


def _replay_code(launches: list, first: int, shape: tuple, device_index: int) -> Callable:
    """The plan as one generated function: allocate the output, check each launcher entry is still the cached one,
    dereference the weight copies, and call each entry's `fire` with this call's arguments written out (no loop
    over a template per call: ~13 list appends and branches per launch on the r1 H100 host's cProfile)."""
    ns = {"_stream": getattr(torch._C, "_cuda_getCurrentRawStream", None), "_dev": device_index}
    ns["_slow"] = _fire
    # the sizes as literal ints: new_empty(16, 3072) parses ~0.5 us faster than new_empty((16, 3072)) (dev box)
    dims = ", ".join(str(int(n)) for n in shape) or "()"
    lines = ["def replay(inputs):", f"    o = inputs[{first}].new_empty({dims})", "    stream = _stream(_dev)"]
    for k, (tuned, spec, hit, tmpl) in enumerate(launches):
        ns.update({f"_t{k}": tuned, f"_s{k}": spec, f"_h{k}": hit, f"_k{k}": hit[0], f"_c{k}": hit[1]})
        lines.append(f"    if _t{k}._launchers.get(_s{k}) is not _h{k} or _t{k}.cache.get(_k{k}) is not _c{k}:")
        lines.append("        return None")
        args, tensors = [], []  # each argument as Triton's launcher takes it; the tensor expression alone
        for j, (ref, block) in enumerate(tmpl):
            kind = ref[0]
            if kind == "in":
                v = f"inputs[{ref[1]}]"
            elif kind == "out":
                v = "o"
            elif kind == "const":
                ns[f"_v{k}_{j}"] = ref[1]
                v = f"_v{k}_{j}"
            else:
                ns[f"_w{k}_{j}"] = ref[1]
                lines.append(f"    w{k}_{j} = _w{k}_{j}()")
                lines.append(f"    if w{k}_{j} is None:")
                lines.append("        return None")
                v = f"w{k}_{j}"
            tensors.append(v)
            if block is not None:
                ns[f"_b{k}_{j}"] = block
                v = f"({v}, _b{k}_{j})"
            args.append(v)
        call_args = f"({', '.join(args)},)"
        fire = hit[5]
        if fire is None:
            lines.append(f"    _slow(_h{k}, {call_args}, _dev)")
            continue
        # the C call written out (as `fire` makes it): pointers as ints, descriptors from a cache keyed by the data
        # pointer alone (the plan's key fixes the inputs' shapes and strides; the output's are the plan's own)
        fns = fire.ns
        ns.update({f"_fn{k}": fns["_fn"], f"_m{k}": fns["_m"], f"_tl{k}": fns["_tail"], f"_hd{k}": fns["_h"]})
        grid = ", ".join(str(int(n)) for n in fns["_g"])
        c_args = []
        for j, (kind, t) in enumerate(zip(fire.kinds, tensors, strict=True)):
            if kind == "ptr":
                c_args.append(f"{t}.data_ptr()")
            elif kind == "desc":
                ns[f"_e{k}_{j}"] = _ptr_keyed(fns[f"_d{j}"], tmpl[j][1])
                c_args.append(f"*_e{k}_{j}({t})")
            else:
                c_args.append(t)
        lines.append("    try:")
        lines.append(
            f"        _fn{k}({grid}, stream, {int(fns['_f'])}, *_hd{k}, _m{k}, None, None, None, {', '.join(c_args)},"
            f" *_tl{k})"
        )
        lines.append("    except TypeError:")
        lines.append(f"        _slow(_h{k}, {call_args}, _dev)")
    lines.append("    return o")
    exec(compile("\n".join(lines) + "\n", "<fuselens op plan>", "exec"), ns)  # noqa: S102
    replay = ns["replay"]
    replay.launches = len(launches)  # for scripts/host_overhead.py's diagnostics
    replay.desc_caches = [v.cache for k, v in ns.items() if k.startswith("_e")]
    return replay


TUNED: list = []  # every Tuned and Fixed, for forget_launchers


def constexpr_tail(kernel, n_args: int, consts: dict) -> tuple | None:
    """The constexpr arguments after the n_args runtime ones, in signature order, or None when the signature is not
    (runtime args, then exactly these constexprs): then every call takes the full path."""
    names = list(getattr(kernel, "arg_names", ()))
    if len(names) != n_args + len(consts) or set(names[n_args:]) != set(consts):
        return None
    return tuple(consts[n] for n in names[n_args:])


def forget_launchers() -> None:
    """Drop every cached launcher (tunings stay): the next call of each kernel takes the full path once and builds
    its launcher again, under the current FAST_LAUNCH / RAW_LAUNCH settings (scripts/host_overhead.py)."""
    for t in TUNED:
        t._launchers.clear()


class Tuned:
    """One Triton kernel with its candidate configs.

    cache:  key -> the chosen triton.Config (tools force a config by replacing `configs` and clearing `cache`);
    timings: key -> {config text: median us} from the tuning run, for the bench and the sweep to report."""

    def __init__(self, kernel, configs, name: str, prune: Callable | None = None):
        self.kernel = kernel
        self.configs = list(configs)
        self.name = name
        self.prune = prune  # (configs, prune_arg) -> the configs worth timing for this call
        self.cache: dict = {}
        self.timings: dict = {}
        self._launchers: dict = {}  # spec -> (key, config, compiled kernel, constexpr tail, grid, raw fire)
        self.slow_calls = 0  # launches that went through JITFunction.run (tests count them)
        self.forcing = False  # a tool holds one config (forced): callers then run this kernel, not an alternative
        self.signature_ok: bool | None = None  # interpreter runs: would the GPU path cache a launcher
        TUNED.append(self)

    def clear(self) -> None:
        self.cache.clear()
        self._launchers.clear()

    def launch(
        self,
        spec: tuple,
        key_fn: Callable,
        args,
        consts_fn: Callable,
        grid_fn: Callable,
        device_index: int,
        prune_arg=None,
        interp_config=None,
    ):
        """Run the kernel once.
        spec: a tuple that fixes everything the launch depends on (device, dtype, constexpr flags, the raw sizes
              and strides, pointer alignment): the cached launcher's key;
        key_fn(): the tuning key (device, dtype, flags, sizes or their bucket), computed on a launcher miss only;
        args: the kernel's leading runtime arguments in signature order, or a callable(cfg) returning them (TMA
              descriptors depend on the config's tile);
        consts_fn(cfg): the constexpr arguments other than the config's; grid_fn(cfg): a 3-tuple."""
        if INTERPRETING:
            cfg = interp_config
            a = _descriptors(args(cfg) if callable(args) else args)
            consts = consts_fn(cfg)
            self.kernel[grid_fn(cfg)](*a, **consts, **cfg.kwargs)
            # what the GPU path's launcher cache needs (runtime args first, then exactly these constexprs), checked
            # here too so CPU tests catch a wrapper whose arguments would leave every GPU call on the slow path
            self.signature_ok = self._tail(len(a), {**consts, **cfg.kwargs}) is not None
            return
        if FAST_LAUNCH:
            hit = self._launchers.get(spec)
            if hit is not None and self.cache.get(hit[0]) is hit[1] and not _hooks_set():
                a = args(hit[1]) if callable(args) else args
                _fire(hit, a, device_index)
                if _RECORDING:
                    _record(self, spec, hit, a)
                return
        key = key_fn()
        cfg = self.cache.get(key)
        if cfg is None:
            cfg = self._choose(key, args, consts_fn, grid_fn, prune_arg)
        self.slow_calls += 1
        a = args(cfg) if callable(args) else args
        consts = consts_fn(cfg)
        grid = grid_fn(cfg)
        compiled = self.kernel.run(*_descriptors(a), grid=grid, warmup=False, **consts, **cfg.all_kwargs())
        tail = self._tail(len(a), {**consts, **cfg.kwargs})
        if tail is not None and all(hasattr(compiled, n) for n in ("run", "function", "packed_metadata")):
            self._launchers[spec] = (key, cfg, compiled, tail, grid, _raw_plan(compiled, a, tail, grid))
        if _RECORDING:
            _record(self, spec, self._launchers.get(spec), a)

    def _tail(self, n_args: int, consts: dict) -> tuple | None:
        return constexpr_tail(self.kernel, n_args, consts)

    def _choose(self, key, args, consts_fn, grid_fn, prune_arg):
        configs = self.prune(self.configs, prune_arg) if self.prune else self.configs
        if len(configs) == 1 or torch.cuda.is_current_stream_capturing():
            # nothing to compare, or inside CUDA-graph capture (timing would synchronise): the first candidate
            self.cache[key] = configs[0]
            return configs[0]
        times, calls = {}, {}
        for cfg in configs:

            def call(cfg=cfg):
                a = _descriptors(args(cfg) if callable(args) else args)
                self.kernel.run(*a, grid=grid_fn(cfg), warmup=False, **consts_fn(cfg), **cfg.all_kwargs())

            try:
                call()  # compiles; a config that does not fit (shared memory, registers) raises here
                calls[cfg] = call
            except Exception:  # out of resources: the config is skipped, as triton.autotune skips it
                times[cfg] = float("inf")
        times.update(timed_both_ways(calls))
        best = min(times, key=times.get)
        if times[best] == float("inf"):
            raise RuntimeError(f"{self.name}: no config compiled for key {key}")
        self.cache[key] = best
        self.timings[key] = {config_text(c): t for c, t in times.items()}
        return best


class Fixed:
    """One kernel launched with fixed launch options (no configs to tune: the Gluon dual GEMM), through the same fast
    path as Tuned: the first call per `spec` goes through JITFunction.run, later ones call the compiled kernel's C
    launch function with cached TMA encodings (_raw_plan), or its launcher object where that does not apply.
    JITFunction.run costs ~150-280 us of host time per call on the H100/H200 hosts (scripts/host_overhead.py, "JIT
    run"): longer than the ~110-130 us of GPU work of the calls this kernel gets, so without this a forward timed
    one call at a time (triton.testing.do_bench's way) ran at the host's pace (HF GEGLU: 305-340 us against 163).

    desc: (tensor, block) -> the descriptor object JITFunction.run takes (a Gluon kernel's carry their shared-memory
    layout, which the compiled kernel's own metadata then repeats for the cached encodings)."""

    def __init__(self, kernel, name: str, desc: Callable, **options):
        self.kernel = kernel
        self.name = name
        self.options = options  # num_warps, maxnreg, ...
        self._descriptors = lambda a: tuple(desc(*v) if type(v) is tuple else v for v in a)
        self._launchers: dict = {}  # spec -> (spec, None, compiled kernel, constexpr tail, grid, raw fire)
        self.slow_calls = 0  # launches that went through JITFunction.run (tests count them)
        TUNED.append(self)

    def launch(self, spec: tuple, args: tuple, consts: dict, grid: tuple, device_index: int) -> None:
        """Run the kernel once. spec: a tuple that fixes everything the launch depends on besides the tensors' data
        (device, dtype, constexprs, sizes, strides, pointer alignment); args: the runtime arguments in signature
        order, (tensor, block) pairs for descriptors; consts: the constexpr arguments; grid: a 3-tuple."""
        if INTERPRETING:
            self.kernel[grid](*self._descriptors(args), **consts, **self.options)
            return
        if FAST_LAUNCH and not _hooks_set():
            hit = self._launchers.get(spec)
            if hit is not None:
                _fire(hit, args, device_index, self._descriptors)
                return
        self.slow_calls += 1
        compiled = self.kernel.run(
            *self._descriptors(args), grid=grid, warmup=False, **consts, **self.options
        )  # fmt: skip
        tail = constexpr_tail(self.kernel, len(args), consts)
        if tail is not None and all(hasattr(compiled, n) for n in ("run", "function", "packed_metadata")):
            self._launchers[spec] = (spec, None, compiled, tail, grid, _raw_plan(compiled, args, tail, grid))


def forced(forces, fn):
    """fn() with each (tuner, config) of `forces` holding that config alone (how the sweeps time one config), then
    every tuner's own configs back and its choices forgotten."""
    saved = [list(t.configs) for t, _ in forces]
    for t, cfg in forces:
        t.configs = [cfg]
        t.cache.clear()
        t.forcing = True
    try:
        return fn()
    finally:
        for (t, _), configs in zip(forces, saved, strict=True):
            t.configs = configs
            t.cache.clear()
            t.forcing = False


@contextlib.contextmanager
def not_recorded():
    """Launches inside are left out of the op plan this thread may be recording (a measurement's timing launches
    are not the call's work)."""
    rec = _RECORDING.pop(get_ident(), None)
    try:
        yield
    finally:
        if rec is not None:
            _RECORDING[get_ident()] = rec


def config_text(cfg) -> str:
    kw = cfg.kwargs
    tile = "x".join(str(kw[k]) for k in ("BM", "BN", "BK") if k in kw) or ",".join(f"{k}={v}" for k, v in kw.items())
    extra = "".join(f" {k}={kw[k]}" for k in ("GROUP_M", "SUBTILE", "EVICT") if k in kw)
    extra += " TAIL" if kw.get("TAIL") else ""  # the dual GEMM's split-K wave tail (kernels.ops.hopper_gemm)
    return f"{tile} w{cfg.num_warps} s{cfg.num_stages}{extra}"
