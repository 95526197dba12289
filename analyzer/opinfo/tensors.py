"""The one tensor reader: a launching op's recorded 'Input Dims' / 'Input type' / 'Input Strides' → Tensors.

A Tensor knows its shape (any rank), dtype (short name, analyzer.opinfo.dtypes), strides when recorded, and so its
stored elements (a stride-0, expanded dim repeats the same memory) and bytes. Transposed views ([K, N] with
strides [1, K]) keep their logical shape: every element is still read once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from analyzer.opinfo import dtypes


class UnknownDtype(ValueError):
    """An 'Input type' that is neither a sized tensor dtype nor a known non-tensor type."""


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str | None  # short name ('bf16'); None when unknown
    strides: tuple[int, ...] | None = field(default=None, compare=False)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def unique(self) -> int:
        """Elements actually stored: a stride-0 (expanded/broadcast) dim repeats the same memory."""
        if self.strides is None or len(self.strides) != len(self.shape):
            return self.numel
        return math.prod(d for d, s in zip(self.shape, self.strides, strict=True) if s != 0) if all(self.shape) else 0

    @property
    def itemsize(self) -> int | None:
        return dtypes.itemsize(self.dtype)

    @property
    def nbytes(self) -> float:
        """Bytes of its stored elements in HBM (NaN when the dtype is unknown)."""
        size = self.itemsize
        return float(self.unique * size) if size else float("nan")

    def bytes_of(self, numel: int) -> float:
        """Bytes of `numel` elements of this tensor's dtype (an output written in full)."""
        size = self.itemsize
        return float(numel * size) if size else float("nan")

    @property
    def short(self) -> str:
        return self.dtype or "?"

    @property
    def transposed(self) -> bool:
        """A 2-D view whose first dim is the contiguous one (a weight [N, K] read as [K, N])."""
        s = self.strides
        return bool(s and len(s) == 2 and len(self.shape) == 2 and s[0] == 1 and s[1] != 1 and self.shape[0] > 1)

    def matrix(self) -> str:
        """'8192×3072': rows (all leading dims) × last dim, how a GEMM sees it."""
        if len(self.shape) < 2:
            return "×".join(str(s) for s in self.shape) or "scalar"
        return f"{math.prod(self.shape[:-1])}×{self.shape[-1]}"

    def text(self) -> str:
        return shape_text(self.shape)


def shape_text(shape) -> str:
    return "[" + ",".join(str(x) for x in shape) + "]"


def read_tensors(dims, types, strides=None, *, strict: bool = False) -> list[Tensor | None]:
    """One entry per op argument: a Tensor for a tensor argument (0-dim included), None for scalars, lists and
    undefined tensors. strict: an argument with dims whose 'Input type' is in no table raises UnknownDtype (a
    tensor we cannot size is never silently left out of a sum); else it is None."""
    if not isinstance(dims, (list, tuple)):
        return []
    types = list(types) if isinstance(types, (list, tuple)) else []
    out: list[Tensor | None] = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if not isinstance(d, (list, tuple)) or any(isinstance(x, bool) or not isinstance(x, int) for x in d):
            out.append(None)
            continue
        short = dtypes.short(t)
        if short is None:
            if strict and d and t not in dtypes.NOT_TENSOR_TYPES:
                raise UnknownDtype(t)
            out.append(None)
            continue
        if any(x < 0 for x in d):
            out.append(None)
            continue
        s = strides[i] if isinstance(strides, (list, tuple)) and i < len(strides) else None
        ok = isinstance(s, (list, tuple)) and len(s) == len(d) and all(isinstance(x, int) for x in s)
        out.append(Tensor(tuple(d), short, tuple(s) if ok else None))
    return out


def tensors(dims, types, strides=None, *, strict: bool = False) -> list[Tensor]:
    """The tensor arguments only, in order."""
    return [t for t in read_tensors(dims, types, strides, strict=strict) if t is not None]


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of several shapes; ValueError when they do not broadcast."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        sizes = {s[len(s) - nd + i] for s in shapes if len(s) - nd + i >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def dims_text(dims) -> str:
    """Input dims as compact text for tables: [[8192, 768], [768, 3072]] → '[8192,768] [768,3072]'."""
    if not isinstance(dims, (list, tuple)):
        return ""
    return " ".join(shape_text(d) for d in dims if isinstance(d, (list, tuple)) and d)
