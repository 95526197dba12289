"""FuseLens kernels: MLP workloads, FuseLens Triton kernels, the variant registry, the profiling runner and the bench.

Everything here needs torch (and Triton for the FuseLens kernels); the analyzer never imports this package, and this
package never imports the analyzer. Importing `kernels` itself is free: submodules load torch/triton on demand, so
`python -m kernels.profile --help` and argument validation work on a machine without them.

Modules (one job each):
  workloads    the MLPs: plain (Linear-GELU-Linear, bias), HF GEGLU (gate/up/down, no bias), SwiGLU
  gating       Triton kernel: gelu_tanh(gate) * up and silu(gate) * up
  gemm_act     Triton kernel: act(X @ W^T + b), the plain MLP's first layer with GELU in the epilogue
  dual_gemm    Triton kernel: act(X @ Wg^T) * (X @ Wu^T) in one GEMM sharing each X tile, writes only h
  hopper_gemm  persistent TMA kernels (sm_90+) behind gemm_act and dual_gemm
  fused_mlp    the fuselens / fuselens-gating forwards
  variants     the registry: eager, compile, compile-max-autotune, liger, fuselens-gating, fuselens
  envinfo      GPU, driver, torch, triton, git commit facts for manifests and bench results
  timing       CUDA-event median timing with L2 flush
  ncu          Nsight Compute DRAM-bytes measurement and CSV parsing
  profile      `python -m kernels.profile`: traces + manifest.json + JSON progress lines
  bench        `python -m kernels.bench`: side-by-side timings -> bench/results/kernels_<gpu>.{md,json}
  check_configs  `python -m kernels.check_configs`: every autotune config checked against float64 on a GPU
  samples_index  writes sample_traces/manifest.json
See docs/KERNELS.md.
"""
