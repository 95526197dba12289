"""FuseLens kernels: MLP workloads, FuseLens Triton kernels, the variant registry, the profiling runner and the bench.

Everything here needs torch (and Triton for the FuseLens kernels); the analyzer never imports this package, and this
package never imports the analyzer. Importing `kernels` itself is free: submodules load torch/triton on demand, so
`python -m kernels.profile --help` and argument validation work on a machine without them.

Four sub-packages; imports go lab -> runner -> models -> ops, never back (import-linter contract in pyproject.toml):
  ops/      the shipped Triton kernels, their wrappers and how they are launched
              activations   the epilogue activations (Triton) + their torch references, ACT ids
              gemm_common   grouped tile order, decode tiles, dot flags, input checks
              gating        act(gate) * up (memory-bound, 1-D)
              gemm_act      act(X W^T + b), pointer kernel (+ dispatch to hopper_gemm)
              dual_gemm     act(X Wg^T) * (X Wu^T), pointer kernel (+ dispatch to hopper_gemm)
              hopper_gemm   persistent TMA kernels (sm_90+): interleaved-weight gated GEMM, GEMM + bias + act
              ws_gemm       the Gluon warp-specialised dual GEMM (sm_90)
              mlp_backward  the training kernels
              launch        tuning per explicit key, cached launchers, op plans (FUSELENS_LAUNCH=jit|fast|raw)
              launch_triton the Triton-version-bound part: the generated C-launcher call, behind a version gate
              timing        CUDA-event medians (L2 flushed by a read, launches queued ahead)
              triton_util   interpreter switch, device checks, the autotuner's timing
  models/   what users run
              workloads     the MLPs: plain (Linear-GELU-Linear, bias), HF GEGLU (gate/up/down, no bias), SwiGLU
              layer, whole_model  HF decoder layers and whole causal LMs
              custom_ops    the kernels as torch.library ops fuselens::* (traces record their shapes); train_ops
              dispatch      which fused path runs at a shape (measured at the first call)
              fused_mlp     the fuselens / fuselens-gating forwards
              variants      the registry: eager, compile, compile-max-autotune, liger, fuselens-gating, fuselens
  runner/   the profiling runner (`python -m kernels.profile`): traces + manifest.json + JSON progress lines
  lab/      experiments
              forward_bench `python -m kernels.bench` -> bench/results/kernels_<gpu>.{md,json}
              train_bench   `python -m kernels.bench --train`
              sweep         `python -m kernels.lab.sweep`: every TMA config timed, activation accuracy on the GPU
              sweep_kernels kernels kept only for the sweep's / bench's before/after rows (2-dot, libdevice erf)
              check_configs `python -m kernels.lab.check_configs`: every autotune config against float64 on a GPU
              shapes, sweep_floor, gemm_reread, gpu_load, samples_index, device_job.sh (one GPU session's work)
`kernels/profile.py` and `kernels/bench.py` are the two documented entry points. See docs/KERNELS.md.
"""
