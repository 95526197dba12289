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

Specialisation: Triton compiles a kernel per "specialisation" of its integer and pointer arguments (an int equal to 1,
or divisible by 16; a pointer 16-byte aligned). A compiled kernel reused for an argument outside its specialisation
would read misaligned memory, so the wrappers put those properties in `spec` (see `int_spec`, `ptr_spec`) and a
launcher is cached per (key, spec).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from kernels.ops.triton_util import autotune_bench, interpreting

# FUSELENS_FAST_LAUNCH=0 sends every call through JITFunction.run (scripts/host_overhead.py times both ways).
FAST_LAUNCH = os.environ.get("FUSELENS_FAST_LAUNCH", "1") != "0"


def int_spec(v: int) -> int:
    """What Triton specialises an int argument on: 1 (folded to a constant), divisible by 16, or neither."""
    return 1 if v == 1 else (16 if v % 16 == 0 else 0)


def ptr_spec(t: torch.Tensor) -> bool:
    return t.data_ptr() % 16 == 0


def _launch_hooks():
    """Triton's launch enter/exit hooks (set by profilers such as proton): with one set, launches take the full path."""
    try:
        from triton import knobs

        return knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    except (ImportError, AttributeError):
        return None, None


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
        self._launchers: dict = {}  # (key, spec) -> (config, compiled kernel, constexpr tail)
        self.slow_calls = 0  # launches that went through JITFunction.run (tests count them)

    def clear(self) -> None:
        self.cache.clear()
        self._launchers.clear()

    def launch(
        self,
        key: tuple,
        spec: tuple,
        args_fn: Callable,
        consts_fn: Callable,
        grid_fn: Callable,
        device_index: int,
        prune_arg=None,
        interp_config=None,
    ):
        """Run the kernel once. key: everything the choice of config depends on (device, dtype, constexpr flags,
        shape or its bucket); spec: what the compiled code depends on beyond key (int_spec / ptr_spec of the
        arguments); args_fn(cfg): the kernel's leading runtime arguments in signature order; consts_fn(cfg): its
        constexpr arguments other than the config's; grid_fn(cfg): a 3-tuple."""
        if interpreting():
            cfg = interp_config
            self.kernel[grid_fn(cfg)](*args_fn(cfg), **consts_fn(cfg), **cfg.kwargs)
            return
        hit = self._launchers.get((key, spec)) if FAST_LAUNCH else None
        if hit is not None and self.cache.get(key) is hit[0]:
            cfg, compiled, tail = hit
            enter, leave = _launch_hooks()
            if enter is None and leave is None:
                g = grid_fn(cfg)
                compiled.run(
                    g[0],
                    g[1],
                    g[2],
                    torch._C._cuda_getCurrentRawStream(device_index),
                    compiled.function,
                    compiled.packed_metadata,
                    None,
                    None,
                    None,
                    *args_fn(cfg),
                    *tail,
                )
                return
        cfg = self.cache.get(key)
        if cfg is None:
            cfg = self._choose(key, args_fn, consts_fn, grid_fn, prune_arg)
        self.slow_calls += 1
        args = args_fn(cfg)
        consts = consts_fn(cfg)
        compiled = self.kernel.run(*args, grid=grid_fn(cfg), warmup=False, **consts, **cfg.all_kwargs())
        tail = self._tail(len(args), {**consts, **cfg.kwargs})
        if tail is not None and all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
            self._launchers[(key, spec)] = (cfg, compiled, tail)

    def _tail(self, n_args: int, consts: dict) -> tuple | None:
        """The constexpr arguments after the n_args runtime ones, in signature order, or None when the signature
        is not (runtime args, then exactly these constexprs): then every call takes the full path."""
        names = list(getattr(self.kernel, "arg_names", ()))
        if len(names) != n_args + len(consts) or set(names[n_args:]) != set(consts):
            return None
        return tuple(consts[n] for n in names[n_args:])

    def _choose(self, key, args_fn, consts_fn, grid_fn, prune_arg):
        configs = self.prune(self.configs, prune_arg) if self.prune else self.configs
        if len(configs) == 1 or torch.cuda.is_current_stream_capturing():
            # nothing to compare, or inside CUDA-graph capture (timing would synchronise): the first candidate
            self.cache[key] = configs[0]
            return configs[0]
        times = {}
        for cfg in configs:

            def call(cfg=cfg):
                self.kernel.run(*args_fn(cfg), grid=grid_fn(cfg), warmup=False, **consts_fn(cfg), **cfg.all_kwargs())

            try:
                call()  # compiles; a config that does not fit (shared memory, registers) raises here
                times[cfg] = autotune_bench(call, None)[0] * 1e3
            except Exception:  # out of resources: the config is skipped, as triton.autotune skips it
                times[cfg] = float("inf")
        best = min(times, key=times.get)
        if times[best] == float("inf"):
            raise RuntimeError(f"{self.name}: no config compiled for key {key}")
        self.cache[key] = best
        self.timings[key] = {config_text(c): t for c, t in times.items()}
        return best


def config_text(cfg) -> str:
    kw = cfg.kwargs
    tile = "x".join(str(kw[k]) for k in ("BM", "BN", "BK") if k in kw) or ",".join(f"{k}={v}" for k, v in kw.items())
    extra = "".join(f" {k}={kw[k]}" for k in ("GROUP_M", "SUBTILE", "EVICT") if k in kw)
    return f"{tile} w{cfg.num_warps} s{cfg.num_stages}{extra}"
