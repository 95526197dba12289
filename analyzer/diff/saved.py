"""Saved tensors read across fusion groups: a forward intermediate a fusion no longer writes, read again by the
backward.

A training step's forward writes tensors its backward reads again (autograd's saved tensors): eager GEGLU writes
a = gelu(g) [8192, 3072] bf16 in the forward, the gating mul reads it there, and the backward's dH·a
(MulBackward0: grad·self) reads it a second time. When the forward's fused kernel no longer writes a (an
intermediate of its group, its write avoided) and the backward kernel that read it is replaced too (FuseLens' dH
kernel recomputes gelu(g) from g), that second read is avoided as well: 50,331,648 B the per-group rule (a tensor
written and read inside one group) does not see, since the read runs from one group into another.

The evidence is autograd's, never position or size alone (four [8192, 3072] bf16 tensors pass through that
forward): the backward kernel's autograd node is the derivative formula of a forward call that wrote or read a (the
node carries the forward call's sequence number: align._autograd_seqs); names.FORMULA_READS says what that formula
reads beside the gradient: the call's inputs (mul: grad·other, grad·self: one kernel per input that needs a
gradient), its output (softmax) or nothing (add, a cast). Each such kernel reads the gradient (the forward output's
size) and one saved tensor; when the node's kernels read as many tensors of a's size and dtype as the forward call
has inputs of that size, each input, a among them, was read once (none: none was). Which of two same-sized kernels
read which input the trace does not say: the read is named after the first of them.

Each such read is counted once, with the tensor (Intermediate.other_reads), in the group that avoided its write: a
tensor's write and every read are counted in one place, never twice. Where a replaced backward kernel of such a
node may read the tensor and the reads cannot be told apart (a formula not in the table: pow's backward re-reads its
input; sizes that do not add up), the group that avoided the write has a lower bound (bytes_complete False).
"""

from __future__ import annotations

from collections import defaultdict

from analyzer.diff.flow import same_tensor
from analyzer.opinfo.names import FORMULA_READS, op_base

_NOTHING = object()  # a kernel of a formula node that reads the gradient alone (grad·scalar, a sum of it)


def count_saved_reads(groups: list, b_rows: list) -> None:
    """Adds the backward's reads of avoided forward intermediates to their Intermediate.other_reads, or marks the
    group's bytes a lower bound where they cannot be told (module doc). groups: the matcher's fusion and swap
    groups, their intermediates found."""
    touched = defaultdict(list)  # forward base pos -> (group, Intermediate, is f's output) whose write is avoided
    for g in groups:
        for it in g.intermediates:
            if it.still_written or it.shared_operand:
                continue
            for r, is_out in ((it.producer, True), *((c, False) for c in it.consumers)):
                if b_rows[r].node < 0 and b_rows[r].autograd_seq >= 0:
                    touched[r].append((g, it, is_out))
    if not touched:
        return
    calls, nodes = defaultdict(set), defaultdict(list)  # sequence number -> forward op calls / backward kernels
    for i, row in enumerate(b_rows):
        if row.kind != "kernel" or row.autograd_seq < 0:
            continue
        if row.node < 0:
            calls[row.autograd_seq].add(row.op_index)
        elif row.formula_node >= 0:
            nodes[row.autograd_seq].append(i)
    group_of = {m: g for g in groups for m in g.members}
    for r, found in touched.items():
        kernels = nodes.get(b_rows[r].autograd_seq)
        if kernels:  # else no backward of this call in the step (inference, or no input needs a gradient)
            _node_reads(b_rows, r, kernels, found, group_of, len(calls[b_rows[r].autograd_seq]) == 1)


def _node_reads(b_rows: list, r: int, kernels: list[int], found: list, group_of: dict, one_call: bool) -> None:
    """The reads of forward call r's avoided tensors (found) by its backward node's kernels."""
    fwd = b_rows[r]
    reads = FORMULA_READS.get(op_base(fwd.op_name)) if one_call else None
    if reads in ("inputs", "output") and fwd.io.output is None:
        reads = None  # the gradient's size unknown: which tensor beside it a kernel reads cannot be told
    saved = {q: _saved_read(b_rows[q], fwd.io.output) for q in kernels} if reads in ("inputs", "output") else {}
    taken: set[int] = set()
    for g, it, is_out in found:
        if not any(q in group_of and group_of[q] is not g for q in kernels):
            continue  # the node's kernels still run (or fused with the forward): no read avoided across groups
        readers = _readers(fwd, it.tensor, is_out, reads, saved)
        if readers is None:
            g.bytes_complete, g.saved_unknown = False, True  # the node may read it: how often cannot be told
            continue
        if not readers or not all(q in group_of and group_of[q] is not g for q in readers):
            continue  # not read; or a reader of the tensors of its size still runs: the candidate still writes them
        mine = readers if is_out else [next((q for q in readers if q not in taken), None)]
        for q in (q for q in mine if q is not None):
            taken.add(q)
            it.other_reads.append(q)


def _readers(fwd, t, is_out: bool, reads: str | None, saved: dict) -> list[int] | None:
    """The node's kernels that read tensor t of forward call fwd (its output when is_out, else one of its inputs)
    beside the gradient: [] when the formula reads none of its kind, None when that cannot be told."""
    if reads == "nothing" or (reads == "inputs" and is_out) or (reads == "output" and not is_out):
        return []  # the formula does not read this tensor
    if reads is None or None in saved.values():
        return None
    readers = [q for q, x in saved.items() if x is not _NOTHING and same_tensor(x, t)]
    # an output formula reads the output with every such kernel; an input formula each input once, so the node's
    # reads of this size must be as many as the call's inputs of this size (or none)
    n_in = len(readers) if is_out else sum(same_tensor(x, t) for x in fwd.io.inputs)
    return readers if len(readers) in (0, n_in) else None


def _saved_read(row, grad) -> object:
    """The saved forward tensor one kernel of a formula node reads beside the gradient (grad: the forward call's
    output, whose shape the gradient has); _NOTHING for a kernel of one input (the gradient times a scalar, or the
    sum of a product for a broadcast input); None when its inputs are not one of those."""
    ins = list(row.io.inputs)
    if len(ins) == 1:
        return _NOTHING
    if len(ins) != 2:
        return None
    at = next((k for k in (0, 1) if same_tensor(ins[k], grad)), None)
    return None if at is None else ins[1 - at]
