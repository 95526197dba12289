"""analyzer.opinfo.dataflow / names / gemm on real trace events: op sets from Inductor / Liger / FuseLens / ATen names, GEMM problems and
tensors from recorded 'Input Dims' / 'Input type'."""

from __future__ import annotations

from analyzer.opinfo.dataflow import tensor_io
from analyzer.opinfo.gemm import gemm_problem
from analyzer.opinfo.names import canonical_ops, inductor_ops, text_ops
from analyzer.opinfo.tensors import Tensor
from tests.conftest import SAMPLE_TRACES, TRACES, reference_events, require_data


def _cpu_ops(path):
    _, events = reference_events(path)
    return [e for e in events if e.get("cat") == "cpu_op"]


def _kernel_names(path) -> set[str]:
    _, events = reference_events(path)
    return {e["name"] for e in events if e.get("cat") == "kernel"}


def test_inductor_names_in_a_real_compiled_block():
    names = _kernel_names(TRACES["mi300_triton"])
    inductor = sorted(n for n in names if n.startswith("triton_"))
    assert {n: sorted(inductor_ops(n)) for n in inductor} == {
        "triton_poi_fused__unsafe_view_add_3": ["add"],
        "triton_poi_fused__unsafe_view_mul_silu_2": ["mul", "silu"],
        "triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1": ["add", "mean", "mul", "pow", "rsqrt"],
        "triton_red_fused_add_mean_mul_pow_rsqrt_0": ["add", "mean", "mul", "pow", "rsqrt"],
    }
    assert all(not inductor_ops(n) for n in names - set(inductor))  # Tensile / attention names are not Inductor's


def test_inductor_multiword_ops_stay_whole():
    # names Inductor writes for backward and template kernels: 'gelu_backward' is one op, not gelu + backward
    assert inductor_ops("triton_poi_fused__unsafe_view_gelu_gelu_backward_mul_view_0") == {
        "gelu",
        "gelu_backward",
        "mul",
    }
    assert inductor_ops("triton_tem_fused_addmm_gelu_0") == {"mm", "add", "gelu"}
    assert inductor_ops("triton_per_fused_native_layer_norm_native_layer_norm_backward_2") == {
        "layer_norm",
        "layer_norm_backward",
    }
    assert inductor_ops("triton_poi_fused_mul__to_copy_3") == {"mul", "copy"}


def test_sample_trace_names_decode():
    """The kernels and launching ops recorded on the GPU for the HF case."""
    liger = SAMPLE_TRACES / "hf_geglu_bf16" / "liger.json.gz"
    require_data(liger)
    ops = {e["name"] for e in _cpu_ops(liger)}
    assert "LigerGELUMulFunction" in ops
    assert text_ops("LigerGELUMulFunction") == {"gelu", "mul"}
    assert "_geglu_tanh_forward_kernel" in _kernel_names(liger)
    assert {"gelu", "mul"} <= text_ops("_geglu_tanh_forward_kernel")
    assert "mm" in text_ops("_dual_gemm_kernel")
    assert text_ops("LigerGELUMulFunctionBackward") == {"gelu", "mul", "gelu_backward"}
    assert text_ops("_swiglu_forward_kernel") == {"silu", "mul"}
    assert text_ops("forward_kernel") == frozenset()  # words that name no op give nothing


def test_canonical_aten_ops():
    assert canonical_ops("aten::mul_") == {"mul"}
    assert canonical_ops("aten::addmm") == {"mm", "add"}
    assert canonical_ops("aten::view") == frozenset()  # views launch no kernel
    assert canonical_ops("aten::copy_") == canonical_ops("aten::clone") == {"copy"}
    assert canonical_ops("aten::native_layer_norm") == {"layer_norm"}


def test_gemm_problems_from_real_ops():
    """Qwen on H100 (aten::linear -> aten::mm / addmm) and the compiled MI300 block (aten::mm with out=)."""
    seen = {}
    for path in (TRACES["h100_qwen"], TRACES["mi300_triton"], TRACES["h100_bert"]):
        for e in _cpu_ops(path):
            a = e.get("args", {})
            g = gemm_problem(e["name"], a.get("Input Dims"), a.get("Input type"))
            if g is not None:
                seen.setdefault((path.name, e["name"]), set()).add(g.label())
    assert "M=8944 N=2816 K=1024 bf16" in seen[("h100_qwen1.5-0.5b_eager.json.gz", "aten::mm")]
    assert "M=8944 N=1024 K=1024 bf16" in seen[("h100_qwen1.5-0.5b_eager.json.gz", "aten::addmm")]
    # aten::linear sees [16, 559, 1024] x [2816, 1024]^T: the same problem as the mm it calls
    assert "M=8944 N=2816 K=1024 bf16" in seen[("h100_qwen1.5-0.5b_eager.json.gz", "aten::linear")]
    assert seen[("mi300_compiled_transformer_block_triton.json.gz", "aten::mm")] == {
        "M=32768 N=2048 K=2048 bf16",
        "M=32768 N=8192 K=2048 bf16",
        "M=32768 N=2048 K=8192 bf16",
    }
    assert "M=141 N=30522 K=512 bf16" in seen[("h100_bert-small_eager.json.gz", "aten::addmm")]
    # a batched matmul: batch kept apart from M
    bmm = seen[("h100_qwen1.5-0.5b_eager.json.gz", "aten::bmm")]
    assert bmm == {"M=32 N=559 K=1 fp32"}


def test_tensors_of_real_ops():
    by_name = {}
    for e in _cpu_ops(TRACES["h100_qwen"]) + _cpu_ops(TRACES["h100_bert"]):
        a = e.get("args", {})
        by_name.setdefault(e["name"], []).append((a.get("Input Dims"), a.get("Input type")))
    dims, types = next((d, t) for d, t in by_name["aten::gelu"] if d and d[0] == [1, 141, 2048])
    io = tensor_io("aten::gelu", dims, types)
    assert io.inputs == (Tensor((1, 141, 2048), "bf16"),) and io.output == Tensor((1, 141, 2048), "bf16")
    assert io.output.nbytes == 141 * 2048 * 2
    # broadcasting mul (RMSNorm weight): [1024] * [16, 559, 1024] -> [16, 559, 1024]
    dims, types = next((d, t) for d, t in by_name["aten::mul"] if d == [[1024], [16, 559, 1024]])
    assert tensor_io("aten::mul", dims, types).output.shape == (16, 559, 1024)
    # copy_(dst, src): writes dst in its own dtype (the fp32 -> bf16 cast of Qwen's RMSNorm)
    for d, t in by_name["aten::copy_"]:
        io = tensor_io("aten::copy_", d, t)
        assert io.output.dtype == {"float": "fp32", "c10::BFloat16": "bf16", "long int": "int64"}[t[0]]
        assert len(io.inputs) == 1
    # addmm: bias, A, B in; [M, N] out
    dims, types = by_name["aten::addmm"][0]
    io = tensor_io("aten::addmm", dims, types)
    assert len(io.inputs) == 3 and len(io.output.shape) == 2
    # an op we cannot follow says so: output unknown, never guessed
    dims, types = by_name["aten::mean"][0]
    assert tensor_io("aten::mean", dims, types).output is None


def test_backward_ops_read_saved_activations():
    """gelu_backward(grad, self): only grad can come from a kernel of the backward region."""
    dims = [[64, 128, 3072], [64, 128, 3072], []]
    types = ["c10::BFloat16", "c10::BFloat16", "Scalar"]
    io = tensor_io("aten::gelu_backward", dims, types)
    assert len(io.inputs) == 2 and io.linkable == (Tensor((64, 128, 3072), "bf16"),)
    assert io.output == Tensor((64, 128, 3072), "bf16")
