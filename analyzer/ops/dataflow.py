"""What one kernel reads and writes, for the fusion diff: its op's input tensors and output tensor.

Everything here reads the launching CPU op (name, 'Input Dims', 'Input type'); nothing here touches DataFrames, so
each function can be tested on single real trace events. Op sets, tensors and GEMM problems come from the one
place that knows them: analyzer.ops.names, analyzer.ops.tensors, analyzer.ops.gemm.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.ops import dtypes, gemm, names
from analyzer.ops.tensors import Tensor, broadcast, read_tensors

_CASTS = frozenset(["to", "_to_copy", "type_as"])


@dataclass(frozen=True)
class TensorIO:
    inputs: tuple[Tensor, ...]  # tensors the kernel reads (as its op lists them)
    output: Tensor | None  # the tensor it writes; None when its shape cannot be told from the op
    fresh: tuple[Tensor, ...] | None = None  # inputs a recent kernel can have written (None: all of them)

    @property
    def linkable(self) -> tuple[Tensor, ...]:
        return self.inputs if self.fresh is None else self.fresh


def _tensors(dims, types) -> list[Tensor]:
    """Tensor arguments with at least one dim: a 0-dim tensor is a scalar next to the activations we track."""
    return [t for t in read_tensors(dims, types) if t is not None and t.shape]


def tensor_io(op_name: str, dims, types) -> TensorIO:
    """Inputs and output of the op that launched a kernel, from its recorded shapes.

    GEMMs write [M, N] (batched: [B, M, N]; linear/matmul keep the leading dims; a template its output buffer);
    pointwise ops write the broadcast shape of their inputs in the promoted dtype; norms/softmax write their first
    input's shape; copy_ writes its destination (first argument) and reads the source. Anything else: output None
    (unknown, never guessed).
    """
    ts = _tensors(dims, types)
    base = names.op_base(op_name)
    inplace = base.endswith("_") and not base.startswith("_")
    base = base.rstrip("_") if inplace else base
    ops = names.canonical_ops(op_name)
    if not ts:
        return TensorIO((), None)
    if base in names.GEMM_OPS or gemm.is_template(op_name):
        g = gemm.read(op_name, ts)
        if not isinstance(g, gemm.Gemm):
            return TensorIO(tuple(ts), None)
        if g.out is not None and gemm.is_template(op_name):
            return TensorIO((g.a, g.b), g.out)
        if base in ("linear", "matmul") and len(ts[0].shape) > 2 and g.batch == 1:
            shape = (*ts[0].shape[:-1], g.n)
        elif base in ("bmm", "baddbmm") or g.batch != 1:
            shape = (g.batch, g.m, g.n)
        else:
            shape = (g.m, g.n)
        n_in = {"mm": 2, "_scaled_mm": 2, "_int_mm": 2, "bmm": 2, "matmul": 2}.get(base, 3)
        return TensorIO(tuple(ts[:n_in]), Tensor(shape, g.dtype))
    if base == "copy" and len(ts) >= 2:  # copy_(dst, src): reads src, writes dst
        return TensorIO((ts[1],), ts[0])
    if base in _CASTS:  # the target dtype is an argument the trace does not type: size unknown, never guessed
        return TensorIO((ts[0],), Tensor(ts[0].shape, None))
    dts = [t.dtype for t in ts if t.dtype]
    if base.endswith(("_backward", "_backward_data")):
        # grad_output first, then activations saved in the forward pass: only the gradient can come from a kernel
        # of this backward region (gelu_backward(grad, self) reads the forward gate output as `self`)
        out = ts[1] if len(ts) > 1 else ts[0]
        return TensorIO(tuple(ts), Tensor(out.shape, dtypes.promote(dts)), fresh=(ts[0],))
    if ops and ops <= names.SAME_AS_FIRST_OPS:
        return TensorIO(tuple(ts), ts[0])
    if ops and ops <= names.POINTWISE_OPS:
        if inplace:
            return TensorIO(tuple(ts), ts[0])
        try:
            shape = broadcast(*(t.shape for t in ts))
        except ValueError:
            return TensorIO(tuple(ts), None)
        dtype = "bool" if ops <= names.COMPARISON_OPS else dtypes.promote(dts)
        return TensorIO(tuple(ts), Tensor(shape, dtype))
    return TensorIO(tuple(ts), None)
