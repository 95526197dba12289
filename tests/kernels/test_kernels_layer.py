"""Decoder-layer workloads (kernels.models.layer): transformers' own Gemma / Llama layers at tiny sizes on the CPU
(the full-size ones run on the GPU through the runner: `bash kernels/lab/device_job.sh record-layer`)."""

import gzip

import pytest

from tests.kernels._kernels_env import DEVICE, ON_GPU, rel_err, torch

pytest.importorskip("transformers", reason="decoder-layer workloads need transformers")

# isort: split
from kernels.models import layer  # noqa: E402
from kernels.models.variants import LAYER_VARIANTS, VariantUnavailable, build  # noqa: E402
from kernels.runner import options, record  # noqa: E402

TINY = {
    "gemma-layer": layer.LayerShape(hidden=64, intermediate=160, heads=4, kv_heads=1, head_dim=16),
    "llama-layer": layer.LayerShape(hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16),
}
CHECKED = [v for v in LAYER_VARIANTS if ON_GPU or not v.startswith("compile")]


def _tiny(workload, dtype=torch.float32, batch=2, seq=12):
    model = layer.build_layer(workload, dtype, DEVICE, batch=batch, seq=seq, shape=TINY[workload])
    x = torch.randn(batch, seq, TINY[workload].hidden, generator=torch.Generator().manual_seed(3)).to(DEVICE, dtype)
    return model, x


def test_runner_defaults_match_the_module():
    for name, shape in layer.DEFAULT_SHAPES.items():
        d = options.LAYER_DEFAULTS[name]
        assert (d["batch"], d["seq"]) == (layer.DEFAULT_BATCH, layer.DEFAULT_SEQ)
        assert (d["d_model"], d["hidden"], d["heads"], d["kv_heads"], d["head_dim"]) == (
            shape.hidden,
            shape.intermediate,
            shape.heads,
            shape.kv_heads,
            shape.head_dim,
        )
    assert options.LAYER_WORKLOADS == layer.LAYER_WORKLOADS


def test_gemma_layer_is_transformers_own():
    from transformers.models.gemma.modeling_gemma import GemmaDecoderLayer, GemmaMLP, GemmaRMSNorm

    model, _ = _tiny("gemma-layer")
    assert isinstance(model.layer, GemmaDecoderLayer) and isinstance(model.layer.mlp, GemmaMLP)
    assert isinstance(model.layer.input_layernorm, GemmaRMSNorm)
    attn = model.layer.self_attn
    assert attn.q_proj.weight.shape == (4 * 16, 64) and attn.k_proj.weight.shape == (1 * 16, 64)
    assert model.activation == "gelu_tanh" and model.attn_implementation == "sdpa"
    # the defaults are Gemma-2B-like: 8 query heads, 1 KV head, head_dim 256, hidden 2048, intermediate 16384
    assert layer.DEFAULT_SHAPES["gemma-layer"] == layer.LayerShape(2048, 16384, 8, 1, 256)


@pytest.mark.parametrize("workload", layer.LAYER_WORKLOADS)
def test_variants_compute_the_same_causal_layer(workload):
    model, x = _tiny(workload)
    with torch.no_grad():
        ref = build("sdpa", model)(x)
        for name in CHECKED:
            try:
                fn = build(name, model)
            except VariantUnavailable:
                continue
            y = fn(x)
            assert y.shape == x.shape
            assert rel_err(y.float(), ref.double()) < 1e-4, name
        # causal: changing the last token leaves every earlier position's output unchanged
        x2 = x.clone()
        x2[:, -1] += 1.0
        for name in ("eager", "sdpa"):
            fn = build(name, model)
            torch.testing.assert_close(fn(x2)[:, :-1], fn(x)[:, :-1])
    assert build("eager", model).attn_implementation == "eager"
    assert model.attn_implementation == "sdpa"  # each variant has its own copy and config


def test_mlp_variants_refuse_a_layer_and_layer_variants_refuse_an_mlp():
    from kernels.models.workloads import build_model

    model, _ = _tiny("gemma-layer")
    with pytest.raises(VariantUnavailable, match="MLP variant"):
        build("liger", model)
    with pytest.raises(VariantUnavailable, match="decoder-layer"):
        build("sdpa", build_model("geglu", 8, 16, torch.float32, "cpu"))
    with pytest.raises(VariantUnavailable, match="forward-only"):
        build("compile-fuselens", model, train=True)


def test_training_step_runs():
    model, x = _tiny("llama-layer")
    for name in ("eager", "sdpa"):
        fn = build(name, model, train=True)
        fn.train()
        fn(x).float().square().mean().backward()
        assert all(p.grad is not None for p in fn.layer.parameters())


def test_attention_backend_read_from_the_trace(tmp_path):
    """The runner records which SDPA backend ran from the trace it wrote (CPU here: the flash_for_cpu op)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    model, x = _tiny("gemma-layer")
    facts = {}
    for name in ("eager", "sdpa"):
        fn = build(name, model)
        path = tmp_path / f"{name}.json.gz"
        with torch.no_grad(), torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            fn(x)
        prof.export_chrome_trace(str(tmp_path / "t.json"))
        path.write_bytes(gzip.compress((tmp_path / "t.json").read_bytes()))
        facts[name] = record.attention_facts(path)
    assert facts["eager"]["attention_backend"] == "none"
    assert facts["sdpa"]["attention_backend"] in ("flash_for_cpu", "flash", "efficient", "cudnn", "math")


def test_layer_flops():
    s = layer.DEFAULT_SHAPES["gemma-layer"]
    f = layer.layer_flops("gemma-layer", 1, 2048, s)
    attn = 4 * 8 * 2048 * 2048 * 256 // 2
    assert f == 2 * 2048 * 2048 * (2 * 8 * 256 + 2 * 256) + attn + 3 * 2 * 2048 * 2048 * 16384
