"""This GPU's measured roofs: copy bandwidth and the bf16 matmul ceiling. The runner writes them into the manifest
with --measure-roofs (the dashboard's Roofline draws them beside the datasheet roofs); `python -m kernels.bench`
puts them above its tables, as the floors its "x floor" columns divide by."""

from __future__ import annotations

from kernels.ops.timing import median_us

HF = {"tokens": 8192, "d_model": 768, "hidden": 3072}  # the HF GEGLU MLP (BERT-base sizes at 64 x 128 tokens)


def measure_ceilings(n_iter: int) -> dict:
    """Copy bandwidth (1 GiB, read + write bytes), the fastest of three 8192^3 bf16 matmul passes, and cuBLAS at the
    HF MLP's two GEMM shapes; every timing through kernels.ops.timing.median_us with L2 flushed."""
    import torch
    import torch.nn.functional as F

    n = 2**29  # 1 GiB of bf16
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = median_us(lambda: dst.copy_(src), n_iter=max(50, n_iter // 4), flush_l2=True)
    copy_gbps = 2 * src.numel() * 2 / (t["median_us"] * 1e-6) / 1e9
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    # The ceiling is the FASTEST of three passes: a ceiling is what the card can do, and a slow pass would lower the
    # floor and flatter every "x floor" ratio. On the H100 a first pass on a fresh machine measured 753 TFLOP/s where
    # passes on a GPU busy for minutes measured 794 (bench/results/kernels_h100_80gb_hbm3.md).
    matmul_passes = [
        median_us(lambda: torch.matmul(a, b), n_iter=max(50, n_iter // 4), warmup=50 if i == 0 else 10)["median_us"]
        for i in range(3)
    ]
    matmul_us = min(matmul_passes)
    tflops = 2 * 8192**3 / (matmul_us * 1e-6) / 1e12
    shapes = {}
    x = torch.randn(HF["tokens"], HF["d_model"], device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(HF["hidden"], HF["d_model"], device="cuda", dtype=torch.bfloat16)
    h = torch.randn(HF["tokens"], HF["hidden"], device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(HF["d_model"], HF["hidden"], device="cuda", dtype=torch.bfloat16)
    for name, fn in (
        ("up 8192x768 @ 768x3072", lambda: F.linear(x, w1)),
        ("down 8192x3072 @ 3072x768", lambda: F.linear(h, w2)),
    ):
        tt = median_us(fn, n_iter=n_iter, flush_l2=True)
        shapes[name] = {"us": tt["median_us"], "tflops": 2 * 8192 * 768 * 3072 / (tt["median_us"] * 1e-6) / 1e12}
    return {
        "copy_gbps": copy_gbps,
        "copy_us_1gib": t["median_us"],
        "matmul_tflops": tflops,
        "matmul_us_8192": matmul_us,
        "matmul_us_8192_passes": matmul_passes,
        "cublas_mlp_shapes": shapes,
    }


def measured_roofs() -> dict:
    """The manifest's "ceilings": 1 GiB dst.copy_(src) bandwidth (read + write) and the fastest of three 8192^3 bf16
    matmul passes (measure_ceilings), or the error that stopped them."""
    try:
        c = measure_ceilings(n_iter=40)
        return {
            "copy_gbps": round(float(c["copy_gbps"]), 1),
            "matmul_tflops": round(float(c["matmul_tflops"]), 1),
            "matmul_dtype": "bf16",
            "method": "copy: median of dst.copy_(src) on 1 GiB bf16, L2 flushed, read + write bytes; matmul: fastest "
            "of three medians of an 8192x8192x8192 bf16 torch.matmul (kernels.runner.roofs.measure_ceilings)",
        }
    except Exception as exc:  # a roof is a nice-to-have: never fail the recording for it
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
