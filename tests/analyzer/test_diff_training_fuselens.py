"""The diff explains a recorded FuseLens training step (sample_traces/geglu_train_fuselens_bf16: H100, HF GEGLU MLP
8192 tokens × 768 → 3072, bf16, forward + backward + AdamW) against eager, compile and Liger: which baseline kernels
each FuseLens kernel replaced and the HBM bytes that avoided, worked out here by hand from the shapes (never copied
from the tool's output).

The FuseLens step (docs/KERNELS.md "Training"): fuselens_dual_gemm_glu_save_kernel computes g = x·Wgᵀ and
u = x·Wuᵀ and writes them (saved for the backward, in gu) with h = gelu_tanh(g)·u; cuBLAS runs the down projection
and dW_down; fuselens_mlp_bwd_dh_kernel keeps dH = dY·W_down in its accumulator and writes dg = dH·u·gelu′(g) and
du = dH·gelu(g) over g and u; one cuBLAS GEMM computes [dWg; dWu] = [dg | du]ᵀ·x (x needs no gradient: no dX).

Per [M, h] tensor T = 8192 × 3072 × 2 B. Moves over [M, h] tensors per step, by hand:
  eager   forward  mm→g (T), gelu reads g writes a (2T), mm→u (T), mul reads a, u writes h (3T), down reads h (T) = 8T
          backward dW_down reads h (T), dH mm writes dH (T), dH·u reads dH, u writes (3T), dH·a reads dH, a writes
          du (3T), dWu reads du (T), gelu_backward reads dH·u, g writes dg (3T), dWg reads dg (T)         = 13T
  compile forward  mm→g, mm→u (2T), gelu·mul reads g, u writes h (3T), down reads h (T)                     = 6T
          backward dW_down (T), dH mm (T), one kernel reads dH, g, u writes dg, du (5T), dWg, dWu (2T)       = 9T
  Liger   the same as compile (its GEGLU forward and backward kernels read and write what Inductor's do)   = 15T
  FuseLens forward dual GEMM writes g, u, h (3T), down reads h (T)                                           = 4T
          backward dW_down (T), dH kernel reads g, u writes dg, du (4T), merged GEMM reads dg, du (2T)        = 7T
So FuseLens avoids 10T against eager and 4T against compile and Liger over [M, h] tensors. Against eager the 10T
lie in two groups: the dual GEMM's g and u reads (2T) and a's write, its read by the mul and its second read by the
backward's dH·a (3T: a crosses from the forward's group into the backward's; it is counted once, with the tensor,
in the forward group that avoided its write), and the dH kernel's 5T (dH written and read twice, dH·u written and
read).

Per [M, d] tensor X = 8192 × 768 × 2 B (x): the baselines' dWg and dWu GEMMs read x twice, the merged [dWg; dWu]
GEMM once: X avoided (the merge's shared operand, B [K, N] of the M-stacked GEMMs). In all, by the diff's rule:
10T + X against eager, 4T + X against compile and Liger. (The forward reads x twice in the baselines and once in
the dual GEMM too; the dual GEMM is a fusion of its group's ops, whose inputs the rule counts as still read.)
"""

from __future__ import annotations

from collections import namedtuple

import pytest

from analyzer.diff import diff_runs
from analyzer.diff.align import align, sequence
from analyzer.diff.match import Group, _intermediates, group_kernels
from analyzer.diff.merge import MERGE_EVIDENCE, _pick, _stacked
from analyzer.opinfo.classify import name_facts
from analyzer.opinfo.gemm import Gemm, fused_gemm_problems
from analyzer.opinfo.tensors import Tensor
from tests.analyzer.test_diff import summary_of
from tests.conftest import SAMPLE_TRACES, require_data

M, D, H, BF16 = 8192, 768, 3072, 2  # tokens, d_model, hidden; bytes per bf16 element
T = M * H * BF16  # one [M, h] bf16 tensor: 50,331,648 B
SET = SAMPLE_TRACES / "geglu_train_fuselens_bf16"
DUAL, DH = "fuselens_dual_gemm_glu_save_kernel", "fuselens_mlp_bwd_dh_kernel"

# bytes each group avoids, by hand (module doc)
EAGER_CROSS_GROUP = T  # the backward's dH·a re-reads a = gelu(g); FuseLens' dH kernel recomputes it from g
EAGER_DUAL = T + T + 2 * T + EAGER_CROSS_GROUP  # reads of g (gelu), u (mul); a written, read by mul and by dH·a
EAGER_DH = 3 * T + 2 * T  # dH written once, read by dH·u and dH·gelu(g); dH·u written, read by gelu_backward
COMPILE_DUAL = T + T  # reads of g and u by the gelu·mul kernel (compile already fused gelu·mul)
COMPILE_DH = 2 * T  # dH written by the mm, read by the gelu-backward kernel
X = M * D * BF16  # x [8192, 768] bf16: 12,582,912 B
MERGE = (2 - 1) * X  # dWg = dgᵀ·x, dWu = duᵀ·x ([3072, 8192]·[8192, 768]) share B = x: read once, not twice


@pytest.fixture(scope="module")
def diffs():
    paths = {v: SET / f"{v}.json.gz" for v in ("eager", "compile", "liger", "fuselens")}
    require_data(*paths.values())
    cand = summary_of(str(paths["fuselens"]))
    return {b: diff_runs(summary_of(str(paths[b])), [cand]).candidates[0] for b in ("eager", "compile", "liger")}


def _group(cd, kernel: str):
    (g,) = [f for f in cd.fusions + cd.swaps if f.fused_kernel == kernel]
    return g


def _merge(cd):
    (g,) = [f for f in cd.fusions if f.pattern.startswith("GEMM merge")]
    return g


def test_against_eager_each_fuselens_kernel_replaced_its_ops_and_avoided_the_bytes_by_hand(diffs):
    cd = diffs["eager"]
    dual, dh = _group(cd, DUAL), _group(cd, DH)
    assert dual.kind == "fusion" and sorted(dual.replaced_ops) == ["aten::gelu", "aten::mm", "aten::mm", "aten::mul"]
    assert dual.bytes_avoided_per_step == EAGER_DUAL  # 251,658,240 B, not 3 × (write + read)
    kept = [i for i in dual.intermediates if i.get("still_written")]
    assert len(kept) == 2 and all(i["bytes"] == T and i["round_trip_bytes"] == T for i in kept)  # g and u
    assert dh.kind == "fusion"
    assert sorted(dh.replaced_ops) == ["aten::gelu_backward", "aten::mm", "aten::mul", "aten::mul"]
    assert dh.bytes_avoided_per_step == EAGER_DH  # 251,658,240 B
    # the whole-step count over [M, h] tensors (21 T → 11 T) and the merge's x, every figure exact
    assert cd.hbm_bytes_avoided_per_step == EAGER_DUAL + EAGER_DH + MERGE == (21 - 11) * T + X
    assert cd.bytes_complete


@pytest.mark.parametrize("base, fwd_op, bwd_op", [
    ("compile", "triton_poi_fused__unsafe_view_gelu_mul_0", "triton_poi_fused__unsafe_view_gelu_gelu_backward_mul_view_0"),
    ("liger", "LigerGELUMulFunction", "LigerGELUMulFunctionBackward"),
])  # fmt: skip
def test_against_compile_and_liger_only_the_reads_of_g_u_and_the_dh_round_trip_are_avoided(diffs, base, fwd_op, bwd_op):
    cd = diffs[base]
    dual, dh = _group(cd, DUAL), _group(cd, DH)
    assert sorted(dual.replaced_ops) == sorted(["aten::mm", "aten::mm", fwd_op])
    assert dual.bytes_avoided_per_step == COMPILE_DUAL  # 100,663,296 B
    assert dh.kind == "fusion" and sorted(dh.replaced_ops) == sorted(["aten::mm", bwd_op])  # not a swap of the mm
    assert dh.bytes_avoided_per_step == COMPILE_DH  # 100,663,296 B
    assert cd.hbm_bytes_avoided_per_step == COMPILE_DUAL + COMPILE_DH + MERGE == (15 - 11) * T + X  # the whole step


def test_the_backwards_reread_of_gelu_g_is_counted_once_in_the_group_that_avoided_its_write(diffs):
    """eager writes a = gelu(g) in the forward; the gating mul reads it there and the backward's dH·a (MulBackward0:
    grad·self) reads it again. FuseLens writes no a (its dH kernel recomputes gelu(g) from g), so a's write and both
    reads are avoided: 3T, counted once, with the tensor, in the dual GEMM's group; the dH kernel's group does not
    count the read again."""
    cd = diffs["eager"]
    dual, dh = _group(cd, DUAL), _group(cd, DH)
    (a,) = [i for i in dual.intermediates if i.get("readers_in_other_groups")]
    assert a["producer_op"] == "aten::gelu" and a["bytes"] == T and a["reads"] == 2 and not a.get("still_written")
    assert a["round_trip_bytes"] == (1 + 1 + 1) * T == EAGER_DUAL - 2 * T  # write, the mul's read, dH·a's read
    (reader,) = a["readers_in_other_groups"]
    assert reader in dh.replaces  # a kernel the dH kernel replaced
    assert not any(i.get("readers_in_other_groups") for i in dh.intermediates)
    assert dual.bytes_avoided_per_step + dh.bytes_avoided_per_step == (21 - 11) * T  # module doc: 10T
    assert "1 read in another group" in dual.bytes_note
    for base in ("compile", "liger"):  # their forward saves g and u, which FuseLens writes too: nothing crosses
        assert not any(i.get("readers_in_other_groups") for f in diffs[base].fusions for i in f.intermediates)


@pytest.mark.parametrize("base", ["compile", "liger"])
def test_compile_and_liger_figures_are_exact_not_at_least(diffs, base):
    """Inductor's and Liger's GEGLU kernels do not say which of their args they wrote, but each ends its group:
    no member runs after it to read what it wrote, so no figure rests on it. 2T, 2T and X (module doc), exact."""
    cd = diffs[base]
    for g, expected in ((_group(cd, DUAL), COMPILE_DUAL), (_group(cd, DH), COMPILE_DH), (_merge(cd), MERGE)):
        assert g.bytes_complete and g.bytes_avoided_per_step == expected and "at least" not in g.bytes_note
    assert cd.bytes_complete and cd.to_json()["hbm_bytes_avoided_complete"] is True


def test_an_unknown_output_a_later_member_could_read_keeps_at_least():
    """The same Inductor gelu·mul kernel, its output unknown, followed in a group by the down GEMM that reads h:
    what passes between them is unknown, so the figure is a lower bound (the qualifier stays)."""
    require_data(SET / "compile.json.gz", SET / "fuselens.json.gz")
    b = sequence(summary_of(str(SET / "compile.json.gz")), "compile")
    c = sequence(summary_of(str(SET / "fuselens.json.gz")), "fuselens")
    gm = [i for i, r in enumerate(b.records) if r.kind == "kernel" and "gelu_mul" in str(r.name)]
    (gelu_mul,) = gm
    down = gelu_mul + 1
    assert b.records[gelu_mul - 1].is_gemm and b.records[down].is_gemm and b.records[gelu_mul].io.output is None
    dual = next(j for j, r in enumerate(c.records) if r.name == DUAL)
    ends = Group(fused=[dual], members=[gelu_mul - 1, gelu_mul])  # up GEMM, gelu·mul: the kernel ends the group
    _intermediates(ends, b.records, c.records)
    assert ends.bytes_complete
    mid = Group(fused=[dual], members=[gelu_mul - 1, gelu_mul, down])  # the down GEMM after it could read h
    _intermediates(mid, b.records, c.records)
    assert not mid.bytes_complete


def test_a_merge_counts_its_shared_operand_read_once(diffs):
    """[dWg; dWu] = [dg | du]ᵀ·x reads x [8192, 768] once; dWg = dgᵀ·x and dWu = duᵀ·x read it twice."""
    for base in ("eager", "compile", "liger"):
        merge = _merge(diffs[base])
        (op,) = merge.intermediates
        assert op["shared_operand"] and op["shape"] == [M, D] and op["dtype"] == "bf16"
        assert op["bytes"] == X and op["reads"] == 1 and op["round_trip_bytes"] == MERGE
        assert merge.bytes_avoided_per_step == MERGE == 12_582_912
        assert "read once, not 2×" in merge.bytes_note


def test_the_shared_operand_of_a_merge_along_either_dimension():
    """Stacked along M (every member (M_i, N, K)): B [K, N] is shared; along N ((M, N_i, K)): A [M, K]. Read once
    by the merged GEMM instead of once per member: (members - 1) × its bytes, from the shapes."""
    from analyzer.diff.merge import merged_operand  # the one place a merge's bytes are counted

    row = namedtuple("row", "gemm")
    ev = f"{MERGE_EVIDENCE}: …"
    wgrad = [row(Gemm(H, D, M, "bf16")), row(Gemm(H, D, M, "bf16"))]  # dgᵀ·x, duᵀ·x: [3072, 8192]·[8192, 768]
    t, rereads = merged_operand(Group(fused=[0], members=[0, 1], evidence=dict.fromkeys([0, 1], ev)), wgrad)
    assert t.shape == (M, D) and t.nbytes == X and rereads == [1]
    qkv = [row(Gemm(M, 4096, 4096, "bf16")), row(Gemm(M, 1024, 4096, "bf16")), row(Gemm(M, 1024, 4096, "bf16"))]
    t, rereads = merged_operand(Group(fused=[0], members=[0, 1, 2], evidence=dict.fromkeys([0, 1, 2], ev)), qkv)
    assert t.shape == (M, 4096) and len(rereads) * t.nbytes == 2 * (M * 4096 * BF16)  # x read once, not 3 times
    assert merged_operand(Group(fused=[0], members=[0, 1]), wgrad) is None  # not a merge: nothing to count


@pytest.mark.parametrize("base", ["eager", "compile", "liger"])
def test_weight_gradients_are_one_merged_gemm_and_nothing_is_unexplained(diffs, base):
    cd = diffs[base]
    merge = _merge(cd)
    assert merge.replaced_ops == ["aten::mm", "aten::mm"] and merge.bytes_avoided_per_step == MERGE
    assert cd.accounting.unexplained == []  # the whole MLP (and the loss around it) is matched or replaced
    assert cd.accounting.explained_time_share == 1.0


@pytest.mark.parametrize("base", ["eager", "compile", "liger"])
def test_time_saved_by_fusions_has_the_sign_of_the_kernel_time_change(diffs, base):
    cd = diffs[base]
    tb = cd.time_breakdown
    saved = tb["base_kernel_time_us"] - tb["candidate_kernel_time_us"]
    assert saved > 0 and cd.time_saved_us_per_step > 0, (saved, cd.time_saved_us_per_step)
    # the groups' saving and the step's differ by the work outside the groups: the candidate's one new kernel (the
    # weight interleave, a cat of ~8.5 µs) and the matched kernels' step-to-step jitter (under 1% of the step)
    (new,) = cd.accounting.new
    assert new["op"] == "aten::cat" and -tb["added_kernels_us"] == new["time_us_per_step"]
    jitter = abs(cd.time_saved_us_per_step - new["time_us_per_step"] - saved)
    assert jitter < 0.01 * tb["base_kernel_time_us"], (cd.time_saved_us_per_step, saved, new)


def test_each_fuselens_kernel_took_the_gemms_its_shapes_run():
    """Member by member: the dual GEMM took the two M×h×d projections, the dH kernel the dH GEMM (M×h×d, from dY
    and W_down), the merge the two h×d×M weight-gradient GEMMs."""
    require_data(SET / "eager.json.gz", SET / "fuselens.json.gz")
    b = sequence(summary_of(str(SET / "eager.json.gz")), "eager")
    c = sequence(summary_of(str(SET / "fuselens.json.gz")), "fuselens")
    res = group_kernels(b, c, align(b.rows, c.rows))
    by_kernel = {c.records[g.fused[0]].name: g for g in res.groups}

    def gemms(name):
        return sorted((b.records[m].gemm.m, b.records[m].gemm.n, b.records[m].gemm.k)
                      for m in by_kernel[name].members if b.records[m].is_gemm)  # fmt: skip

    assert gemms(DUAL) == [(M, H, D), (M, H, D)]
    assert gemms(DH) == [(M, H, D)]
    (merged,) = [n for n, g in by_kernel.items() if n not in (DUAL, DH) and g.kind == "fusion"]
    assert gemms(merged) == [(H, D, M), (H, D, M)] and c.records[by_kernel[merged].fused[0]].gemm.m == 2 * H


def test_fuselens_kernel_names_rule_out_a_prologue_and_say_what_they_save():
    assert name_facts(DUAL).saves_gemm_outputs and name_facts(DUAL).epilogue_only
    assert not name_facts("fuselens_dual_gemm_glu_kernel").saves_gemm_outputs  # the inference kernel writes h only
    assert name_facts(DH).epilogue_only and not name_facts(DH).saves_gemm_outputs
    assert not name_facts("triton_poi_fused__unsafe_view_gelu_mul_0").epilogue_only  # Inductor: read from its name


def test_fused_gemm_problems_from_the_ops_shapes():
    x, w = Tensor((M, D), "bf16"), Tensor((H, D), "bf16")
    assert fused_gemm_problems(
        "GeneratedBackwardFor_fuselens_glu_mlp_train_default", [x, w, w, Tensor((D, H), "bf16")]
    ) == (
        (M, H, D),
        (M, H, D),
    )
    gu, wd = Tensor((M, 2 * H), "bf16"), Tensor((D, H), "bf16")
    assert fused_gemm_problems("fuselens::glu_mlp_backward", [x, x, gu, w, w, wd]) == ((M, H, D),)
    # g and u saved apart: the forward op of that layout and its dH op (dy, w_down, g, u)
    apart = fused_gemm_problems("GeneratedBackwardFor_fuselens_glu_mlp_train_apart_default", [x, w, w, wd])
    assert apart == ((M, H, D),) * 2
    g = Tensor((M, H), "bf16")
    assert fused_gemm_problems("fuselens::glu_dh_grad", [x, wd, g, g]) == ((M, H, D),)
    assert fused_gemm_problems("aten::mm", [x, w]) is None


def test_a_gemm_merge_needs_exact_algebra():
    """Stacked along M with B shared, or along N with A shared; same dtype; the sum exact, two members or more."""
    c = Gemm(2 * H, D, M, "bf16")
    half = Gemm(H, D, M, "bf16")
    assert _stacked(c, half) == "m" and _stacked(c, Gemm(H, D, M, "fp16")) is None
    assert _stacked(c, Gemm(H, D, M // 2, "bf16")) is None  # K differs: not a block of it
    found = [(1, 10, half, "m"), (2, 11, half, "m")]
    assert _pick(c, found) == ("m", [10, 11])
    assert _pick(c, found[:1]) is None  # one GEMM of half its M: no merge
    assert _pick(c, [(1, 10, half, "m"), (2, 11, Gemm(H - 64, D, M, "bf16"), "m")]) is None  # sum falls short
    qkv = Gemm(M, 6144, 4096, "bf16")
    parts = [(1, 1, Gemm(M, 4096, 4096, "bf16"), "n"), (2, 2, Gemm(M, 1024, 4096, "bf16"), "n")]
    assert _pick(qkv, [*parts, (3, 3, Gemm(M, 1024, 4096, "bf16"), "n")]) == ("n", [1, 2, 3])


def test_dual_gemm_takes_no_prologue_on_a_compiled_llama():
    """A compiled 4-layer Llama forward with the FuseLens MLP (sample_traces/llama_model_bf16, compile-fuselens:
    4096 tokens × 2048 → 5632 bf16) against eager: each dual GEMM replaced its two projections, SiLU and the gating
    mul, and never the RMSNorm's weight mul before it (its kernel has no prologue): that mul went to the compiled
    RMSNorm kernel. Bytes by hand: g, u and silu(g) ([4096, 5632] bf16) written once and read once each."""
    d = SAMPLE_TRACES / "llama_model_bf16"
    require_data(d / "eager.json.gz", d / "compile-fuselens.json.gz")
    (cd,) = diff_runs(
        summary_of(str(d / "eager.json.gz")), [summary_of(str(d / "compile-fuselens.json.gz"))]
    ).candidates
    (dual,) = [f for f in cd.fusions if f.fused_kernel == "fuselens_dual_gemm_glu_kernel"]
    assert dual.count_per_step == 4
    assert sorted(dual.replaced_ops) == ["aten::mm", "aten::mm", "aten::mul", "aten::silu"]
    assert dual.bytes_avoided_per_step == 4 * 3 * (4096 * 5632 * BF16) * 2
    norms = [f for f in cd.fusions if "rsqrt" in f.fused_kernel and "dual_gemm_glu" in f.fused_kernel]
    assert norms and all(f.replaced_ops.count("aten::mul") >= 2 for f in norms)  # the norm's x·rsqrt and ·weight
