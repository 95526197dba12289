"""Write a dense-kernel Kineto trace: millions of short kernels in a small gzip (the per-kernel memory check).

    python bench/make_dense_trace.py --kernels 2000000 --out /tmp/dense_2m.json.gz
    python bench/make_dense_trace.py --kernels 2000000 --ops-every 4 --out /tmp/dense_ops.json.gz

Kernels cycle through 16 names on 4 streams, back to back (ts grows by the duration + 0.5 µs), each with its
own correlation id. Every --ops-every-th kernel (0 = none) is launched by an aten op (cpu_op with Input Dims /
Input type) through a cudaLaunchKernel; the others have no launch, like a trace whose runtime events were not
recorded. 2 M kernels alone ≈ 330 MB of JSON ≈ 17 MB of gzip (level 6). Files go where --out says (/tmp, never
the repo).
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

NAMES = (
    [
        f"void at::native::vectorized_elementwise_kernel<4, at::native::{op}_kernel_cuda<float>, at::detail::Array<char*, 3> >"
        for op in ("add", "mul", "sub", "div", "gelu", "silu", "relu", "tanh")
    ]
    + [f"triton_poi_fused_add_mul_{i}" for i in range(4)]
    + [
        "ampere_sgemm_128x64_tn",
        "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float> > >",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>",
    ]
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=2_000_000)
    ap.add_argument("--ops-every", type=int, default=0, help="every N-th kernel is launched by an aten op (0: none)")
    ap.add_argument("--out", type=Path, required=True, help=".json or .json.gz")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    opener = gzip.open if args.out.name.endswith(".gz") else open
    head = (
        '{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85045000000,'
        '"computeMajor":9,"computeMinor":0,"numSms":132}],"traceEvents":[\n'
        '{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"python"}}'
    )
    with opener(args.out, "wb") as f:
        f.write(head.encode())
        ts = 1000.0
        lines: list[str] = []
        for i in range(args.kernels):
            k = i % len(NAMES)
            dur = 1.0 + (i % 7) * 0.25
            corr = i + 1
            if args.ops_every and i % args.ops_every == 0:
                n = 64 * (1 + i % 5)
                lines.append(
                    f'{{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":{ts - 6:.3f},"dur":5,'
                    f'"args":{{"External id":{corr},"Input Dims":[[{n},{n}],[{n},{n}],[]],'
                    f'"Input type":["float","float","Scalar"]}}}}'
                )
                lines.append(
                    f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{ts - 4:.3f},'
                    f'"dur":3,"args":{{"External id":{corr},"correlation":{corr}}}}}'
                )
            lines.append(
                f'{{"ph":"X","cat":"kernel","name":"{NAMES[k]}","pid":0,"tid":{7 + i % 4},"ts":{ts:.3f},'
                f'"dur":{dur},"args":{{"External id":{corr},"device":0,"stream":{7 + i % 4},"correlation":{corr},'
                f'"grid":[{1 + i % 64},1,1],"block":[128,1,1],"registers per thread":32,"shared memory":0}}}}'
            )
            ts += dur + 0.5
            if len(lines) >= 65536:
                f.write(("," + ",".join(lines)).encode())
                lines.clear()
        if lines:
            f.write(("," + ",".join(lines)).encode())
        f.write(b"\n]}\n")
    size = args.out.stat().st_size
    print(
        f"wrote {args.out}: {size / 2**20:,.1f} MiB, {args.kernels:,} kernels, {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
