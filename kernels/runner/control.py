"""The runner's control probe: one fixed kernel sequence before every profiled turn of every variant.

Why: the diff's condition factor (analyzer.diff.comparability) needs kernels that did the same work in the same
context in both runs. Kernels of the workload itself rarely qualify everywhere: the same cuBLAS GEMM runs up to ~6%
longer behind another variant's kernel (the predecessor's dirty L2 lines are written back during it, its power
transient), and on the H200 the plain MLP's first GEMM takes 151 µs after an idle GPU and 145 µs right behind the
previous step. So the runner adds a control whose context is the same by construction:

    sync (the previous turn ended) → settle → GEMM → copy → sync → the variant's turn

- settle: writes SETTLE_BYTES (more than any L2: H100 50 MB, H200 60 MB, B200 126 MB), so whatever the previous turn
  left in L2 is gone and the GEMM always starts behind the same kernel with the same L2 contents. Its own start
  follows whatever came before it, so it sets the context and is not a control.
- GEMM: a fixed bf16 GEMM (compute-bound: follows the SM clock, the power limit and a neighbour's time slices).
- copy: an elementwise pass over COPY_BYTES (torch.neg into a second buffer; memory-bound: follows the memory
  clock and other traffic).

The probe runs in a profiler step of its own (record_function PROBE_LABEL) whose number the runner gives to
OWNER_PREFIX + variant, so kernels.runner.interleave.split_trace cuts it out of the variant's trace: the variant's
trace, its steps and every step time are exactly what they are without the probe. `probe_times` reads the probe's
kernel durations (CUPTI, the traces' own clock) out of that split document for the manifest.
"""

from __future__ import annotations

PROBE_LABEL = "fuselens::control"
OWNER_PREFIX = "fuselens::control:"  # split_trace owner of a probe step: OWNER_PREFIX + the variant it precedes
SETTLE_BYTES = 256 * 2**20
GEMM_MNK = (2048, 2048, 2048)  # 17.2 GFLOP bf16: ~25-35 µs on an H100/H200
COPY_BYTES = 64 * 2**20  # 64 MiB read + 64 MiB written: ~45 µs at 3 TB/s
ROLES = ("settle", "gemm", "copy")  # in launch order; settle sets the context, gemm and copy are the controls
CONTROL_ROLES = ("gemm", "copy")


def spec() -> dict:
    """What the probe runs, for the manifest (the analyzer compares two runs' probes only when their specs match)."""
    m, n, k = GEMM_MNK
    return {
        "label": PROBE_LABEL,
        "roles": list(ROLES),
        "controls": list(CONTROL_ROLES),
        "settle_bytes": SETTLE_BYTES,
        "gemm_mnk": [m, n, k],
        "gemm_dtype": "bf16",
        "copy_bytes": COPY_BYTES,
        "when": "before every profiled turn of every variant, after a sync; its own profiler step, cut from the traces",
    }


class Probe:
    """The fixed tensors (allocated once) and the sequence; call it between turns, inside the profiler session.
    Each role runs inside record_function(PROBE_LABEL + "::" + role), which is how probe_times finds its GPU ops."""

    def __init__(self, device: str = "cuda"):
        import torch

        g = torch.Generator(device="cpu").manual_seed(0)
        m, n, k = GEMM_MNK
        self.device = device
        self.error: str | None = None  # set by the runner when a call failed: the probe then stops
        self.settle = torch.empty(SETTLE_BYTES // 2, dtype=torch.bfloat16, device=device)
        self.a = torch.randn(m, k, generator=g).to(device=device, dtype=torch.bfloat16)
        self.b = torch.randn(k, n, generator=g).to(device=device, dtype=torch.bfloat16)
        self.c = torch.empty(m, n, dtype=torch.bfloat16, device=device)
        self.src = torch.randn(COPY_BYTES // 2, generator=g).to(device=device, dtype=torch.bfloat16)
        self.dst = torch.empty_like(self.src)

    def __call__(self) -> None:
        import torch
        from torch.profiler import record_function

        with record_function(PROBE_LABEL):
            with record_function(f"{PROBE_LABEL}::settle"):
                self.settle.zero_()
            with record_function(f"{PROBE_LABEL}::gemm"):
                torch.mm(self.a, self.b, out=self.c)
            with record_function(f"{PROBE_LABEL}::copy"):  # an elementwise kernel (a plain copy_ may be a memcpy)
                torch.neg(self.src, out=self.dst)
        if self.device == "cuda":
            torch.cuda.synchronize()  # the variant's turn starts after an idle GPU, as without the probe


GPU_CATS = frozenset({"kernel", "Kernel", "gpu_memset", "gpu_memcpy", "Memset", "Memcpy"})


def _probe_ranges(evs: list) -> list[tuple]:
    """(start, end, tid, name) of the probe's record_function ranges: whole turns (PROBE_LABEL) and roles."""
    ranges = []
    for e in evs:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and (name == PROBE_LABEL or name.startswith(PROBE_LABEL + "::")):
            ts = float(e.get("ts", 0.0))
            ranges.append((ts, ts + float(e.get("dur", 0.0)), e.get("tid"), name))
    return ranges


def _launch_roles(evs: list, turns: list, ranges: list) -> dict[int, tuple[int, str]]:
    """CUPTI correlation id -> (turn, role) for every runtime/driver launch inside a turn's role range."""
    role_of = {f"{PROBE_LABEL}::{r}": r for r in ROLES}
    where: dict[int, tuple[int, str]] = {}
    for e in evs:
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") != "X" or e.get("cat") not in ("cuda_runtime", "cuda_driver") or not isinstance(c, int):
            continue
        ts, tid = float(e.get("ts", 0.0)), e.get("tid")
        turn = next((i for i, t in enumerate(turns) if t[0] <= ts <= t[1] and t[2] == tid), None)
        role = next((role_of[r[3]] for r in ranges if r[3] in role_of and r[0] <= ts <= r[1] and r[2] == tid), None)
        if turn is not None and role is not None:
            where[c] = (turn, role)
    return where


def probe_times(doc: dict) -> dict:
    """The probe's GPU time per role and turn in one split document (split_trace's output for OWNER_PREFIX +
    variant): {'kernels': [the kernel names of each role, ' + '-joined], 'us': [[µs per role] per turn]}, or
    {'error': why}. A role's time is the sum of the GPU ops launched inside its record_function range (found by
    CUPTI correlation id); a turn missing a role, or roles whose kernels differ between turns, is an error: such a
    probe is no control."""
    evs = doc.get("traceEvents") or []
    ranges = _probe_ranges(evs)
    turns = sorted(r for r in ranges if r[3] == PROBE_LABEL)
    if not turns:
        return {"error": "no probe range recorded"}
    where = _launch_roles(evs, turns, ranges)
    us = [[0.0] * len(ROLES) for _ in turns]
    names: list[list[set]] = [[set() for _ in ROLES] for _ in turns]
    for e in evs:
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS and c in where:
            t, role = where[c]
            j = ROLES.index(role)
            us[t][j] += float(e.get("dur", 0.0))
            names[t][j].add(str(e.get("name")))
    if any(v <= 0 for row in us for v in row):
        return {"error": "a probe turn recorded no GPU op for one of its roles"}
    kernels = [" + ".join(sorted(x)) for x in names[0]]
    if any([" + ".join(sorted(x)) for x in row] != kernels for row in names):
        return {"error": "the probe's kernels differ between turns"}
    return {"kernels": kernels, "us": [[round(v, 3) for v in row] for row in us]}
