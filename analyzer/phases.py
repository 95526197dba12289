"""The phases of a training step: forward, backward, optimizer; from the CPU side of the trace, never from timing.

- backward: the kernel's launching op runs inside an `autograd::engine::evaluate_function: …Backward…` call (the
  autograd engine's thread: eager backward nodes, and a compiled graph's `CompiledFunctionBackward`);
- optimizer: its op is a multi-tensor / fused optimizer op (`_foreach_*`, `_fused_adamw_`), or it runs inside
  torch.optim's `Optimizer.step#…` range, or it is an Inductor foreach kernel (`triton_for_…`: a compiled optimizer
  step, whose range Dynamo drops), and every kernel after the step's first optimizer kernel that is not backward
  (a compiled optimizer graph's step counters);
- forward: everything else. A step with no backward and no optimizer kernel is inference: all forward.

A trace that records no autograd node for any kernel (PyTorch 1.x's, e.g. Kineto's tb_plugin ResNet-50 samples,
whose 407 of 1,516 kernels run under `cudnn_convolution_backward_*`, `nll_loss_backward`, …) has its backward from
the first kernel whose op is a backward op (`…_backward`, `…_backward_data`) on: autograd runs the backward as one
stretch after the forward, and its first node's kernels (the loss's) come first; it ends where the optimizer's
first kernel is (torch.optim's `Optimizer.step#` range, which such traces record as an operator: analyzer.diff.align
reads it as a range).

Input: the rows of a representative step (analyzer.diff.align.RunSeq.rows: `node`, `context`, `name`,
`op_name`, `dur_us`), in launch order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyzer.opinfo import names

PHASES = ("forward", "backward", "optimizer")
OPTIMIZER_RANGE = "Optimizer.step#"  # torch.optim wraps every step in this record_function range
_OPTIMIZER_OPS = ("_foreach_", "_fused_adam", "_fused_sgd", "_fused_adagrad")


def is_optimizer_kernel(name, op_name, context) -> bool:
    """A kernel of an optimizer step by its own evidence (module doc)."""
    if names.op_base(op_name).startswith(_OPTIMIZER_OPS):
        return True
    if any(str(r).startswith(OPTIMIZER_RANGE) for r in (context or ())):
        return True
    dec = names.inductor(name)
    return dec is not None and dec.kind == "for"


def phase_of_rows(rows: pd.DataFrame) -> np.ndarray:
    """'forward' | 'backward' | 'optimizer' per row (launch order)."""
    n = len(rows)
    out = np.full(n, "forward", dtype=object)
    if n == 0:
        return out
    backward = rows["node"].to_numpy() >= 0 if "node" in rows else np.zeros(n, dtype=bool)
    opt = np.fromiter(
        (
            is_optimizer_kernel(a, b, c)
            for a, b, c in zip(rows["name"].tolist(), rows["op_name"].tolist(), rows["context"].tolist(), strict=True)
        ),
        dtype=bool,
        count=n,
    )
    if not backward.any():  # no autograd nodes recorded (module doc): from the first backward op's kernel on,
        # up to the optimizer's first kernel after it
        named = np.fromiter((names.is_backward_text(names.op_base(o)) for o in rows["op_name"].tolist()), bool, n)
        if named.any():
            first = int(np.argmax(named))
            after = np.flatnonzero(opt & (np.arange(n) > first))
            backward = (np.arange(n) >= first) & (np.arange(n) < (after[0] if len(after) else n))
    out[backward] = "backward"
    hits = np.flatnonzero(opt & ~backward)
    if len(hits):
        tail = np.zeros(n, dtype=bool)
        tail[hits[0] :] = True
        out[tail & ~backward] = "optimizer"
    return out


def phase_times_us(rows: pd.DataFrame, phase: np.ndarray | None = None) -> dict[str, float]:
    """GPU time of each phase in these rows (0.0 for a phase the step does not have)."""
    phase = phase_of_rows(rows) if phase is None else phase
    dur = rows["dur_us"].to_numpy(dtype=float)
    return {p: float(dur[phase == p].sum()) for p in PHASES}


def is_training(phase: np.ndarray) -> bool:
    return bool(np.any(phase != "forward"))
