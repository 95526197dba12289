"""Whole-model workloads (kernels.models.whole_model): transformers' own LlamaForCausalLM / GemmaForCausalLM at tiny
sizes on the CPU (full size on the GPU: `bash kernels/lab/device_job.sh record-model`)."""

import pytest

from tests.kernels._kernels_env import DEVICE, ON_GPU, torch

pytest.importorskip("transformers", reason="whole-model workloads need transformers")

# isort: split
from kernels.models import whole_model  # noqa: E402
from kernels.models.variants import LAYER_VARIANTS, VariantUnavailable, build  # noqa: E402
from kernels.runner import options  # noqa: E402

TINY = {
    "llama-model": whole_model.ModelShape(hidden=64, intermediate=96, heads=4, kv_heads=2, head_dim=16, layers=3, vocab=101),
    "gemma-model": whole_model.ModelShape(hidden=64, intermediate=160, heads=4, kv_heads=1, head_dim=16, layers=2, vocab=97),
}  # fmt: skip
CHECKED = [v for v in LAYER_VARIANTS if ON_GPU or not v.startswith("compile")]


def _tiny(workload, batch=2, seq=11):
    shape = TINY[workload]
    model = whole_model.build_whole_model(workload, torch.float32, DEVICE, batch=batch, seq=seq, shape=shape)
    return model, whole_model.make_tokens(batch, seq, shape.vocab, DEVICE)


def test_runner_defaults_match_the_module():
    for name, shape in whole_model.DEFAULT_SHAPES.items():
        d = options.MODEL_DEFAULTS[name]
        assert (d["batch"], d["seq"]) == (whole_model.DEFAULT_BATCH, whole_model.DEFAULT_SEQ)
        assert (d["d_model"], d["hidden"], d["heads"], d["kv_heads"], d["head_dim"], d["layers"], d["vocab"]) == (
            shape.hidden,
            shape.intermediate,
            shape.heads,
            shape.kv_heads,
            shape.head_dim,
            shape.layers,
            shape.vocab,
        )
    assert options.MODEL_WORKLOADS == whole_model.MODEL_WORKLOADS


@pytest.mark.parametrize("workload", whole_model.MODEL_WORKLOADS)
def test_variants_compute_the_same_causal_model(workload):
    model, ids = _tiny(workload)
    assert len(model.mlps()) == TINY[workload].layers
    with torch.no_grad():
        ref = build("sdpa", model)(ids)
        assert ref.shape == (*ids.shape, TINY[workload].vocab)
        for name in CHECKED:
            try:
                fn = build(name, model)
            except VariantUnavailable:
                continue
            torch.testing.assert_close(fn(ids), ref, rtol=1e-4, atol=1e-4, msg=name)
        ids2 = ids.clone()
        ids2[:, -1] = (ids2[:, -1] + 1) % TINY[workload].vocab
        for name in ("eager", "sdpa"):  # causal: the last token changes no earlier position's logits
            fn = build(name, model)
            torch.testing.assert_close(fn(ids2)[:, :-1], fn(ids)[:, :-1])
    assert build("eager", model).attn_implementation == "eager" and model.attn_implementation == "sdpa"


@pytest.mark.slow  # the slow tier (README): 5.5 s idle; fast: test_kernels_train's variants train
def test_training_step_updates_every_weight_and_lowers_the_loss():
    model, ids = _tiny("llama-model")
    fn = build("eager", model, train=True)
    before = {n: p.detach().clone() for n, p in fn.named_parameters()}
    step = whole_model.train_step(fn, ids, compiled=False)
    losses = []
    for _ in range(3):
        losses.append(float(fn(ids, labels=ids).loss))
        step()
    changed = [n for n, p in fn.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert len(changed) == len(before)  # AdamW moved every parameter (embedding, norms, projections, LM head)
    assert all(p.grad is None for p in fn.parameters())  # zero_grad(set_to_none=True)
    assert losses[-1] < losses[0]
    assert torch.equal(next(model.parameters()), next(iter(before.values())))  # the variant trained its own copy


def test_runner_arguments():
    ns = options.build_parser().parse_args(["--workload", "llama-model", "--layers", "16", "--train", "--out", "x"])
    assert options.validate(ns) == ["eager", "sdpa", "compile", "compile-fuselens"]
    assert (ns.layers, ns.vocab, ns.heads, ns.batch, ns.seq) == (16, 32000, 16, 4, 1024)
    est = options.estimate_bytes(ns.workload, ns.batch * ns.seq, ns.d_model, ns.hidden, ns.dtype, True, ns)
    assert 8 * 2**30 < est < options.MAX_EST_BYTES  # 16 layers of saved activations and scores, AdamW state
    for argv, msg in (
        (["--workload", "llama-model", "--layers", "0"], "--layers must be between 1"),
        (["--workload", "geglu", "--layers", "4"], "apply to the whole-model workloads"),
        (["--workload", "gemma-model", "--vocab", "999999"], "--vocab must be between 1"),
    ):
        with pytest.raises(options.BadArgs, match=msg):
            options.validate(options.build_parser().parse_args([*argv, "--out", "x"]))


def test_model_flops():
    s = whole_model.DEFAULT_SHAPES["llama-model"]
    tokens = 4 * 1024
    mlp = 3 * 2 * tokens * s.hidden * s.intermediate
    proj = 2 * tokens * s.hidden * (2 * 16 * 128 + 2 * 4 * 128)
    attn = 4 * 4 * 16 * 1024 * 1024 * 128 // 2
    assert whole_model.model_flops(s, 4, 1024) == 4 * (mlp + proj + attn) + 2 * tokens * s.hidden * s.vocab


def test_the_profile_page_runs_a_whole_model():
    """The dashboard's Profile form: a whole model takes --layers and its own widths, and refuses MLP variants."""
    from app_core.profile_job import Params

    p = Params(workload="llama-model", batch=4, seq=1024, variants=("eager", "compile"), train=True, layers=8)
    argv = p.argv(options.Path("/tmp/out"))
    assert argv[argv.index("--layers") + 1] == "8" and "--d-model" not in argv and "--train" in argv
    assert options.validate(options.build_parser().parse_args(argv[argv.index("--workload") :])) == ["eager", "compile"]
    bad = Params(workload="gemma-model", variants=("liger",), layers=0).problems()
    assert any("liger not for whole models" in b for b in bad) and any("layers must be" in b for b in bad)
    assert any("sdpa not for MLP" in b for b in Params(workload="geglu", variants=("sdpa",)).problems())
