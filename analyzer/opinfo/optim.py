"""Optimizer steps as multi-tensor (`_foreach_`) ops: how many passes over a parameter-sized tensor list each op
makes, and how many a fused optimizer kernel makes. Kineto records a TensorList's shapes as empty lists, so the
bytes of a `_foreach_` kernel are unknown; its passes are not (analyzer.opportunities prices a fused step by them).

A pass = one parameter-sized tensor list read or written once. torch.optim's multi-tensor AdamW
(`_multi_tensor_adamw`, foreach=True) runs, per step: params·(1 − lr·wd) (`_foreach_mul_`), exp_avg.lerp_(grad)
(`_foreach_lerp_`), exp_avg_sq·β₂ (`_foreach_mul_`), + (1 − β₂)·grad·grad (`_foreach_addcmul_`), sqrt
(`_foreach_sqrt`), ÷ bias correction (`_foreach_div_`), + eps (`_foreach_add_`), params += −lr·exp_avg / denom
(`_foreach_addcdiv_`). `torch.optim.AdamW(fused=True)` (one kernel) reads param, grad, exp_avg, exp_avg_sq and
writes param, exp_avg, exp_avg_sq: 7 passes.
"""

from __future__ import annotations

# op (canonical, no trailing '_') -> passes: tensor lists read + the one written (in place or a new list).
# addcmul(self, g, g): the gradient read twice by one kernel is one pass (the same addresses).
FOREACH_PASSES = {
    "_foreach_mul": 2,
    "_foreach_div": 2,
    "_foreach_add": 2,
    "_foreach_sub": 2,
    "_foreach_sqrt": 2,
    "_foreach_neg": 2,
    "_foreach_copy": 2,
    "_foreach_zero": 1,
    "_foreach_lerp": 3,
    "_foreach_addcmul": 3,
    "_foreach_addcdiv": 4,
}
# a fused step's passes, by the ops that say which optimizer ran (Adam / AdamW: the second moment's addcmul and the
# addcdiv update)
FUSED_PASSES = ((frozenset(["_foreach_addcmul", "_foreach_addcdiv"]), "Adam/AdamW", 7),)


def fused_passes(ops) -> tuple[str, int] | None:
    """(optimizer, passes of its fused kernel) for a step made of these `_foreach_` ops, or None when not known."""
    s = set(ops)
    return next(((name, n) for need, name, n in FUSED_PASSES if need <= s), None)
