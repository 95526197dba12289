"""FuseLens kernels: MLP workloads, FuseLens Triton kernels, the variant registry, the profiling runner and the bench.

Everything here needs torch (and Triton for the FuseLens kernels); the analyzer never imports this package, and this
package never imports the analyzer. Importing `kernels` itself is free: submodules load torch/triton on demand, so
`python -m kernels.profile --help` and argument validation work on a machine without them.

Three sub-packages (imports go lab -> models -> ops, never back):
  ops/      the shipped Triton kernels and their wrappers
              activations   the epilogue activations (Triton) + their torch references, ACT ids
              gemm_common   grouped tile order, decode tiles, dot flags, input checks
              gating        act(gate) * up (memory-bound, 1-D)
              gemm_act      act(X W^T + b), pointer kernel (+ dispatch to hopper_gemm)
              dual_gemm     act(X Wg^T) * (X Wu^T), pointer kernel (+ dispatch to hopper_gemm)
              hopper_gemm   persistent TMA kernels (sm_90+): interleaved-weight gated GEMM, GEMM + bias + act
              triton_util   interpreter switch, device checks, the autotuner's timing
  models/   what users run
              workloads     the MLPs: plain (Linear-GELU-Linear, bias), HF GEGLU (gate/up/down, no bias), SwiGLU
              custom_ops    the kernels as torch.library ops fuselens::* (traces record their shapes)
              fused_mlp     the fuselens / fuselens-gating forwards
              variants      the registry: eager, compile, compile-max-autotune, liger, fuselens-gating, fuselens
  lab/      measuring tools
              profile       the runner (`python -m kernels.profile`): traces + manifest.json + JSON progress lines
              bench         `python -m kernels.bench` -> bench/results/kernels_<gpu>.{md,json}
              sweep         `python -m kernels.lab.sweep`: every TMA config timed, activation accuracy on the GPU
              sweep_kernels kernels kept only for the sweep's / bench's before/after rows (run 2's 2-dot, libdevice erf)
              check_configs `python -m kernels.lab.check_configs`: every autotune config against float64 on a GPU
              timing, ncu, envinfo, samples_index, device_job.sh (one GPU session's work in one command)
`kernels/profile.py` and `kernels/bench.py` are the two documented entry points. See docs/KERNELS.md.
"""
