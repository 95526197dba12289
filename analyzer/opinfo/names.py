"""The one kernel-name and op-name decoder: Inductor kernel names, aten op names, free-text library names.

- Inductor names its kernels `triton_<kind>_fused_<aten ops>_<n>`, kind one of poi (pointwise), red / per
  (reduction, persistent reduction), tem (GEMM template), for (foreach), spl (split scan), mm / bmm (template
  GEMMs named by their op). `inductor(name)` splits the op list, re-assembling multi-word aten names.
- `canonical_ops('aten::addmm')` → {'mm', 'add'}: the op set one aten op computes (views compute nothing).
- `word_ops(text)` reads op words out of free text: Liger / FuseLens / vLLM kernel names, autograd Functions
  (`LigerGELUMulFunction`), record_function ranges. cuBLAS/CUTLASS/nvjet epilogues: `epilogue_ops`.

analyzer.opinfo.classify, analyzer.opinfo.cost_rules, analyzer.opinfo.dataflow and analyzer.diff read op knowledge from here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple


def _words(text: str) -> list[str]:
    """A word list written as text (one screen instead of one line per name)."""
    return text.split()


# ------------------------------------------------------------------------------------------- aten op names
# Compute nothing, launch no kernel: dropped from every op set.
VIEW_OPS = frozenset(
    _words("""_unsafe_view view reshape t permute transpose expand expand_as squeeze unsqueeze as_strided alias detach
    slice select split split_with_sizes unbind unflatten flatten narrow view_as _reshape_alias numpy_t lift_fresh
    """)
)
# Copies (and casts): they move data but compute nothing. An Inductor kernel made only of them is a 'copy'.
COPY_OPS = frozenset(["clone", "copy", "copy_", "_to_copy", "contiguous", "to"])
# aten name → canonical ops. Missing names map to themselves.
_ALIASES: dict[str, tuple[str, ...]] = {
    "addmm": ("mm", "add"),
    "_addmm_activation": ("mm", "add"),
    "baddbmm": ("mm", "add"),
    "addbmm": ("mm", "add"),
    "bmm": ("mm",),
    "matmul": ("mm",),
    "linear": ("mm",),
    "_scaled_mm": ("mm",),
    "_int_mm": ("mm",),
    "clone": ("copy",),
    "contiguous": ("copy",),
    "_to_copy": ("copy",),
    "to": ("copy",),
    "copy": ("copy",),
    "native_layer_norm": ("layer_norm",),
    "native_layer_norm_backward": ("layer_norm_backward",),
    "native_group_norm": ("group_norm",),
    "native_group_norm_backward": ("group_norm_backward",),
    "_fused_rms_norm": ("rms_norm",),
    "_fused_rms_norm_backward": ("rms_norm_backward",),
    "_softmax": ("softmax",),
    "_log_softmax": ("log_softmax",),
    "_softmax_backward_data": ("softmax_backward",),
    "_log_softmax_backward_data": ("log_softmax_backward",),
    "native_dropout": ("dropout",),
    "native_dropout_backward": ("dropout_backward",),
    "_native_batch_norm_legit": ("batch_norm",),
    "_native_batch_norm_legit_functional": ("batch_norm",),
    "_native_batch_norm_legit_no_training": ("batch_norm",),
    "native_batch_norm": ("batch_norm",),
    "cudnn_batch_norm": ("batch_norm",),
    "native_batch_norm_backward": ("batch_norm_backward",),
    "cudnn_batch_norm_backward": ("batch_norm_backward",),
    "cudnn_convolution": ("convolution",),
    "_convolution": ("convolution",),
    "conv2d": ("convolution",),
    "conv1d": ("convolution",),
    "conv": ("convolution",),
    "conv_dgrad": ("convolution_backward",),
    "conv_wgrad": ("convolution_backward",),
    "conv_backward": ("convolution_backward",),
    "rsub": ("sub",),
    "true_divide": ("div",),
    "multiply": ("mul",),
    "fill": ("fill",),
    "zero": ("fill",),
    "zeros": ("fill",),
    "zeros_like": ("fill",),
    "ones_like": ("fill",),
    "full": ("fill",),
    "full_like": ("fill",),
    "new_zeros": ("fill",),
    # words the classifier uses for FuseLens kernels ('_gemm_act_kernel' → mm+bias+act)
    "bias": ("add",),
    "act": ("gelu", "silu", "relu", "sigmoid", "tanh"),  # 'an activation': any of them
}
# GEMM ops by base name (no namespace, no trailing '_'): the one list every module reads
GEMM_OPS = frozenset(
    ["mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_scaled_mm", "_int_mm", "mv",
     "addmv"]
)  # fmt: skip
# Ops whose output has the broadcast shape of their tensor inputs (what we need to follow a tensor between kernels).
POINTWISE_OPS = frozenset(
    _words("""add sub mul div neg abs exp exp2 log log1p expm1 sqrt rsqrt pow reciprocal sigmoid tanh relu gelu silu mish
    hardswish hardsigmoid hardtanh leaky_relu elu softplus erf sin cos where masked_fill clamp clamp_min clamp_max
    maximum minimum lerp addcmul addcdiv gelu_backward silu_backward sigmoid_backward tanh_backward
    threshold_backward hardswish_backward fill copy dropout dropout_backward eq ne lt le gt ge logical_not
    logical_and logical_or bitwise_and bitwise_or bitwise_not sign round floor ceil trunc square fmod remainder
    """)
)
# In-place ops that write their first argument without reading it (fill_(self, value), zero_, the random fills):
# their output is a fresh tensor, never a read of whatever an earlier kernel wrote into it
WRITE_ONLY_OPS = frozenset(_words("fill zero normal uniform bernoulli random exponential geometric log_normal cauchy"))
# Positional arguments of pointwise ATen ops before `out` (their schemas): a recorded call with one argument more, a
# tensor of the output's shape, is the out= form, whose last argument is written, not read (mul.out(self, other, *,
# out): Input Dims [[11192, 8192], [], [11192, 8192]] in HTA's A100 sample, once counted as a third read)
POINTWISE_ARGS: dict[str, int] = {
    **dict.fromkeys(
        _words("""neg abs exp exp2 log log1p expm1 sqrt rsqrt reciprocal sigmoid tanh relu silu mish hardswish
        hardsigmoid erf sin cos sign round floor ceil trunc square logical_not bitwise_not"""),
        1,
    ),
    **dict.fromkeys(
        _words("""mul pow maximum minimum eq ne lt le gt ge logical_and logical_or bitwise_and bitwise_or fmod remainder
        clamp_min clamp_max gelu leaky_relu silu_backward sigmoid_backward tanh_backward hardswish_backward"""),
        2,
    ),
    **dict.fromkeys(
        _words("add sub where lerp clamp masked_fill hardtanh softplus gelu_backward threshold_backward"), 3
    ),
    **dict.fromkeys(_words("addcmul addcdiv"), 4),
}


def out_argument(op_name: str | None, n_args: int) -> bool:
    """Whether a recorded call of this op with n_args arguments is the out= form (POINTWISE_ARGS + 1)."""
    base = op_base(op_name)
    n = POINTWISE_ARGS.get(base)
    return n is not None and n_args == n + 1


# Ops that compute from tensor data (not generators like full/arange, not copies or indexing)
DATA_OPS = frozenset(POINTWISE_OPS - {"where", "masked_fill", "fill", "copy", "dropout", "dropout_backward"})
# Output shape = first tensor input's (normalisations, softmax): follows the activation through the op.
SAME_AS_FIRST_OPS = frozenset(
    _words("""layer_norm rms_norm batch_norm group_norm softmax log_softmax layer_norm_backward rms_norm_backward
    group_norm_backward softmax_backward log_softmax_backward cumsum""")
)
COMPARISON_OPS = frozenset(
    _words("eq ne lt le gt ge logical_and logical_or logical_not logical_xor isnan isinf isfinite isin")
)
# Ops one fused memory-bound kernel can absorb (analyzer.opportunities): elementwise, norms, softmax, reductions,
# losses, copies and layout. Anything else (indexing, sorting, a library's custom op) stays a kernel of its own.
FUSIBLE_OPS = frozenset(
    _words("""mean sum amax amin max min prod norm linalg_vector_norm var std var_mean nll_loss nll_loss_forward
    nll_loss_backward nll_loss2d_forward cross_entropy mse_loss mse_loss_backward l1_loss smooth_l1_loss
    binary_cross_entropy binary_cross_entropy_with_logits cat stack clone contiguous to _to_copy nan_to_num
    embedding_renorm softmax_backward log_softmax_backward""")
)
NORM_OPS = frozenset(
    _words("""native_layer_norm native_group_norm native_batch_norm rms_norm _fused_rms_norm _softmax _log_softmax
    var_mean layer_norm group_norm batch_norm""")
)

_NS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::")


def op_base(op_name: str | None) -> str:
    """'aten::addmm_.out' → 'addmm_': the op name without namespace and overload."""
    return _NS.sub("", (op_name or "").strip()).split(".")[0]


# torch.library.register_autograd runs a FuseLens training op's forward inside an autograd.Function whose range
# (GeneratedBackwardFor_<namespace>_<op>_<overload>, recording the op's tensor inputs, its str arguments dropped) is
# the innermost op over the forward's kernels: the same op (kernels/models/train_ops.py).
FUSELENS_TRAIN_WRAPPERS = {
    f"GeneratedBackwardFor_fuselens_{n}_default": f"fuselens::{n}"
    for n in ("glu_mlp_train", "glu_mlp_train_apart", "gelu_mlp_train")
}


def is_gemm_op(op_name: str | None) -> bool:
    return op_base(op_name).rstrip("_") in GEMM_OPS


def canonical_ops(op_name: str | None) -> frozenset[str]:
    """'aten::mul_' → {'mul'}; 'aten::addmm' → {'mm', 'add'}; 'aten::view' → {} (views launch nothing)."""
    base = op_base(op_name)
    if not base or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base):
        return frozenset()
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]  # in place: mul_ computes what mul does
    if base.endswith("_") and base.startswith("_") and base.count("_") > 1:
        base = base[:-1]  # _foreach_add_ → _foreach_add
    if base in VIEW_OPS:
        return frozenset()
    return frozenset(_ALIASES.get(base, (base,)))


# ------------------------------------------------------------------------------------ Inductor kernel names
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem|for|spl|mm|bmm)_(?:fused_)?(.*?)(?:_\d+)*$")
# SDPA ops Inductor names in a pointwise/reduction kernel that prepares their input (RoPE + layout copy for
# cuDNN/flash inputs, named after the op its output feeds): the kernel computes none of the attention
ATTENTION_WORDS = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "scaled_dot_product_attention",
    # the same for the FuseLens custom ops (kernels/models/custom_ops.py) under torch.compile: an RMSNorm kernel whose
    # output feeds fuselens::dual_gemm_glu is named triton_red_fused_…_add_dual_gemm_glu_mean_mul_pow_rsqrt_…
    "dual_gemm_glu",
    "glu_gating",
    "gemm_bias_act",
)
# aten op names Inductor joins with '_' (so they must be re-assembled); everything else is one word.
_MULTIWORD = sorted(
    _words("""_unsafe_view _unsafe_index _unsafe_index_put _reshape_alias _to_copy as_strided as_strided_scatter view_as
    lift_fresh split_with_sizes native_layer_norm native_group_norm native_batch_norm layer_norm group_norm
    batch_norm rms_norm _fused_rms_norm _softmax _log_softmax _softmax_backward_data _log_softmax_backward_data
    _native_batch_norm_legit_functional _native_batch_norm_legit_no_training _native_batch_norm_legit
    native_batch_norm_backward native_layer_norm_backward native_group_norm_backward native_dropout
    native_dropout_backward var_mean bitwise_and bitwise_or bitwise_not bitwise_xor logical_and logical_or
    logical_not index_put index_select index_add scatter_add scatter_reduce select_scatter slice_scatter
    masked_fill constant_pad_nd avg_pool2d avg_pool2d_backward max_pool2d max_pool2d_with_indices
    max_pool2d_with_indices_backward embedding_dense_backward nll_loss_forward nll_loss_backward threshold_backward
    gelu_backward silu_backward sigmoid_backward tanh_backward hardswish_backward convolution_backward full_like
    zeros_like ones_like empty_like new_zeros new_empty new_ones scalar_tensor _scaled_mm _addmm_activation
    clamp_min clamp_max nan_to_num where_self leaky_relu""")
    + list(ATTENTION_WORDS),
    key=len,
    reverse=True,
)


class InductorName(NamedTuple):
    kind: str  # poi, red, per, tem, for, spl, mm, bmm
    words: tuple[str, ...]  # aten op names as the kernel name lists them, views included, Inductor's order

    @property
    def ops(self) -> tuple[str, ...]:
        """The listed ops that compute something (views and copies dropped), in the name's order, each once."""
        dropped = (
            VIEW_OPS | COPY_OPS | (frozenset(ATTENTION_WORDS) if self.kind in ("poi", "red", "per") else frozenset())
        )
        return tuple(dict.fromkeys(w for w in self.words if w not in dropped))


@lru_cache(maxsize=8192)
def inductor(name: str | None) -> InductorName | None:
    """'triton_poi_fused__unsafe_view_gelu_mul_0' → InductorName('poi', ('_unsafe_view', 'gelu', 'mul'));
    None for any name Inductor did not write."""
    m = _INDUCTOR.match(name or "")
    if not m:
        return None
    kind, rest = m.groups()
    words: list[str] = []
    while rest:
        hit = next((w for w in _MULTIWORD if rest.startswith(w) and (len(rest) == len(w) or rest[len(w)] == "_")), None)
        if hit is not None:
            words.append(hit)
            rest = rest[len(hit) :]
        elif rest.startswith("_"):
            rest = rest[1:]  # the '_' between two names
        else:
            word, _, rest = rest.partition("_")
            words.append(word)
    return InductorName(kind, tuple(words))


def kernel_family(name: str) -> str:
    """An Inductor kernel's name without its trailing serial number ('…_rsqrt_12' → '…_rsqrt'): Inductor writes one
    kernel per call site, so the same fused code in every layer of a model carries 4 or 32 names. Others: as is."""
    return re.sub(r"(?:_\d+)+$", "", name) if inductor(name) is not None else name


def is_inductor_name(name: str | None) -> bool:
    return inductor(name) is not None


@lru_cache(maxsize=8192)
def inductor_ops(name: str | None) -> frozenset[str]:
    """Canonical ops an Inductor kernel name lists: 'triton_poi_fused__unsafe_view_gelu_mul_0' → {'gelu', 'mul'};
    'triton_tem_fused_addmm_gelu_0' → {'mm', 'add', 'gelu'}. Empty for any other name."""
    dec = inductor(name)
    if dec is None:
        return frozenset()
    ops: set[str] = {"mm"} if dec.kind in ("mm", "bmm") else set()
    for w in dec.words:
        if dec.kind in ("poi", "red", "per") and w in ATTENTION_WORDS:
            continue
        ops |= canonical_ops(w)
    if dec.kind in ("poi", "red", "per", "for", "spl"):
        # a pointwise / reduction kernel names the GEMM whose output it reads or whose input it prepares (a compiled
        # backward's 'triton_poi_fused__to_copy_add_bmm_cat_…' is RoPE's gradient): it computes no matrix product
        ops.discard("mm")
    return frozenset(ops)


# Inductor can cut a kernel name's sorted op list at torch._inductor.config.kernel_name_max_ops (default 10): a name
# with exactly that many words may have lost the ops that sort after its last word. (torch 2.11's names list all of
# them: a whole-model compile's RoPE + mask kernel names 25.)
INDUCTOR_MAX_NAME_OPS = 10
# Ops that combine many elements into one (a reduction, a scan, a normalisation): a pointwise (`poi`) kernel cannot
# compute them. Scatter-adds (embedding and nll_loss backward) are pointwise with atomics in Inductor: not listed.
REDUCTION_OPS = frozenset(
    _words("""mean sum amax amin max min prod var var_mean std norm logsumexp argmax argmin any all cumsum cumprod
    softmax log_softmax softmax_backward log_softmax_backward layer_norm rms_norm group_norm batch_norm
    layer_norm_backward rms_norm_backward group_norm_backward batch_norm_backward nll_loss_forward nll_loss
    nll_loss2d_forward cross_entropy""")
)
# A baseline op an Inductor name may list under other names, because a decomposition turned it into them before
# the kernel was named (descriptive names list the FX graph's aten ops). A claim through one of these says so.
INDUCTOR_REWRITES: dict[str, frozenset[str]] = {
    "neg": frozenset(["sub"]),  # x·(-1) + y folded into y - x
    "div": frozenset(["mul", "reciprocal"]),  # division by a scalar as a multiplication
    "fill": frozenset(["full", "zeros", "new_zeros", "zeros_like", "full_like"]),
    "gather": frozenset(["embedding", "index_select", "index"]),  # an eager embedding's lookup kernel
    "index_select": frozenset(["embedding", "index"]),
}


class NameVerdict(NamedTuple):
    allowed: bool | None  # None: the name carries no op list (descriptive names off, not Inductor): other evidence
    how: str  # '' when named outright; 'rewrite: …' or 'truncated name: …' when allowed another way; why not


@lru_cache(maxsize=65536)
def inductor_name_verdict(cand_name: str | None, base_op: str | None, base_ops: frozenset[str]) -> NameVerdict:
    """May the Inductor kernel `cand_name` have computed a baseline kernel of aten op `base_op` (canonical ops
    `base_ops`)? Inductor's descriptive name lists the aten ops it was generated from, so a baseline op absent from
    that list was not fused into it, unless a known decomposition (INDUCTOR_REWRITES) names it otherwise or the name
    was cut at INDUCTOR_MAX_NAME_OPS before the op's place in the sorted list. Copies and views move data only:
    any kernel may have absorbed one. A pointwise kernel computes no reduction, whatever its name lists."""
    dec = inductor(cand_name)
    if dec is None or not any(not w.isdigit() for w in dec.words):  # 'triton_poi_fused_0': descriptive names off
        return NameVerdict(None, "")
    need = set(base_ops) - set(COPY_OPS) - {"copy"}
    if dec.kind in ("poi", "red", "per", "for", "spl") and "mm" in need:
        return NameVerdict(False, "a pointwise or reduction kernel computes no matrix product")
    if dec.kind == "poi" and need & REDUCTION_OPS:
        return NameVerdict(False, f"a pointwise kernel computes no {'/'.join(sorted(need & REDUCTION_OPS))}")
    listed = inductor_ops(cand_name) | frozenset(dec.words)
    missing = need - listed
    if not missing:
        return NameVerdict(True, "")
    rewrites = [f"{op} as {'/'.join(sorted(INDUCTOR_REWRITES[op] & listed))}" for op in sorted(missing)
                if INDUCTOR_REWRITES.get(op, frozenset()) & listed]  # fmt: skip
    if len(rewrites) == len(missing):
        return NameVerdict(True, "rewrite: " + ", ".join(rewrites))
    base = op_base(base_op)
    if len(dec.words) == INDUCTOR_MAX_NAME_OPS and base and base > dec.words[-1]:
        return NameVerdict(True, f"truncated name: {base} would sort after its last listed op {dec.words[-1]}")
    return NameVerdict(False, f"its name lists no {'/'.join(sorted(missing))}")


def is_fusible(ops) -> bool:
    """Can one fused memory-bound kernel absorb a kernel computing `ops`? Known data-parallel ops only (pointwise,
    norms, softmax, reductions, losses, copies, views, and the multi-tensor `_foreach_` ops of optimizers)."""
    known = FUSIBLE_OPS | POINTWISE_OPS | SAME_AS_FIRST_OPS | NORM_OPS | VIEW_OPS
    return bool(ops) and all(o in known or o.startswith("_foreach_") for o in ops)


def is_norm(ops) -> bool:
    """Do these (Inductor) ops make a normalization: layer/group/batch/RMS norm, softmax, or mean + rsqrt (RMSNorm)?"""
    s = set(ops)
    return bool(s & NORM_OPS or {"mean", "rsqrt"} <= s)


# ----------------------------------------------------------------------------------------------- free text
# Words in free text (user kernel names, autograd Functions, ranges) → ops, first listed first. A word must stand
# alone (bounded by '_' or the ends once CamelCase is split), so 'linear' does not fire inside 'linearize'.
# fmt: off
WORD_OPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("geglu", ("gelu", "mul")), ("swiglu", ("silu", "mul")), ("reglu", ("relu", "mul")),
    ("rms_?norm", ("rms_norm",)), ("layer_?norm", ("layer_norm",)), ("group_?norm", ("group_norm",)),
    ("cross_entropy", ("cross_entropy",)), ("softmax", ("softmax",)),
    ("addmm", ("mm", "add")), ("matmul|gemm|linear|mm|bmm", ("mm",)),
    ("gelu", ("gelu",)), ("silu|swish", ("silu",)), ("relu", ("relu",)), ("sigmoid", ("sigmoid",)),
    ("tanh", ("tanh",)), ("mul", ("mul",)), ("add|residual", ("add",)), ("bias", ("bias",)),
    ("dropout", ("dropout",)), ("rope|rotary", ("rope",)), ("quant|quantize|fp8\\w*|hfp8|qparam", ("quantize",)),
    ("cache|to_dense|copy|recat_copy|page_indices", ("copy",)), ("permute\\w*", ("permute",)),
    ("bucketize\\w*", ("bucketize",)), ("searchsorted", ("searchsorted",)), ("offsets_range", ("arange",)),
    ("bounds_check", ("bounds_check",)), ("linearize_index|compute_cuda", ("index",)),
)
# fmt: on
_WORD_RES = tuple((re.compile(rf"(?:^|_)(?:{w})(?=$|_)"), ops) for w, ops in WORD_OPS)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# activations (and norms) whose backward is an op of its own: a backward kernel computes 'gelu_backward'
HAS_BACKWARD = frozenset(
    ["gelu", "silu", "relu", "sigmoid", "tanh", "rms_norm", "layer_norm", "group_norm", "softmax", "rope",
     "cross_entropy", "dropout"]
)  # fmt: skip


def _text_words(text: str) -> str:
    """'void (anonymous namespace)::LigerGELUMulFunction<…>(…)' → 'liger_gelu_mul_function': the function name
    before any template or argument list, CamelCase split, lower case, one '_' between words. Template arguments
    never decide what a kernel computes (a `cutlass::bfloat16_t` argument does not make a kernel CUTLASS's)."""
    base = text.removeprefix("void ").replace("(anonymous namespace)::", "")
    base = re.split(r"[(<]", base, maxsplit=1)[0]
    base = re.sub(r"(ge(?:g)?lu)_tanh", r"\1", _CAMEL.sub("_", base), flags=re.IGNORECASE)  # tanh-approximate GELU
    return "_".join(w for w in re.split(r"[^A-Za-z0-9]+", base.lower()) if w)


@lru_cache(maxsize=8192)
def word_ops(text: str | None) -> tuple[str, ...]:
    """Ops named by words in free text, in WORD_OPS order, each once: '_geglu_tanh_forward_kernel' → (gelu, mul)."""
    if not text:
        return ()
    words = _text_words(text)
    ops: list[str] = []
    for rx, found in _WORD_RES:
        if rx.search(words):
            ops.extend(o for o in found if o not in ops)
    return tuple(ops)


# What an aten op's derivative formula (derivatives.yaml) reads of its forward call besides the gradient, one kernel
# per gradient it computes: 'inputs' (mul: grad·other, grad·self; gelu / silu: gelu_backward(grad, self); mm / bmm:
# grad·mat2ᵀ, selfᵀ·grad), 'output' (softmax: _softmax_backward_data(grad, output); tanh, sigmoid), 'nothing' (add,
# sub, a copy or cast: the gradient alone; each kernel that reads a tensor of the output's size beside the
# gradient reads the output). analyzer.diff.saved reads it to follow a saved tensor from the forward
# into the backward; an op not listed (pow, div, a norm) reads what the table cannot say.
FORMULA_READS = {
    **dict.fromkeys(["mul", "gelu", "silu", "mm", "bmm"], "inputs"),
    **dict.fromkeys(["_softmax", "_log_softmax", "softmax", "log_softmax", "tanh", "sigmoid"], "output"),
    # nll_loss_backward reads the target alone (the input only for its size)
    **dict.fromkeys(
        ["add", "sub", "neg", "_to_copy", "to", "copy_", "clone", "contiguous", "nll_loss_forward"], "nothing"
    ),
}


_FORMULA_NODE = re.compile(r"(?:^|[\s:])[A-Z][A-Za-z0-9]*Backward\d+$")


def is_formula_node(name: str | None) -> bool:
    """Is an autograd node ('autograd::engine::evaluate_function: MulBackward0') one aten op's derivative formula
    (numbered: MulBackward0, MmBackward0), whose op calls compute separate gradients (grad·other, grad·self)? A
    compiled graph's node (CompiledFunctionBackward), a custom op's (GeneratedBackwardFor_…Backward) or an
    autograd.Function's (LigerGELUMulFunctionBackward) runs a program whose kernels feed each other."""
    return bool(_FORMULA_NODE.search(str(name or "").strip()))


def is_backward_text(text: str | None) -> bool:
    return bool(re.search(r"(?:^|_)(?:backward|bwd)(?:_|$)", _text_words(text or "")))


@lru_cache(maxsize=8192)
def text_ops(text: str | None) -> frozenset[str]:
    """Canonical ops named by free text: 'LigerGELUMulFunction' → {'gelu', 'mul'}; a backward text adds the
    activations' backward ops ('LigerGELUMulFunctionBackward' → {'gelu', 'mul', 'gelu_backward'})."""
    found = word_ops(text)
    ops: set[str] = set()
    for o in found:
        ops |= canonical_ops(o)
    if is_backward_text(text):
        ops |= {f"{o}_backward" for o in found if o in HAS_BACKWARD}
    return frozenset(ops)


# ---------------------------------------------------------------------------- library kernel names (epilogues)
# cuBLAS / cuBLASLt (nvjet) / CUTLASS / cuDNN names spell their epilogue as a word of the name.
EPILOGUE_WORDS = ("bias", "relu", "gelu", "silu", "swiglu", "dgelu", "drelu", "bgrad")


def epilogue_ops(name: str, base: str = "mm") -> str:
    """'cutlass_80_tensorop_bf16_s16816gemm_relu_…' → 'mm+relu'; 'nvjet_…_bz_bias_TNN' → 'mm+bias'."""
    words = set(re.split(r"[^a-z0-9]+", function_name(name).lower()))
    return "+".join([base] + [w for w in EPILOGUE_WORDS if w in words])


# Templates whose arguments name the work (a generic launcher instantiated with the kernel or functor that runs):
# CUTLASS's Kernel<cutlass_80_…_relu_…>, cuDNN's cutlass_cudnn::Kernel<…wgrad…>, ATen's elementwise / reduce /
# multi-tensor launchers <…, GeluCUDAKernelImpl …>. Any other template's arguments are types and tile sizes.
_LAUNCHER = re.compile(
    r"(?:^|::)(?:Kernel2?|device_kernel|\w*elementwise\w*|gpu_kernel_impl\w*|reduce_kernel|multi_tensor_apply_kernel)$"
)
_IDENT_END = re.compile(r"[A-Za-z_][A-Za-z0-9_:]*$")


@lru_cache(maxsize=8192)
def function_name(name: str) -> str:
    """The kernel name with the arguments of non-launcher templates emptied: template arguments name types, not
    work ('moe::dev::finalize::finalizeKernelVecLoad<KernelParams<cutlass::bfloat16_t, …>>' is no CUTLASS
    kernel), except in a generic launcher whose argument is the kernel that runs ('cutlass::Kernel2<cutlass_80_…>')."""
    name = name.replace("(anonymous namespace)::", "")
    out: list[str] = []
    i, n = 0, len(name)
    while i < n:
        ch = name[i]
        if ch != "<":
            out.append(ch)
            i += 1
            continue
        depth, j = 1, i + 1
        while j < n and depth:
            depth += {"<": 1, ">": -1}.get(name[j], 0)
            j += 1
        ident = _IDENT_END.search("".join(out[-80:]))
        if ident and _LAUNCHER.search(ident.group(0)):
            out.append(name[i:j])
        else:
            out.append("<>")
        i = j
    return "".join(out)


# What a fusion group computes, by the ops of the kernels it replaced (every match, in this order, joined by ' + ';
# the diff's labels). Backward patterns first: their op sets are their own.
FUSION_PATTERNS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset(["_foreach_mul", "_foreach_add"]), "optimizer step"),
    (frozenset(["_foreach_lerp"]), "optimizer step"),
    (frozenset(["_fused_adamw"]), "optimizer step"),
    (frozenset(["_fused_adam"]), "optimizer step"),
    (frozenset(["log_softmax", "nll_loss_forward"]), "cross-entropy"),
    (frozenset(["log_softmax_backward"]), "cross-entropy backward"),
    (frozenset(["nll_loss_backward"]), "cross-entropy backward"),
    (frozenset(["embedding_dense_backward"]), "embedding backward"),
    (frozenset(["layer_norm_backward"]), "LayerNorm backward"),
    (frozenset(["rms_norm_backward"]), "RMSNorm backward"),
    (frozenset(["pow", "sum", "div", "mul"]), "RMSNorm backward"),  # eager: Pow/Mean/RsqrtBackward's kernels
    (frozenset(["silu_backward"]), "SwiGLU gating backward"),
    (frozenset(["gelu_backward"]), "GEGLU gating backward"),
    (frozenset(["pow", "mean", "rsqrt"]), "RMSNorm"),
    (frozenset(["layer_norm"]), "LayerNorm"),
    (frozenset(["rms_norm"]), "RMSNorm"),
    (frozenset(["neg", "cat", "mul"]), "RoPE"),
    (frozenset(["gelu", "mul"]), "GEGLU gating"),
    (frozenset(["silu", "mul"]), "SwiGLU gating"),
)


def fusion_pattern(ops, attention: bool = False, backward: bool = False) -> str:
    """'attention', 'RMSNorm', 'RoPE', 'GEGLU gating', 'cross-entropy backward', 'optimizer step', … for a group
    whose replaced kernels computed `ops` ('' when no pattern fits). backward: the group's kernels ran in a
    training step's backward (RoPE's gradient is neg and mul of the gradient halves, no cat)."""
    if attention:
        if backward or "softmax_backward" in set(ops):
            return "attention backward (dQ, dK, dV through the scores)"
        return "attention (QKᵀ, scale, mask, softmax, PV)"
    s = frozenset(ops)
    if any(o.startswith("_foreach_") or o.startswith("_fused_adam") for o in s):
        return "optimizer step"
    found: list[str] = []
    for need, label in FUSION_PATTERNS:
        if need <= s and label not in found:
            found.append(label)
    if backward and not found and {"neg", "mul"} <= s:
        found.append("RoPE backward")
    if not found and s and s <= {"copy", "fill", "cat"}:  # layout copies, casts and zero-fills folded into one
        found.append("copies and casts")
    # a backward label covers the forward one its ops also contain (RMSNorm backward's pow, sum, div, mul)
    found = [f for f in found if f + " backward" not in found]
    if backward and found and all(not f.endswith(("backward", "step", "casts")) for f in found):
        found = [f + " backward" for f in found]
    return " + ".join(found)
