#!/usr/bin/env bash
# One GPU session's work in one command (the device tool starts a bare machine per call; see docs/KERNELS.md).
#   bash kernels/lab/device_job.sh STEP...   STEP: facts | sweep | sweep-llm | sweep-floor | ncu-floor | configs | record | record-hf |
#                                          record-fuselens | record-roofs | record-layer | record-layer-quick | record-model | record-model-big | record-model-32 | record-model-h100 | record-llama-layer | record-templates |
#                                          record-skew | record-swiglu | check | gpu-tests | host | two-models | bench | bench-quick | bench-mlp |
#                                          bench-gating | bench-llm | bench-llm-dtypes | bench-rows | bench-llm-floor | ncu-warm | ncu-warm-hf |
#                                           ncu-warm-plain | gemm-reread | train-tests | bench-train | record-train | bench-hf-plain |
#                                           bench-users | train-kernels | ws-tests | ncu-dh | dh-configs | bench-train-groups
# Results go under $OUT (tarred into $OUT/results.tgz at the end, so a step that times out still returns the rest).
# liger-kernel travels as a wheel in wheels/ (no network on the GPU box); without it the liger variant is skipped.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fuselens_out}
R=$OUT/r
mkdir -p "$R/sample_traces" "$R/bench" "$R/logs"
if ls wheels/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-compile --target /tmp/pylib wheels/liger_kernel-*.whl >"$R/logs/pip.log" 2>&1 \
    && export PYTHONPATH=/tmp/pylib:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
# The device copy's .git can be older than its working tree: pass FUSELENS_GIT_COMMIT=$(git rev-parse HEAD) from the
# calling machine so manifests and bench files name the code they ran (kernels/runner/envinfo.py marks a dirty tree).

facts() {
  { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c "import torch, triton; p=torch.cuda.get_device_properties(0); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, p.name, p.multi_processor_count, 'SMs L2', getattr(p,'L2_cache_size',None))"
    python3 -c "import liger_kernel.ops.geglu, liger_kernel.ops.swiglu; print('liger import ok')" 2>&1 | tail -1
    (command -v ncu && ncu --version) 2>&1 | tail -2; } 2>&1 | tee "$R/logs/facts.txt"
}

DEADLINE_S=${DEADLINE_S:-580}  # the device tool kills the whole command at its limit; leave time for the tar
left() { local l=$((DEADLINE_S - SECONDS - 15)); [ "$1" -lt "$l" ] && l=$1; echo $((l > 5 ? l : 5)); }

rec() {  # rec CASE LIMIT_S ARGS...
  local case=$1 lim; lim=$(left "$2"); shift 2
  echo "== record $case"
  timeout "$lim" python3 -m kernels.profile --out "$R/sample_traces/$case" "$@" >"$R/logs/rec_$case.jsonl" 2>"$R/logs/rec_$case.err"
  echo "rc=$? $(tail -1 "$R/logs/rec_$case.jsonl")"; tail -3 "$R/logs/rec_$case.err"
}

record() {
  local HF=(--batch 64 --seq 128 --d-model 768 --hidden 3072)
  rec hf_geglu_bf16 240 --workload geglu --variants eager,compile,liger,fuselens-gating,fuselens "${HF[@]}" --dtype bf16 --measure-bytes
  rec plain_8192tok_bf16 60 --workload plain --variants eager,compile,fuselens "${HF[@]}" --dtype bf16
  rec plain_1tok_bf16 60 --workload plain --variants eager,compile,fuselens --batch 1 --seq 1 --d-model 768 --hidden 3072 --dtype bf16
  rec swiglu_fp16 60 --workload swiglu --variants eager,compile,liger,fuselens "${HF[@]}" --dtype fp16
  rec geglu_train_bf16 90 --workload geglu --variants eager,compile,liger "${HF[@]}" --dtype bf16 --train
}

record_swiglu() {  # the SwiGLU sample set alone (~1 min on an H100)
  rec swiglu_fp16 90 --workload swiglu --variants eager,compile,liger,fuselens --batch 64 --seq 128 --d-model 768 \
    --hidden 3072 --dtype fp16
  probe_report swiglu_fp16
}

record_hf() {
  rec hf_geglu_bf16 240 --workload geglu --variants eager,compile,liger,fuselens-gating,fuselens --batch 64 --seq 128 \
    --d-model 768 --hidden 3072 --dtype bf16 --measure-bytes
}

record_skew() {  # ~2-3 min: eager + compile recorded normally, then again while another process runs big matmuls
  local ARGS=(--workload geglu --variants eager,compile --batch 64 --seq 128 --d-model 768 --hidden 3072 --dtype bf16)
  rec skew_normal 110 "${ARGS[@]}"
  timeout 200 python3 -m kernels.lab.gpu_load --seconds 150 >"$R/logs/gpu_load.txt" 2>&1 &
  local load=$!
  sleep 8  # the load's CUDA context and cuBLAS are up before the second recording starts
  rec skew_loaded 110 "${ARGS[@]}"
  kill "$load" 2>/dev/null; wait "$load" 2>/dev/null
  cat "$R/logs/gpu_load.txt"
  probe_report skew_normal; probe_report skew_loaded
  python3 - "$R/sample_traces" <<'PY'
import json, sys, pathlib
for case in ("skew_normal", "skew_loaded"):
    m = pathlib.Path(sys.argv[1], case, "manifest.json")
    if m.is_file():
        for v in json.loads(m.read_text())["variants"]:
            c = (v.get("conditions") or {}).get("profiled") or {}
            print(case, v["name"], v["status"], v.get("median_us"), "sm", (c.get("sm_clock_mhz") or {}).get("median"),
                  "W", (c.get("power_w") or {}).get("median"), "C", (c.get("temperature_c") or {}).get("median"))
PY
}

# Measured roofs (issue 13): the HF GEGLU eager/compile pair with the runner's --measure-roofs (copy bandwidth and
# bf16 matmul ceiling in the manifest's "ceilings"), for the dashboard's Roofline. ~1.5 min on an H100.
record_roofs() {
  local HF=(--batch 64 --seq 128 --d-model 768 --hidden 3072)
  rec hf_geglu_roofs_bf16 150 --workload geglu --variants eager,compile "${HF[@]}" --dtype bf16 --measure-roofs
  python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('ceilings'))" \
    "$R/sample_traces/hf_geglu_roofs_bf16/manifest.json" 2>&1 | tail -1
}

record_fuselens() {
  local HF=(--batch 64 --seq 128 --d-model 768 --hidden 3072)
  rec hf_geglu_bf16_fuselens 120 --workload geglu --variants fuselens-gating,fuselens "${HF[@]}" --dtype bf16 --measure-bytes
}

# A whole decoder layer (issue 14): transformers' GemmaDecoderLayer, Gemma-2B-like (hidden 2048, intermediate 16384,
# 8 q heads, 1 KV head, head_dim 256), batch 1, seq 2048, bf16. ncu bytes (flushed + warm) for eager and sdpa only:
# each compiled variant would compile again inside ncu's child. ~5 min on an H100 (two cold compiles, four ncu runs).
record_layer() {
  python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tail -1
  rec gemma_layer_bf16 "${LAYER_LIMIT_S:-480}" --workload gemma-layer --variants eager,sdpa,compile,compile-fuselens \
    --dtype bf16 --measure-bytes eager,sdpa
  python3 -c "import json,sys; m=json.load(open(sys.argv[1])); [print(v['name'], v['status'], v.get('median_us'), v.get('attention_backend'), v.get('dram_bytes_read'), v.get('message','')[:120]) for v in m['variants']]" \
    "$R/sample_traces/gemma_layer_bf16/manifest.json" 2>&1 | tail -6
}

# Inductor GEMM templates with shapes (issue 12 bugs 1 and 5): every GEMM a `triton_tem_fused_…` kernel, no CUDA
# graphs, forward and training; ~3 min on an H100 (max-autotune benchmarks each GEMM's template configs).
record_templates() {
  local HF=(--batch 64 --seq 128 --d-model 768 --hidden 3072)
  rec hf_geglu_templates_bf16 "${TEMPLATES_LIMIT_S:-200}" --workload geglu --variants eager,compile,compile-triton-gemm "${HF[@]}" --dtype bf16
  rec geglu_train_templates_bf16 "${TEMPLATES_LIMIT_S:-200}" --workload geglu --variants eager,compile-triton-gemm "${HF[@]}" --dtype bf16 --train
}

record_layer_quick() {  # the Gemma layer without ncu (~3 min: two cold compiles): traces + the control probe only
  rec gemma_layer_probe_bf16 "${LAYER_LIMIT_S:-300}" --workload gemma-layer --variants eager,sdpa,compile,compile-fuselens \
    --dtype bf16
  probe_report gemma_layer_probe_bf16
}

record_llama_layer() {  # Llama-style (SwiGLU, 16 q heads, 4 KV heads, head_dim 128): ~2 min, no ncu
  rec llama_layer_bf16 "${LAYER_LIMIT_S:-240}" --workload llama-layer --variants eager,sdpa,compile,compile-fuselens --dtype bf16
}

# Flushed + in-sequence ("warm") Nsight Compute DRAM bytes per kernel (kernels/runner/ncu.py) with the traces they belong to,
# for the DRAM model (analyzer/dram.py). Case folders get an "h200_" prefix on an H200 so both cards' sets can sit side
# by side in sample_traces/. plain h=8192: an 8192x8192 bf16 intermediate (134 MB) that no L2 holds.
ncu_report() {  # one line per variant: flushed and warm step bytes, replay passes, L2 size (or the error)
  python3 - "$R/sample_traces/$1" <<'PY'
import json, sys, pathlib
d = pathlib.Path(sys.argv[1])
for v in json.loads((d / "manifest.json").read_text())["variants"]:
    w = json.loads((d / v["ncu"]).read_text()).get("warm", {}) if v.get("ncu") else {}
    print(f"  {v['name']:16} flushed r/w {v.get('dram_bytes_read')} {v.get('dram_bytes_write')}  warm r/w "
          f"{v.get('warm_dram_bytes_read')} {v.get('warm_dram_bytes_write')}  passes {w.get('max_replay_passes')} "
          f"L2 {w.get('l2_cache_bytes')} {v.get('ncu_error', '')}{v.get('ncu_warm_error', '')}")
PY
}

probe_report() {  # one line per variant: the control probe's median kernel times (kernels/runner/control.py)
  python3 - "$R/sample_traces/$1" <<'PY'
import json, statistics, sys, pathlib
d = pathlib.Path(sys.argv[1])
for v in json.loads((d / "manifest.json").read_text())["variants"]:
    p = v.get("control_probe") or {}
    meds = [round(statistics.median(col), 2) for col in zip(*p["us"])] if p.get("us") else p.get("error")
    print(f"  probe {d.name} {v['name']:16} turns {len(p.get('us') or [])} median us (settle, gemm, copy) {meds}")
PY
}

ncu_warm_hf() {
  local HF=(--batch 64 --seq 128 --d-model 768 --hidden 3072) P=""
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && P=h200_
  rec "${P}hf_geglu_bf16" 330 --workload geglu --variants eager,compile,liger,fuselens-gating,fuselens "${HF[@]}" \
    --dtype bf16 --measure-bytes
  ncu_report "${P}hf_geglu_bf16"; probe_report "${P}hf_geglu_bf16"
}
ncu_warm_plain() {
  local HF=(--batch 64 --seq 128 --d-model 768 --hidden 3072) P=""
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && P=h200_
  rec "${P}plain_8192tok_bf16" 170 --workload plain --variants eager,compile,fuselens "${HF[@]}" --dtype bf16 --measure-bytes
  rec "${P}plain_8192tok_h8192_bf16" 170 --workload plain --variants eager,compile,fuselens --batch 64 --seq 128 \
    --d-model 768 --hidden 8192 --dtype bf16 --measure-bytes
  ncu_report "${P}plain_8192tok_bf16"; ncu_report "${P}plain_8192tok_h8192_bf16"
  probe_report "${P}plain_8192tok_bf16"; probe_report "${P}plain_8192tok_h8192_bf16"
}

check() {
  echo "== full-size kernel checks on the GPU"
  FUSELENS_FULL_SIZE=1 timeout "$(left "${CHECK_LIMIT_S:-300}")" python3 -m pytest -v -rfE -n 8 -p no:cacheprovider \
    tests/kernels/test_kernels_gating.py tests/kernels/test_kernels_gemm.py tests/kernels/test_kernels_variants.py tests/kernels/test_kernels_profile.py \
    >"$R/logs/check.txt" 2>&1
  echo "check rc=$?: $(grep -c PASSED "$R/logs/check.txt") passed, $(grep -c SKIPPED "$R/logs/check.txt") skipped"
  grep -E "^FAILED|^ERROR|AssertionError|Error:" "$R/logs/check.txt" | sort | uniq | head -20
}

gpu_tests() {  # launcher fast path vs first call, two models in one process, dispatch + trace label, graph variant
  echo "== GPU tests: tests/kernels/test_kernels_gpu.py"
  timeout "$(left "${GPU_TESTS_LIMIT_S:-240}")" python3 -m pytest -v -s -rfE -p no:cacheprovider tests/kernels/test_kernels_gpu.py \
    >"$R/logs/gpu_tests.txt" 2>&1
  echo "gpu-tests rc=$?: $(grep -c PASSED "$R/logs/gpu_tests.txt") passed"
  grep -E "^FAILED|^ERROR|AssertionError|^\{\('" "$R/logs/gpu_tests.txt" | head -20
}

host() {  # host time per op call, fast path vs JITFunction.run
  echo "== host overhead"
  timeout "$(left 180)" python3 scripts/host_overhead.py --n 1000 --top 15 --json "$R/bench/host_overhead.json" \
    >"$R/logs/host_overhead.txt" 2>&1
  echo "host rc=$?"; sed -n "1,30p" "$R/logs/host_overhead.txt"; grep -A3 "^verdicts" "$R/logs/host_overhead.txt"
}

two_models() {  # the issue-16 scenario, this code and the code before the fix (83c02fe's kernels/), one process each
  echo "== two models in one process"
  timeout "$(left 150)" python3 scripts/two_models.py --order geglu,swiglu --json "$R/bench/two_models_new.json" \
    >"$R/logs/two_models_new.txt" 2>&1
  echo "two-models (this code) rc=$?"; grep -E "^[12] " "$R/logs/two_models_new.txt"
  rm -rf /tmp/fuselens_old && mkdir -p /tmp/fuselens_old
  if git archive 83c02fe kernels | tar -x -C /tmp/fuselens_old 2>"$R/logs/two_models_old.txt"; then
    timeout "$(left 150)" python3 scripts/two_models.py --order geglu,swiglu --root /tmp/fuselens_old \
      --json "$R/bench/two_models_old.json" >>"$R/logs/two_models_old.txt" 2>&1
    echo "two-models (83c02fe) rc=$?"; grep -E "^[12] " "$R/logs/two_models_old.txt"
  else
    echo "two-models (83c02fe): git archive failed (no history on this machine?)"; tail -2 "$R/logs/two_models_old.txt"
  fi
}

sweep_llm() {
  echo "== per-config sweep at the LLM shapes"
  timeout "$(left 240)" python3 -m kernels.lab.sweep --cases llm --out "$R/bench/sweep_llm.md" >"$R/logs/sweep_llm.txt" 2>&1
  echo "sweep-llm rc=$?"; grep -E "^\||^###" "$R/logs/sweep_llm.txt"; grep -E "Error|error" "$R/logs/sweep_llm.txt" | head -5
}

sweep_floor() {  # ~3-4 min on an H100: down_proj + gate/up candidates and whole forwards at the LLM shapes, SM clock
  echo "== compute-floor sweep at the LLM shapes"
  timeout "$(left "${SWEEP_FLOOR_LIMIT_S:-330}")" python3 -m kernels.lab.sweep --cases floor --out "$R/bench/sweep_floor.md" \
    >"$R/logs/sweep_floor.txt" 2>&1
  echo "sweep-floor rc=$?"
  if [ -f "$R/bench/sweep_floor.md" ]; then cat "$R/bench/sweep_floor.md"; else grep -E "^\||^#|^Ceil" "$R/logs/sweep_floor.txt"; fi
  grep -E "Error|error" "$R/logs/sweep_floor.txt" | head -5
}

ncu_floor() {  # ~2 min on an H100: Nsight Compute sections of single dual GEMM launches (kernels/lab/sweep_floor.py --ncu)
  local NCU; NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for c in tinyllama-fp16 llama2-bf16; do
    echo "== ncu $c"
    timeout "$(left 100)" "$NCU" --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
      python3 -m kernels.lab.sweep_floor --ncu "$c" >"$R/logs/ncu_floor_$c.txt" 2>&1
    echo "rc=$?"; grep -E "^== |tuned config|Duration|Throughput|Pipe|Busy|Stall|Issued|Warp Cycles|Registers|Achieved|L2 Hit|Block Limit" \
      "$R/logs/ncu_floor_$c.txt" | head -80
  done
}

sweep() {
  echo "== per-config sweep"
  timeout "$(left 240)" python3 -m kernels.lab.sweep --out "$R/bench/sweep.md" >"$R/logs/sweep.txt" 2>&1
  echo "sweep rc=$?"; grep -E "^\|" "$R/logs/sweep.txt"; grep -E "Error|error" "$R/logs/sweep.txt" | head -5
}

configs() {
  echo "== every autotune config against float64"
  timeout "$(left 240)" python3 -m kernels.lab.check_configs >"$R/logs/check_configs.txt" 2>&1
  echo "check_configs rc=$?: $(tail -1 "$R/logs/check_configs.txt")"
  grep -E "^FAIL|^ERRO|^skip" "$R/logs/check_configs.txt" | head -20
}

# GEMM operand re-reads at held-out shapes (issue 15; kernels/lab/gemm_reread.py): a Kineto trace with shapes and
# flushed ncu DRAM bytes per GEMM kernel (cuBLAS linear, linear+bias, FuseLens GEMM+bias+GELU). ~2-3 min on an H100.
gemm_reread() {
  local P=""; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && P="h200_"
  echo "== gemm-reread"
  timeout "$(left 300)" python3 -m kernels.lab.gemm_reread --out "$R/gemm_reread/${P}bf16" 2>"$R/logs/gemm_reread.err" | tee "$R/logs/gemm_reread.txt"
  tail -3 "$R/logs/gemm_reread.err"
}

train_tests() {  # the training ops' gradients against float64 on the GPU (fused dH kernel), compile, the variant
  echo "== GPU tests: tests/kernels/test_kernels_train.py"
  timeout "$(left "${TRAIN_TESTS_LIMIT_S:-240}")" python3 -m pytest -q -rfE -p no:cacheprovider tests/kernels/test_kernels_train.py \
    >"$R/logs/train_tests.txt" 2>&1
  echo "train-tests rc=$?: $(tail -1 "$R/logs/train_tests.txt")"
  grep -E "^FAILED|^ERROR|AssertionError" "$R/logs/train_tests.txt" | head -20
}

bench_train() {  # forward + backward per variant -> kernels_train_<gpu>.md (TRAIN_ROWS: row ids; TRAIN_BUDGET_S)
  local lim; lim=$(left 400)
  echo "== bench --train (limit ${lim}s)"
  timeout "$lim" python3 -m kernels.bench --train --out-dir "$R/bench" --budget-s "${TRAIN_BUDGET_S:-300}" \
    ${TRAIN_ROWS:+--rows "$TRAIN_ROWS"} 2>>"$R/logs/bench_train.err" | tee -a "$R/logs/bench_train.md" | grep -E "^\|" | head -30
  grep -E "Error|budget" "$R/logs/bench_train.err" | head -8
}

ws_tests() {  # the warp-specialised Gluon kernels against float64 (forward dual GEMM, training dH and save), launch tests
  echo "== GPU tests: warp-specialised kernels + launch"
  # one process, verbose: two xdist workers printed 100% and then ran into the step's limit without a summary line
  # (H100, 52 tests passed), so the log now names every test as it ends
  timeout "$(left "${WS_TESTS_LIMIT_S:-300}")" python3 -m pytest -v -n 0 -rfE -p no:cacheprovider -k "warp_specialised or gluon or first_call_measurement" \
    tests/kernels/test_kernels_gpu.py tests/kernels/test_kernels_train.py >"$R/logs/ws_tests.txt" 2>&1
  echo "ws-tests rc=$?: $(grep -c PASSED "$R/logs/ws_tests.txt") passed; $(tail -1 "$R/logs/ws_tests.txt")"
  grep -E "^FAILED|^ERROR|AssertionError|Error" "$R/logs/ws_tests.txt" | head -20
  timeout "$(left 120)" python3 -m pytest -q -rfE -p no:cacheprovider tests/kernels/test_kernels_launch.py \
    tests/kernels/test_kernels_cuda_errors.py >"$R/logs/launch_tests.txt" 2>&1
  echo "launch-tests rc=$?: $(tail -1 "$R/logs/launch_tests.txt")"
  grep -E "^FAILED|^ERROR" "$R/logs/launch_tests.txt" | head -10
}

dh_configs() {  # every Gluon dH config at each training row, beside the Triton kernel (~1-2 min; first: a config that
  # hangs shows here, under its own limit, before the bench's first-call measurement would meet it)
  echo "== train_kernels --dh-configs"
  timeout "$(left "${DH_CONFIGS_LIMIT_S:-170}")" python3 -m kernels.lab.train_kernels --dh-configs \
    ${DH_ROWS:+--rows "$DH_ROWS"} --out "$R/bench/train_dh_configs.json" >"$R/logs/dh_configs.log" 2>&1
  echo "dh-configs rc=$?: $(grep -c '"row"' "$R/logs/dh_configs.log") rows"
  tail -2 "$R/logs/dh_configs.log" | cut -c1-600
}

bench_train_groups() {  # bench --train in one process per group of rows (a crash loses one group, not the run)
  local i=0 g lim
  for g in ${TRAIN_GROUPS:-hf-geglu-bf16,hf-geglu-fp16,tinyllama-fp16 llama2-7b-bf16,llama2-7b-fp16,qwen05b-bf16 \
    qwen05b-fp16,llama3-8b-bf16,bert-large-bf16}; do
    i=$((i + 1)); lim=$(left 400)
    echo "== bench --train --rows $g (limit ${lim}s)"
    timeout "$lim" python3 -m kernels.bench --train --rows "$g" --out-dir "$R/bench/train_g$i" \
      2>>"$R/logs/bench_train_g$i.err" | grep -E "^\| [A-Za-z]" | cut -c1-400
    grep -E "Error|budget" "$R/logs/bench_train_g$i.err" | head -4
  done
}

train_kernels() {  # the training step's two fused kernels alone, Triton vs Gluon vs the plain cuBLAS GEMM (~1-2 min)
  echo "== train kernels"
  timeout "$(left 200)" python3 -m kernels.lab.train_kernels --out "$R/bench/train_kernels.json" ${TRAIN_DTYPES:+--dtypes "$TRAIN_DTYPES"} \
    2>"$R/logs/train_kernels.err" | tee "$R/logs/train_kernels.md"
  tail -3 "$R/logs/train_kernels.err"
}

ncu_dh() {  # Nsight Compute on each dH candidate (cuBLAS bare GEMM, Triton, every Gluon config) at NCU_ROWS (~1 min/row)
  local row
  for row in ${NCU_ROWS:-hf-geglu-bf16 bert-large-bf16}; do
    echo "== ncu dH $row"
    timeout "$(left 150)" ncu --profile-from-start off --clock-control none --csv --print-units base \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --section Occupancy --section LaunchStats python3 -m kernels.lab.train_kernels --ncu-row "$row" \
      >"$R/logs/ncu_dh_$row.csv" 2>"$R/logs/ncu_dh_$row.err"
    echo "rc=$? $(grep -c '^"' "$R/logs/ncu_dh_$row.csv") csv lines"; grep "^profiled" "$R/logs/ncu_dh_$row.csv" | tr '\n' ' '; echo
    python3 - "$R/logs/ncu_dh_$row.csv" <<'PY'
import csv, sys
keep = ("Duration", "DRAM Throughput", "Compute (SM) Throughput", "Memory Throughput", "Registers Per Thread",
        "Achieved Occupancy", "No Eligible", "Issued Warp Per Scheduler", "Dynamic Shared Memory Per Block")
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows:
    sys.exit(print("  no ncu rows"))
head, body = rows[0], rows[1:]
ix = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value") if k in head}
seen = {}
for r in body:
    if any(r[ix["Metric Name"]].startswith(k) for k in keep):
        seen.setdefault((r[ix["ID"]], r[ix["Kernel Name"]][:40]), []).append(f"{r[ix['Metric Name']]}={r[ix['Metric Value']]}")
for (i, k), ms in seen.items():
    print(f"  {i} {k}: " + "; ".join(ms))
PY
  done
}

record_train() {  # the HF GEGLU training step with the fuselens variant (its backward) beside the peers
  rec geglu_train_fuselens_bf16 150 --workload geglu --variants eager,compile,liger,fuselens --batch 64 --seq 128 \
    --d-model 768 --hidden 3072 --dtype bf16 --train
}

bench() {
  local lim; lim=$(left 540)
  echo "== bench $* (limit ${lim}s)"
  timeout "$lim" python3 -m kernels.bench --out-dir "$R/bench" "$@" 2>>"$R/logs/bench.err" | tee -a "$R/logs/bench.md" | grep -E "^\||^- " | head -80
  grep -E "FAILED|Error" "$R/logs/bench.err" | head -5
}

# The five Llama / TinyLlama rows issue 16 holds to <= 1.05x the compute floor, both dtypes (~2-3 min per card).
bench_llm_floor() {
  bench --shapes llm-all --rows "${BENCH_ROWS:-llama2-7b-bf16,llama3-8b-bf16,tinyllama-fp16,llama2-7b-fp16,tinyllama-bf16}"
}

# The shape-sweep rows nearest a LOSS (issue 16: fp32 HF SwiGLU on the H100, 77 x 1001 -> 3000 bf16 on the H200) with
# each probe's µs per candidate path; ~2-3 min. BENCH_ROWS overrides the row ids.
bench_rows() {
  bench --shapes llm-all --rows "${BENCH_ROWS:-hf-swiglu-fp32,unaligned-bf16,unaligned-fp32,odd-aligned-bf16,decode-bf16}"
  python3 - "$R/bench" <<'PY'
import json, sys, pathlib
for f in pathlib.Path(sys.argv[1]).glob("kernels_*.json"):
    res = json.loads(f.read_text())
    for r in res.get("shapes", []):
        v = r.get("variants", {})
        print(r["id"], r.get("verdict"), {k: (x.get("us"), x.get("spread_us")) for k, x in v.items()})
        print("   probe", v.get("fuselens", {}).get("path"), v.get("fuselens", {}).get("probe_us"))
PY
}

# Whole Hugging Face models (kernels.models.whole_model): the 4-layer Llama forward and training step through the runner,
# and teammate-style training recordings with plain torch.profiler and no runner (scripts/record_plain_profiler.py:
# no manifest, no probe).
record_model() {
  python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tail -1
  rec llama_model_bf16 150 --workload llama-model --variants eager,sdpa,compile,compile-fuselens --dtype bf16
  rec llama_model_train_bf16 200 --workload llama-model --variants eager,sdpa,compile --dtype bf16 --train
  local T=$R/teammate; mkdir -p "$T"
  for v in eager compile; do
    timeout "$(left 90)" python3 scripts/record_plain_profiler.py --workload llama-model --layers 4 --variant $v --train \
      --out "$T/llama_train_$v.json.gz" >"$R/logs/teammate_$v.txt" 2>&1; echo "teammate $v rc=$?"; tail -2 "$R/logs/teammate_$v.txt"
  done
  model_report llama_model_bf16 llama_model_train_bf16
}

record_model_big() {  # the Gemma forward and the 16-layer Llama training pair (fewer steps: a bigger trace)
  rec gemma_model_bf16 150 --workload gemma-model --variants eager,sdpa,compile --dtype bf16
  rec llama16_model_train_bf16 300 --workload llama-model --layers 16 --variants eager,compile --dtype bf16 --train \
    --rounds 2 --steps-per-turn 2
  model_report gemma_model_bf16 llama16_model_train_bf16
}

record_model_32() {  # a 32-layer Llama training pair (2 rounds x 1 step: the speed case of bench/bench_diff.py)
  rec llama32_model_train_bf16 330 --workload llama-model --layers 32 --variants eager,compile --dtype bf16 --train \
    --rounds 2 --steps-per-turn 1
  model_report llama32_model_train_bf16
}

record_model_h100() {  # the 4-layer Llama forward and training sets without the teammate-style recordings
  rec llama_model_bf16 150 --workload llama-model --variants eager,sdpa,compile,compile-fuselens --dtype bf16
  rec llama_model_train_bf16 200 --workload llama-model --variants eager,sdpa,compile --dtype bf16 --train
  model_report llama_model_bf16 llama_model_train_bf16
}

model_report() {
  for c in "$@"; do
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); [print(sys.argv[1].split('/')[-2], v['name'], v['status'], v.get('median_us'), v.get('attention_backend'), v.get('message','')[:100]) for v in m['variants']]" \
      "$R/sample_traces/$c/manifest.json" 2>&1 | tail -5
  done
}

for step in "$@"; do
  case $step in
    facts) facts ;; sweep) sweep ;; configs) configs ;; record) record ;; record-hf) record_hf ;; record-roofs) record_roofs ;; record-fuselens) record_fuselens ;; check) check ;;
    record-model) record_model ;; record-model-big) record_model_big ;; record-model-32) record_model_32 ;;
    record-model-h100) record_model_h100 ;; record-layer) record_layer ;; record-layer-quick) record_layer_quick ;; record-llama-layer) record_llama_layer ;; record-templates) record_templates ;;
    record-skew) record_skew ;; gemm-reread) gemm_reread ;;
    ncu-warm) ncu_warm_hf; ncu_warm_plain ;; ncu-warm-hf) ncu_warm_hf ;; ncu-warm-plain) ncu_warm_plain ;;
    gpu-tests) gpu_tests ;; host) host ;; sweep-llm) sweep_llm ;; sweep-floor) sweep_floor ;; ncu-floor) ncu_floor ;; two-models) two_models ;;
    bench-hf-plain) bench --shapes hf-plain ;; bench-users) bench --shapes users ${BENCH_ROWS:+--rows "$BENCH_ROWS"} ;;
    train-kernels) train_kernels ;; ws-tests) ws_tests ;; ncu-dh) ncu_dh ;; dh-configs) dh_configs ;;
    bench-train-groups) bench_train_groups ;;
    bench-llm) bench --shapes llm ;; bench-rows) bench_rows ;; bench-llm-floor) bench_llm_floor ;; bench-llm-dtypes) bench --shapes llm-dtypes ;;
    train-tests) train_tests ;; bench-train) bench_train ;; record-train) record_train ;;
    bench) bench ;; bench-quick) bench --no-max-autotune ;; bench-mlp) bench --sections mlp --no-max-autotune ;; bench-gating) bench --sections gating --no-max-autotune ;;
    *) echo "unknown step $step" ;;
  esac
done
tar czf "$OUT/results.tgz" -C "$R" . && ls -la "$OUT/results.tgz"
