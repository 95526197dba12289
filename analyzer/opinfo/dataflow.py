"""What one kernel reads and writes, for the fusion diff: its op's input tensors and output tensor.

Everything here reads the launching CPU op (name, 'Input Dims', 'Input type'); nothing here touches DataFrames, so
each function can be tested on single real trace events. Op sets, tensors and GEMM problems come from the one
place that knows them: analyzer.opinfo.names, analyzer.opinfo.tensors, analyzer.opinfo.gemm.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.opinfo import dtypes, gemm, names
from analyzer.opinfo.tensors import Tensor, broadcast, read_tensors

_CASTS = frozenset(["to", "_to_copy", "type_as"])


@dataclass(frozen=True)
class TensorIO:
    inputs: tuple[Tensor, ...]  # tensors the kernel reads (as its op lists them)
    output: Tensor | None  # the tensor it writes; None when its shape cannot be told from the op
    fresh: tuple[Tensor, ...] | None = None  # inputs a recent kernel can have written (None: all of them)

    @property
    def linkable(self) -> tuple[Tensor, ...]:
        return self.inputs if self.fresh is None else self.fresh


def _tensors(dims, types, strides=None) -> list[Tensor]:
    """Tensor arguments with at least one dim: a 0-dim tensor is a scalar next to the activations we track."""
    return [t for t in read_tensors(dims, types, strides) if t is not None and t.shape]


# Reductions over `dim` with `keepdim` (Concrete Inputs positions 1 and 2: mean.dim(self, dim, keepdim, dtype),
# sum.dim_IntList, amax, amin): their output shape follows from those arguments when the trace records them.
_DIM_REDUCTIONS = frozenset(["mean", "sum", "amax", "amin"])
_HALF_TO_FLOAT = frozenset(["_softmax", "_log_softmax"])  # (self, dim, half_to_float): True writes fp32


def _reduced(t: Tensor, concrete) -> Tensor | None:
    """The output of a dim reduction of t from its Concrete Inputs ('[-1]', 'True'), or None when not recorded."""
    if not isinstance(concrete, (list, tuple)) or len(concrete) < 3:
        return None
    dims_text, keep = concrete[1], concrete[2]
    if not isinstance(dims_text, str) or keep not in ("True", "False"):
        return None
    try:
        dims = [int(x) for x in dims_text.strip("[] ").split(",") if x.strip()]
    except ValueError:
        return None
    nd = len(t.shape)
    axes = {d % nd for d in dims} if nd and all(-nd <= d < nd for d in dims) else None
    if not dims or axes is None:
        return None  # an empty dim list reduces everything; an out-of-range dim is not what we think it is
    shape = tuple(1 if i in axes else n for i, n in enumerate(t.shape) if keep == "True" or i not in axes)
    return Tensor(shape, t.dtype)


def _concat_io(base: str, dims, concrete) -> TensorIO:
    """cat / stack over a TensorList: 'Input Type' has no dtype for a list, so inputs and output carry dtype None
    (the diff takes the dtype from the tensor's producer or reader); the output shape from Concrete Inputs' dim."""
    lists = dims[0] if isinstance(dims, (list, tuple)) and dims and isinstance(dims[0], (list, tuple)) else []
    shapes = [tuple(d) for d in lists if isinstance(d, (list, tuple)) and d and all(isinstance(x, int) for x in d)]
    if not shapes or len(shapes) != len(lists) or len({len(x) for x in shapes}) != 1:
        return TensorIO((), None)
    raw = concrete[1] if isinstance(concrete, (list, tuple)) and len(concrete) > 1 else ""
    try:
        dim = int(raw) if isinstance(raw, str) and raw.strip() else 0
    except ValueError:
        return TensorIO(tuple(Tensor(x, None) for x in shapes), None)
    nd = len(shapes[0]) + (1 if base == "stack" else 0)
    if not -nd <= dim < nd:
        return TensorIO(tuple(Tensor(x, None) for x in shapes), None)
    dim %= nd
    if base == "stack":
        out = (*shapes[0][:dim], len(shapes), *shapes[0][dim:])
    else:
        out = (*shapes[0][:dim], sum(x[dim] for x in shapes), *shapes[0][dim + 1 :])
    return TensorIO(tuple(Tensor(x, None) for x in shapes), Tensor(out, None))


def tensor_io(op_name: str, dims, types, concrete=None, strides=None) -> TensorIO:
    """Inputs and output of the op that launched a kernel, from its recorded shapes.

    GEMMs write [M, N] (batched: [B, M, N]; linear/matmul keep the leading dims; a template its output buffer);
    pointwise ops write the broadcast shape of their inputs in the promoted dtype; norms/softmax write their first
    input's shape (fp32 when a 16-bit _softmax runs with half_to_float); copy_ writes its destination (first
    argument) and reads the source; mean/sum/amax/amin over `dim` write the reduced shape when Concrete Inputs
    (`concrete`) record dim and keepdim. Anything else: output None (unknown, never guessed).
    """
    ts = _tensors(dims, types, strides)
    base = names.op_base(op_name)
    inplace = base.endswith("_") and not base.startswith("_")
    base = base.rstrip("_") if inplace else base
    if base in ("cat", "_cat", "stack") and not ts:
        return _concat_io(base.lstrip("_"), dims, concrete)
    ops = names.canonical_ops(op_name)
    if not ts:
        return TensorIO((), None)
    if base in names.GEMM_OPS or gemm.is_template(op_name):
        return _gemm_io(op_name, base, ts)
    if base == "copy" and len(ts) >= 2:  # copy_(dst, src): reads src, writes dst
        return TensorIO((ts[1],), ts[0])
    if inplace and base in names.WRITE_ONLY_OPS:  # fill_(self, value): writes self, reads at most a value tensor
        return TensorIO(tuple(ts[1:]), ts[0])
    if not inplace and isinstance(dims, (list, tuple)) and names.out_argument(op_name, len(dims)) and len(ts) >= 2:
        last = read_tensors(dims[-1:], types[-1:] if isinstance(types, (list, tuple)) else None)
        if last and last[0] is not None and last[0].shape:  # the out= form: the last argument is written
            io = _pointwise_io(ts[:-1], names.canonical_ops(op_name), [t.dtype for t in ts[:-1] if t.dtype], False)
            return TensorIO(io.inputs, Tensor(io.output.shape, ts[-1].dtype) if io.output is not None else None)
    if base in _CASTS:  # the target dtype is an argument the trace does not type: size unknown, never guessed
        return TensorIO((ts[0],), Tensor(ts[0].shape, None))
    dts = [t.dtype for t in ts if t.dtype]
    if base.endswith(("_backward", "_backward_data")):
        # grad_output first, then activations saved in the forward pass: only the gradient can come from a kernel
        # of this backward region (gelu_backward(grad, self) reads the forward gate output as `self`)
        out = ts[1] if len(ts) > 1 else ts[0]
        return TensorIO(tuple(ts), Tensor(out.shape, dtypes.promote(dts)), fresh=(ts[0],))
    if base in _HALF_TO_FLOAT and isinstance(concrete, (list, tuple)) and len(concrete) > 2 and concrete[2] == "True":
        return TensorIO(tuple(ts), Tensor(ts[0].shape, "fp32"))
    if ops and ops <= names.SAME_AS_FIRST_OPS:
        return TensorIO(tuple(ts), ts[0])
    if base in _DIM_REDUCTIONS:
        return TensorIO(tuple(ts), _reduced(ts[0], concrete))
    if ops and ops <= names.POINTWISE_OPS:
        return _pointwise_io(ts, ops, dts, inplace)
    return TensorIO(tuple(ts), None)


def _gemm_io(op_name: str, base: str, ts: list[Tensor]) -> TensorIO:
    """A GEMM's operands and its [M, N] output (batched: [B, M, N]; linear/matmul keep the leading dims; a template
    its output buffer); a transposed 2-D B (a Linear weight) is not linkable to a kernel of the step."""
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
    ins = tuple(ts[:n_in])
    # a 2-D B read transposed is a Linear weight ([N, K] as [K, N]): a parameter, never a tensor a kernel of the
    # step wrote (a Gemma layer's up-projection weight [16384, 2048] has the element count of the GELU output)
    weight = g.b if isinstance(g.b, Tensor) and g.b.transposed and len(g.b.shape) == 2 else None
    fresh = tuple(t for t in ins if t is not weight) if weight is not None else None
    return TensorIO(ins, Tensor(shape, g.dtype), fresh)


def _pointwise_io(ts: list[Tensor], ops, dts: list, inplace: bool) -> TensorIO:
    """A pointwise op writes the broadcast shape of its inputs in the promoted dtype (bool for comparisons); in
    place, its first input."""
    if inplace:
        return TensorIO(tuple(ts), ts[0])
    try:
        shape = broadcast(*(t.shape for t in ts))
    except ValueError:
        return TensorIO(tuple(ts), None)
    dtype = "bool" if ops <= names.COMPARISON_OPS else dtypes.promote(dts)
    return TensorIO(tuple(ts), Tensor(shape, dtype))
