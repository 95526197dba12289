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
- copy: a fixed device-to-device copy of COPY_BYTES (memory-bound: follows the memory clock and other traffic).

The probe runs in a profiler step of its own (record_function PROBE_LABEL) whose number the runner gives to
OWNER_PREFIX + variant, so kernels.lab.interleave.split_trace cuts it out of the variant's trace: the variant's
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
    """The fixed tensors (allocated once) and the sequence; call it between turns, inside the profiler session."""

    def __init__(self, device: str = "cuda"):
        import torch

        g = torch.Generator(device="cpu").manual_seed(0)
        m, n, k = GEMM_MNK
        self.device = device
        self.settle = torch.empty(SETTLE_BYTES // 2, dtype=torch.bfloat16, device=device)
        self.a = torch.randn(m, k, generator=g).to(device=device, dtype=torch.bfloat16)
        self.b = torch.randn(k, n, generator=g).to(device=device, dtype=torch.bfloat16)
        self.c = torch.empty(m, n, dtype=torch.bfloat16, device=device)
        self.src = torch.randn(COPY_BYTES // 2, generator=g).to(device=device, dtype=torch.bfloat16)
        self.dst = torch.empty_like(self.src)

    def __call__(self) -> None:
        import torch

        with torch.profiler.record_function(PROBE_LABEL):
            self.settle.zero_()
            torch.mm(self.a, self.b, out=self.c)
            self.dst.copy_(self.src)
        if self.device == "cuda":
            torch.cuda.synchronize()  # the variant's turn starts after an idle GPU, as without the probe


def probe_times(doc: dict) -> dict:
    """The probe's kernels in one split document (split_trace's output for OWNER_PREFIX + variant): {'kernels':
    [name per role], 'us': [[µs per role] per turn]}, or {'error': why} when the kernels do not fall into equal
    runs of len(ROLES) with the same names (a probe that launched other kernels is not a control)."""
    ks = sorted(
        (float(e.get("ts", 0.0)), str(e.get("name")), float(e.get("dur", 0.0)))
        for e in doc.get("traceEvents") or []
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")
    )
    n = len(ROLES)
    if not ks or len(ks) % n:
        return {"error": f"{len(ks)} probe kernels recorded, not a multiple of {n} ({', '.join(ROLES)})"}
    turns = [ks[i : i + n] for i in range(0, len(ks), n)]
    names = [k[1] for k in turns[0]]
    if any([k[1] for k in t] != names for t in turns):
        return {"error": "the probe's kernels differ between turns"}
    return {"kernels": names, "us": [[round(k[2], 3) for k in t] for t in turns]}
