"""How the shipped Triton kernels are tuned and launched: explicit keys, one tuning per key, then the compiled kernel
called directly.

Why not `triton.autotune` + `kernel[grid](...)`:
  - Keys. triton.autotune keys on the names it is given plus the dtypes of arguments that HAVE a dtype; a TMA
    tensor descriptor has none, and the activation (a constexpr) was not in our keys, so a second model of the same
    shape (SwiGLU after GEGLU, fp16 after bf16) reused the first one's tuning. Here the key is built by each
    wrapper and always holds the device, dtype, activation and every other constexpr flag.
  - Host time. Every call through the autotuner builds argument dicts, runs the config's pre_hook and then
    JITFunction.run binds and specialises every argument again: 30-40 us of the 47-85 us of host time per op call
    measured on the H100 host (scripts/host_overhead.py; docs/KERNELS.md). After the first call for a key, `launch` calls the
    compiled kernel's launcher with a cached grid rule and the constexpr tail already in signature order.

TMA descriptors: a wrapper passes a (tensor, block) pair where the kernel takes a tensor descriptor; the fast path
hands it to the generated C launch call with a cached encoding (kernels.ops.launch_triton, which holds every line
that reads Triton's internals, behind a version gate).

FUSELENS_LAUNCH (fuselens.settings.launch_mode; docs/KERNELS.md, "Launch") picks how much of this runs:
  raw (default)  op calls skip the dispatcher when unobserved (kernels.models.custom_ops.OP_DIRECT), replay their
                 plans (below), and launch through the generated C call (RAW_LAUNCH) where launch_triton applies;
  fast           the same, but every launch goes through Triton's launcher object (it encodes TMA descriptors on
                 every call);
  jit            Triton's own path: every op call enters the dispatcher and every launch goes through
                 JITFunction.run (no launcher cache, no plans): the reference when a fast path is suspected.
scripts/host_overhead.py switches each layer alone through the module attributes FAST_LAUNCH, RAW_LAUNCH, OP_PLANS
and custom_ops.OP_DIRECT.

Specialisation: Triton compiles a kernel per "specialisation" of its integer and pointer arguments (an int equal to 1,
or divisible by 16; a pointer 16-byte aligned). A compiled kernel reused for an argument outside its specialisation
would read misaligned memory, so a launcher is cached per `spec`: the raw sizes and strides, the pointers'
alignment (data_ptr & 15), the device, dtype and constexpr flags, which fix the specialisation and the grid too.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from threading import get_ident

import torch

from fuselens import settings
from kernels.ops.launch_triton import (
    c_call_source,
    cacheable,
    launcher_call,
    ptr_keyed,
)
from kernels.ops.launch_triton import descriptors as _descriptors
from kernels.ops.launch_triton import hooks_set as _hooks_set
from kernels.ops.launch_triton import raw_plan as _raw_plan
from kernels.ops.triton_util import INTERPRETING, reraise_if_fatal, timed_both_ways

LAUNCH_MODE = settings.launch_mode()
FAST_LAUNCH = LAUNCH_MODE != "jit"  # a launcher entry cached per spec; off: every launch through JITFunction.run
RAW_LAUNCH = LAUNCH_MODE == "raw"  # the generated C launch call (launch_triton.raw_plan) where it applies
OP_PLANS = LAUNCH_MODE != "jit"  # op calls replayed from their recorded launches (below)


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
    launcher_call(hit, a, stream, descriptors)


# ---------------------------------------------------------------- op plans: one op call replayed as its launches
# An op call (kernels.models.custom_ops) validates its inputs, picks a kernel (TMA or pointer), allocates its output and
# builds each launch's arguments: ~10-20 us of Python on the H100 and H200 hosts, the same work every call for inputs of the
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
    over a template per call: ~13 list appends and branches per launch on the H100 host's cProfile)."""
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
        for j, kind in enumerate(fire.kinds):
            if kind == "desc":
                ns[f"_e{k}_{j}"] = ptr_keyed(fns[f"_d{j}"], tmpl[j][1])
        lines.append("    try:")
        lines.append("        " + c_call_source(k, fns["_g"], fns["_f"], fire.kinds, tensors))
        lines.append("    except TypeError:")
        lines.append(f"        _slow(_h{k}, {call_args}, _dev)")
    lines.append("    return o")
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<fuselens op plan>", "exec"), ns)  # noqa: S102
    replay = ns["replay"]
    replay.source = src  # tests/kernels/test_kernels_launch.py snapshots it
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
        if tail is not None and cacheable(compiled):
            self._launchers[spec] = (
                key,
                cfg,
                compiled,
                tail,
                grid,
                _raw_plan(compiled, a, tail, grid) if RAW_LAUNCH else None,
            )
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
            except Exception as exc:  # out of resources: the config is skipped, as triton.autotune skips it
                reraise_if_fatal(exc, f"{self.name} config {cfg}")
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
        if tail is not None and cacheable(compiled):
            self._launchers[spec] = (
                spec,
                None,
                compiled,
                tail,
                grid,
                _raw_plan(compiled, args, tail, grid) if RAW_LAUNCH else None,
            )


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
