"""Persistent TMA GEMM with fused epilogues, for Hopper (sm_90) and newer: the fast path behind
kernels.ops.dual_gemm (act(X Wg^T) * (X Wu^T)) and kernels.ops.gemm_act (act(X W^T + b)).

Why a second GEMM kernel: on the H100 (docs/KERNELS.md) we measured the pointer-based kernels at ~490 TFLOP/s
for the dual GEMM and slower than cuBLAS + GELU for the plain MLP. At K = 768 each output tile has only 12 K-steps
of 64, so a non-persistent kernel spends a large share of every tile filling the pipeline and draining the
epilogue. Here:
  - tiles come in through TMA tensor descriptors (the copy engine does the address math and the out-of-bounds
    zero fill, so odd M/N/K need no masks; stores are clipped at the edges too);
  - the grid is persistent (one program per SM walking tiles in grouped order) and the tile and K loops are
    flattened (`tl.range(..., flatten=True)`), so the next tile's loads are in flight during this tile's epilogue;
  - the output goes out through a TMA store.
TMA needs 16-byte aligned base pointers and row strides (K and N multiples of 8 for 2-byte types) and a
contiguous last dimension; the wrappers fall back to the pointer kernels otherwise, and for fp32 and M <= 64.
"""

from __future__ import annotations

import weakref

import torch
import triton
import triton.language as tl

from kernels.ops import ws_gemm
from kernels.ops.activations import act_f32
from kernels.ops.gemm_common import INTERP_META, grouped_tile, m_bucket
from kernels.ops.launch import Tuned, not_recorded
from kernels.ops.triton_util import INTERPRETING, interpreting, num_sms, sm_capability, timed_both_ways

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # Triton < 3.4: no host-side descriptors, so no TMA path
    TensorDescriptor = None

TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@triton.jit
def _gated_tile_acc(x_desc, wgu_desc, off_m, pid_n, k_lo, k_hi, UPCAST: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """The [BM, 2 BN] fp32 accumulator of one tile over the K steps [k_lo, k_hi)."""
    acc = tl.zeros((BM, 2 * BN), dtype=tl.float32)
    for ki in range(k_lo, k_hi):
        off_k = ki * BK
        a = x_desc.load([off_m, off_k])
        b = wgu_desc.load([pid_n * 2 * BN, off_k])
        if UPCAST:  # interpreter only: see gemm_common.dot_flags
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b.T, acc)
    return acc


@triton.jit
def _gated_store(acc, out_desc, off_m, off_n, ACT: tl.constexpr, OUT_DTYPE: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, ROWS: tl.constexpr):  # fmt: skip
    # ROWS gate rows then ROWS up rows: see interleave_gate_up for why 8
    acc = tl.permute(tl.reshape(acc, (BM, BN // ROWS, 2, ROWS)), (0, 1, 3, 2))
    g, u = tl.split(tl.reshape(acc, (BM, BN, 2)))
    out = act_f32(g, ACT) * u
    out_desc.store([off_m, off_n], out.to(OUT_DTYPE))


@triton.jit
def fuselens_dual_gemm_glu_kernel(
    x_desc, wgu_desc, out_desc, ws_ptr, flag_ptr,
    M, N, K, main_tiles, parts,
    ACT: tl.constexpr, OUT_DTYPE: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    ROWS: tl.constexpr, TAIL: tl.constexpr,
):  # fmt: skip
    """Gated MLP up-projection from an interleaved weight (interleave_gate_up): blocks of ROWS gate rows, then the
    same ROWS up rows.

    One [BM, 2 BN] accumulator per tile, so each K step is ONE wgmma of width 2 BN = 256 (the widest, which reads
    the X tile from shared memory once) instead of two of width 128. Each thread of the wgmma layout holds the
    same column offsets of neighbouring 8-column groups, so gate and up of an output column sit in that thread's
    registers and the reshape + split in the epilogue moves no data between threads.

    TAIL (split-K wave tail, see tail_plan): the first main_tiles tiles (whole waves) as above; each remaining tile is
    cut into `parts` K ranges, one per program, so the last wave is full. Programs with the lower parts store their
    fp32 partial accumulator in ws_ptr and count up the tile's flag; the program with the last part waits for the
    count, adds the partials, applies the epilogue and resets the flag to 0 for the next call. Every part runs on
    its own program of a grid of at most one program per SM, all resident, so the wait always ends."""
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    if not TAIL:
        main_tiles = num_tiles
    for tile_id in tl.range(tl.program_id(0), main_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BM, BN, GROUP_M)
        acc = _gated_tile_acc(x_desc, wgu_desc, pid_m * BM, pid_n, 0, k_tiles, UPCAST, BM, BN, BK)
        _gated_store(acc, out_desc, pid_m * BM, pid_n * BN, ACT, OUT_DTYPE, BM, BN, ROWS)
    if TAIL:
        n_units = (num_tiles - main_tiles) * parts
        k_per = tl.cdiv(k_tiles, parts)
        offs = tl.arange(0, BM)[:, None] * (2 * BN) + tl.arange(0, 2 * BN)[None, :]
        for unit in range(tl.program_id(0), n_units, NUM_SMS):  # at most one unit per program (tail_plan)
            slot = unit // parts
            part = unit % parts
            pid_m, pid_n = grouped_tile(main_tiles + slot, M, N, BM, BN, GROUP_M)
            k_lo = part * k_per
            k_hi = tl.minimum(k_lo + k_per, k_tiles)
            acc = _gated_tile_acc(x_desc, wgu_desc, pid_m * BM, pid_n, k_lo, k_hi, UPCAST, BM, BN, BK)
            if part < parts - 1:
                tl.store(ws_ptr + (slot * (parts - 1) + part).to(tl.int64) * (BM * 2 * BN) + offs, acc)
                tl.debug_barrier()  # every thread's partial is stored before the flag says so
                tl.atomic_add(flag_ptr + slot, 1, sem="release")
            else:
                while tl.atomic_add(flag_ptr + slot, 0, sem="acquire") < parts - 1:
                    pass
                for p in range(parts - 1):
                    base = ws_ptr + (slot * (parts - 1) + p).to(tl.int64) * (BM * 2 * BN)
                    acc += tl.load(base + offs, cache_modifier=".cg")
                tl.atomic_xchg(flag_ptr + slot, 0)
                _gated_store(acc, out_desc, pid_m * BM, pid_n * BN, ACT, OUT_DTYPE, BM, BN, ROWS)


@triton.jit
def fuselens_gemm_bias_act_kernel(
    x_desc, w_desc, out_desc, bias_ptr,
    M, N, K,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, OUT_DTYPE: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    SUBTILE: tl.constexpr,
):  # fmt: skip
    """act(X W^T + b), one accumulator. On the H100 a shared two-accumulator kernel (the sweep's 2-dot kernel) took 107 us for the plain
    MLP's first layer (cuBLAS + bias: 61 us); this one took 106 us with 128 x 128 tiles chosen, while the
    gated kernel's 128 x 256 accumulator ran at 640 TFLOP/s. SUBTILE stores a 128 x 256 tile as two 128 x 128
    halves (as Triton's persistent-matmul tutorial does), halving the epilogue's shared-memory buffer (64 -> 32 KB)
    so 128 x 256 tiles fit with 3-4 pipeline stages."""
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BM, BN, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BK
            a = x_desc.load([off_m, off_k])
            b = w_desc.load([off_n, off_k])
            if UPCAST:  # interpreter only: see gemm_common.dot_flags
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b.T, acc)
        if HAS_BIAS:
            offs_n = off_n + tl.arange(0, BN)
            acc = acc + tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
        out = act_f32(acc, ACT).to(OUT_DTYPE)
        if SUBTILE:
            left, right = tl.split(tl.permute(tl.reshape(out, (BM, 2, BN // 2)), (0, 2, 1)))
            out_desc.store([off_m, off_n], left)
            out_desc.store([off_m, off_n + BN // 2], right)
        else:
            out_desc.store([off_m, off_n], out)


def single_config(bm, bn, bk, stages, warps, group_m=8, subtile=False):
    return triton.Config(
        {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m, "SUBTILE": subtile},
        num_stages=stages,
        num_warps=warps,
    )


# On the H100 (python -m kernels.lab.sweep, bench/results/sweep_h100_80gb_hbm3.md): with no activation every 128 x 256 config
# runs at cuBLAS speed (62-64 us vs 62.4 for F.linear); the libdevice-erf epilogue adds 35-66 us, which
# is what the first single-GEMM kernel paid. The epilogue runs on the 8 warps of one program per SM, so its instruction count, not HBM, is its cost:
# erff is ~64 SASS instructions per element (both branches, range checks), activations.gelu_erf_f32 ~17.
# Registers and shared memory from Triton 3.6 for sm_90 (compiled without a GPU, cuobjdump -res-usage): 128 x 256
# tiles take 165-187 registers and no stack with the new GELU (libdevice: 255 + 64-72 B of spills).
# Two programs of one warpgroup per SM (so one's epilogue overlaps the other's wgmma) measured slower on the H100
# (126-155 us: two stages and 64-row tiles do not feed the tensor cores), so the grid stays one program per SM.
SINGLE_CONFIGS = [
    single_config(128, 256, 64, 3, 8),  # 214 KB of shared memory
    single_config(128, 256, 64, 3, 8, subtile=True),  # 181 KB
    single_config(128, 256, 64, 4, 8, subtile=True),  # 230 KB (H100/H200 limit: 227 KiB = 232,448 B)
    single_config(128, 128, 64, 4, 8),  # the H100's pick with libdevice erf (~106 us)
    single_config(256, 128, 64, 3, 8, subtile=True),
]


def gated_config(bm, bn, bk, stages, warps, group_m=8, tail=False):
    return triton.Config(
        {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m, "TAIL": tail},
        num_stages=stages,
        num_warps=warps,
    )


# BN is the OUTPUT width; the weight tile is 2 BN rows. Per stage, bf16 128 x 128 x 64: X 16 KB + W 32 KB.
GATED_CONFIGS = [
    gated_config(128, 128, 64, 3, 8),
    gated_config(128, 128, 64, 4, 8),  # the H100's pick for 1-row blocks (118 us for 8192 x 768 -> 3072); 229 KB
    gated_config(128, 128, 64, 4, 8, group_m=16),
    # On the H100, 16 warps (100 registers, four warps per scheduler for the epilogue): 127 us, slower; the
    # gelu_tanh epilogue (12.7 us) is bound by the SM's 16 MUFU ops per clock, not by latency.
    # BK 128 with 2 stages 146 us, BK 32 with 7 stages 124 us: both slower than BK 64 with 4 stages.
    # This config: 110.8-112.6 us with 8-row blocks + tanh.approx (bf16); the epilogue is now ~6 us of it.
]
# Few rows (M <= 1024): 128 x 128 tiles leave SMs idle (333 x 2816: 3 x 22 = 66 tiles on 132 SMs); 64-row tiles
# (one warpgroup, 64 x 256 wgmma) and 64-column outputs double the tile count. Tuned only for such M (prune_gated).
GATED_CONFIGS_FEW_ROWS = [
    gated_config(64, 128, 64, 4, 4),
    gated_config(128, 64, 64, 4, 4),
]
# LLM shapes (M >= 2048, K >= 2048: Llama-2/3, TinyLlama; the HF shape's K is 768), each the fastest at one of them in
# the floor sweeps (bench/results/sweep_floor_*.md: candidates timed in turns): 3 stages + GROUP_M 16 at Llama-2-7B
# (907 vs 913-924 us for the other 128 x 128 configs, H100); 128 x 64 outputs with 5 stages at TinyLlama (1408 tiles
# = 10.7 waves instead of 704 = 5.3: 138.8 vs 140.5 us fp16, 132.3 vs 133.7 bf16, H100; same order on the H200),
# slow elsewhere (Llama-3-8B: 2600-3340 us vs 2370-2450), which the tuning measures; 4 stages + GROUP_M 16 with
# the split-K wave tail at Llama-3-8B (7168 tiles = 54.3 waves: the last 40 tiles cut in 3; 2372 vs 2415 us without
# it, H200). 256 x 128 tiles over 16 warps fail in ptxas (Triton 3.6); 256 x 64, BK 128, GROUP_M 4 / 32 are slower.
GATED_CONFIGS_LLM = [
    gated_config(128, 128, 64, 3, 8, group_m=16),
    gated_config(128, 64, 64, 5, 8),
    gated_config(128, 128, 64, 4, 8, group_m=16, tail=True),
]


def prune_gated(configs, m_k: tuple):
    M, K = m_k
    drop = set()
    if M > 1024:
        drop |= {id(c) for c in GATED_CONFIGS_FEW_ROWS}
    if M < 2048 or K < 2048:
        drop |= {id(c) for c in GATED_CONFIGS_LLM}
    return [c for c in configs if id(c) not in drop] or configs


_gated_tuned = Tuned(
    fuselens_dual_gemm_glu_kernel,
    GATED_CONFIGS + GATED_CONFIGS_FEW_ROWS + GATED_CONFIGS_LLM,
    "dual_gemm_glu_tma",
    prune_gated,
)
_single_tuned = Tuned(fuselens_gemm_bias_act_kernel, SINGLE_CONFIGS, "gemm_bias_act_tma")
_INTERP_SUBTILE = False  # tests flip it to run the split-store epilogue under the interpreter
_INTERP_GATED_META: dict | None = None  # tests set a shipped config's tile here to run it under the interpreter


def _tma_ok(t: torch.Tensor) -> bool:
    return t.stride(-1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


def usable(x: torch.Tensor, *weights: torch.Tensor) -> bool:
    """True when the TMA path applies: Triton with descriptors, 2-byte dtype, aligned rows, Hopper+ (or the
    interpreter), and M > 64 (decode shapes use the pointer kernels' narrow tiles)."""
    if TensorDescriptor is None or x.dtype not in TL_DTYPES or x.shape[0] <= 64:
        return False
    if not all(_tma_ok(t) for t in (x, *weights)) or (weights[0].shape[0] * x.element_size()) % 16:
        return False
    if interpreting():
        return x.device.type == "cpu"
    return x.is_cuda and sm_capability(x.device.index or 0)[0] >= 9


def takes(name: str, impl: str, x: torch.Tensor, *weights: torch.Tensor) -> bool:
    """Whether the TMA path runs this call of wrapper `name`: never for impl "pointer", where usable() for "auto" and
    "tma"; "tma" where it is not usable is a one-line ValueError."""
    if impl == "pointer":
        return False
    if usable(x, *weights):
        return True
    if impl == "tma":
        raise ValueError(f"{name}: TMA path needs fp16/bf16, M > 64, 16-byte aligned rows and sm_90+")
    return False


# Rows per gate / up block of the interleaved weight. 8 matches the wgmma accumulator, where thread t holds
# columns 2 (t % 4) and 2 (t % 4) + 1 of every 8-column group: with blocks of 8, gate lands in one group and up in
# the next, so each thread holds gate and up of TWO ADJACENT output columns and the bf16 tile goes to shared memory
# in stmatrix (STSM.16.M88.4) instructions, 8 elements each. With rows paired one by one (ROWS 1, runs 3-9) each
# thread held every 4th output column and Triton 3.6 stored it element by element (STS.U16 + PRMT: 2 instructions
# per element; cuobjdump -sass of the sm_90 build, 128 x 128 x 64 tiles: 1304 -> 1168 instructions per program).
GATE_UP_ROWS = 8


def interleave_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor, rows: int = GATE_UP_ROWS) -> torch.Tensor:
    """[2N, K]: blocks of `rows` rows of w_gate then the same rows of w_up (the layout
    fuselens_dual_gemm_glu_kernel reads with ROWS = rows); N must be a multiple of rows."""
    n, k = w_gate.shape
    if n % rows:
        raise ValueError(f"interleave_gate_up: {n} output rows are not a multiple of {rows}")
    blocks = torch.stack((w_gate.reshape(n // rows, rows, k), w_up.reshape(n // rows, rows, k)), dim=1)
    return blocks.reshape(2 * n, k).contiguous()


# id(w_gate) -> (weakref to w_gate, weakref to w_up, w_gate version, w_up version, rows, interleaved copy). Keyed by the
# tensor OBJECT, checked through weak references (an entry is dropped when its weight is freed): keying it by
# data_ptr + version failed: and a test's fresh weights that the CUDA caching allocator placed at a freed weight's address
# got the stale copy (rel err 1.41). (WeakKeyDictionary cannot hold tensors: it compares keys with ==.)
_INTERLEAVED: dict[int, tuple] = {}


def cached_interleaved(w_gate: torch.Tensor, w_up: torch.Tensor, rows: int = GATE_UP_ROWS) -> torch.Tensor:
    """interleave_gate_up, done once per weight pair and reused while both weights are unchanged: an in-place
    update (optimizer step, load_state_dict, copy_) bumps a version counter and rebuilds it. Writes through `.data`
    bypass version counters: call clear_interleaved_cache() after those. 2 x 4.7 MB for the HF shape."""
    key = id(w_gate)
    hit = _INTERLEAVED.get(key)
    if (
        hit is not None
        and hit[0]() is w_gate
        and hit[1]() is w_up
        and hit[2:5] == (w_gate._version, w_up._version, rows)
    ):
        return hit[5]
    wgu = interleave_gate_up(w_gate, w_up, rows)
    if hit is None or hit[0]() is not w_gate:  # one finalizer per weight, not one per rebuild
        weakref.finalize(w_gate, _INTERLEAVED.pop, key, None)
    _INTERLEAVED[key] = (weakref.ref(w_gate), weakref.ref(w_up), w_gate._version, w_up._version, rows, wgu)
    return wgu


def clear_interleaved_cache() -> None:
    _INTERLEAVED.clear()


def _sms(dev: int) -> int:
    """Programs of the persistent grid: one per SM (4 under the interpreter, so a CPU run still loops over tiles)."""
    return 4 if interpreting() else num_sms(dev)


def persistent_gated(x, w_gate, w_up, act_id: int, rows: int = GATE_UP_ROWS, out=None, ws: bool = True) -> torch.Tensor:
    """act(x @ w_gate^T) * (x @ w_up^T) through the interleaved-weight kernel; callers validate inputs.
    rows: the weight's gate/up block height (1 = the first interleaved layout, kept for the sweep's before/after rows).
    out: an [M, N] tensor of x's dtype to write, when the caller already has one (one allocation per call, not two).
    ws: False keeps the Triton kernel (the sweeps time its configs); True lets a first-call measurement pick the
    warp-specialised Gluon kernel where it applies and is faster (WS_CHOICE)."""
    if out is None:
        out = torch.empty((x.shape[0], w_gate.shape[0]), device=x.device, dtype=x.dtype)
    M, K = x.shape
    N = w_gate.shape[0]
    wgu = cached_interleaved(w_gate, w_up, rows)
    dev = x.get_device()
    if (
        ws
        and M >= WS_MIN_ROWS
        and 4 * M * N * K >= WS_MIN_FLOP
        and K <= WS_MAX_K
        and rows == ws_gemm.ROWS
        and not _gated_tuned.forcing
        and ws_gemm.applies(x)
    ):
        key = (dev, x.dtype, act_id, m_bucket(M), N, K)
        use_ws = WS_CHOICE.get(key)
        if use_ws is None:
            use_ws = _measure_ws(key, lambda: _launch_gated(x, wgu, act_id, rows, out), x, wgu, act_id, out)
        if use_ws:
            return ws_gemm.ws_gated(x, wgu, act_id, out)
    _launch_gated(x, wgu, act_id, rows, out)
    return out


# Where the warp-specialised Gluon kernel (kernels.ops.ws_gemm) is a candidate: from 1024 rows (its 64-row tiles fill a
# wave) and 40 GFLOP (~50 us of GPU time at ~800 TFLOP/s; TinyLlama's gate/up is 94, the HF shape's 77), so its launch
# (launch.Fixed, no op plan: 11.9-12.6 us of host time per call after the first) stays behind the GPU. The measurement
# times GPU work only, so it must not be offered where host time decides; smaller calls keep the Triton kernel and its
# op plans. Tools forcing a Triton config (launch.forced) always get the Triton kernel.
# Up to K = 2048 (32 K steps of 64): the ping-pong's gain is the epilogue it hides, a larger share of each tile where K
# is short (TinyLlama gate/up, K 2048: 128.9 vs 137.9 us H100, 130.2 vs 138.0 H200), while its 64-row tiles fetch each
# weight tile twice as often as the Triton kernel's 128-row tiles (Llama-3-8B gate/up: ~37 GB of L2 -> SMEM traffic
# against ~22). At K = 4096 it lost every first-call measurement but one (Llama-2-7B 940.9 vs 905.8 us H100, 922.5 vs
# 892.6 H200; Llama-3-8B 2564.9 vs 2397.7 H100) and ran slower held at the power limit (Llama-3-8B forward,
# bench call counts: 4031.9 vs 3844.9 us H100, 3923.6 vs 3730.9 H200); the one it won, Llama-3-8B on the H200
# (2445.5 vs 2493.5 us in 10-call bursts), put a slower kernel into the bench's held forwards.
WS_MIN_ROWS = 1024
WS_MIN_FLOP = 4e10
WS_MAX_K = 2048
WS_CHOICE: dict = {}  # (device, dtype, act, row bucket, N, K) -> True where the Gluon kernel measured faster
WS_TIMINGS: dict = {}  # same key -> {"triton": us, "ws": us} from that measurement (the sweeps and the bench show it)


def _measure_ws(key, triton_call, x, wgu, act_id: int, out) -> bool:
    """Time the Triton kernel (tuned first, by its own first call) and the Gluon kernel in two passes, the second in
    reverse order, and keep the faster for `key`. Inside CUDA-graph capture nothing is timed: the Triton kernel runs
    and nothing is kept. A Gluon kernel that fails to compile here is never tried again for the key."""
    if torch.cuda.is_current_stream_capturing():
        return False
    with not_recorded():  # an op plan being recorded must hold the call's one launch, not ~47 timing launches
        triton_call()
        calls = {"triton": triton_call, "ws": lambda: ws_gemm.ws_gated(x, wgu, act_id, out)}
        try:
            calls["ws"]()
        except Exception:  # out of resources or a Gluon without this API: the Triton kernel it is
            WS_CHOICE[key] = False
            return False
        times = timed_both_ways(calls)
    WS_TIMINGS[key] = times
    WS_CHOICE[key] = times["ws"] < times["triton"]
    return WS_CHOICE[key]


def _launch_gated(x, wgu, act_id: int, rows: int, out) -> None:
    """The Triton dual GEMM (fuselens_dual_gemm_glu_kernel) into out, its config tuned per shape."""
    M, K = x.shape
    N = out.shape[1]
    dev = x.get_device()
    n_sms = _sms(dev)
    consts = {
        "ACT": act_id,
        "OUT_DTYPE": TL_DTYPES[x.dtype],
        "UPCAST": interpreting() and x.dtype == torch.bfloat16,
        "NUM_SMS": n_sms,
        "ROWS": rows,
    }

    def args(cfg):
        bm, bn, bk = cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"]
        main, parts, ws, flags = tail_plan(dev, M, N, K, bm, bn, bk, n_sms) if cfg.kwargs["TAIL"] else (0, 1, out, out)
        # (tensor, block) pairs: TMA descriptors, encoded and cached by the launcher (kernels.ops.launch)
        return ((x, (bm, bk)), (wgu, (2 * bn, bk)), (out, (bm, bn)), ws, flags, M, N, K, main, parts)

    def grid(cfg):
        if cfg.kwargs["TAIL"]:
            return (n_sms, 1, 1)
        return (min(n_sms, triton.cdiv(M, cfg.kwargs["BM"]) * triton.cdiv(N, cfg.kwargs["BN"])), 1, 1)

    dt = x.dtype
    _gated_tuned.launch(
        (dev, dt, act_id, rows, M, N, K),
        lambda: (dev, dt, act_id, rows, m_bucket(M), N, K),
        args,
        lambda cfg: consts,
        grid,
        dev,
        prune_arg=(M, K),
        # a triton.Config per call costs ~0.7 us of host time: built only where the interpreter runs
        interp_config=triton.Config({"TAIL": False, **(_INTERP_GATED_META or INTERP_META)}) if INTERPRETING else None,
    )


# Split-K wave tail (the kernel's TAIL): where the last wave of a persistent launch is partly empty (TinyLlama's
# 2048 x 5632 output: 704 tiles of 128 x 128 on 132 SMs, the 6th wave 44 tiles), those tiles are cut into K ranges
# so that wave is full: 44 tiles x 3 parts = 132 programs, each a third of a tile's K loop, + the partial sums
# through L2 (2 x 128 KB per tile). At most TAIL_MAX_PARTS parts: the finishing program reads every other part's
# partial. One workspace + flag set per (device, stream, shape, tile): the flags are counted up and reset by the
# kernel itself, and calls on one stream run one after another, so they never share a flag while it counts.
TAIL_MAX_PARTS = 3
_TAIL_BUFS: dict[tuple, tuple] = {}


def tail_plan(dev: int, M: int, N: int, K: int, bm: int, bn: int, bk: int, n_sms: int) -> tuple:
    """(main_tiles, parts, workspace, flags) for the kernel's TAIL: main_tiles = the tiles of whole waves, parts = K
    ranges per remaining tile (1 = no split: every tile in the main loop, workspace and flags unused)."""
    stream = 0 if dev < 0 else torch._C._cuda_getCurrentRawStream(dev)
    key = (dev, stream, M, N, K, bm, bn, bk, n_sms)
    hit = _TAIL_BUFS.get(key)
    if hit is not None:
        return hit
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    main = tiles // n_sms * n_sms
    tail = tiles - main
    parts = min(n_sms // tail, TAIL_MAX_PARTS, triton.cdiv(K, bk)) if tail else 1
    device = "cpu" if dev < 0 else f"cuda:{dev}"
    if parts < 2:
        plan = (tiles, 1, torch.empty(1, device=device), torch.zeros(1, device=device, dtype=torch.int32))
    else:
        ws = torch.empty((tail, parts - 1, bm, 2 * bn), device=device, dtype=torch.float32)
        plan = (main, parts, ws, torch.zeros(tail, device=device, dtype=torch.int32))
    _TAIL_BUFS[key] = plan
    return plan


def launch_single(x, w, bias, act_id, out, tuned=None):
    """act(x @ w^T + bias) into out through the single-accumulator kernel (or `tuned`: a Tuned over another build
    of the same kernel with the same signature, for the sweep)."""
    M, K = x.shape
    N = w.shape[0]
    dev = x.get_device()
    n_sms = _sms(dev)
    consts = {
        "HAS_BIAS": bias is not None,
        "ACT": act_id,
        "OUT_DTYPE": TL_DTYPES[x.dtype],
        "UPCAST": interpreting() and x.dtype == torch.bfloat16,
        "NUM_SMS": n_sms,
    }
    b = bias if bias is not None else x

    def args(cfg):
        bm, bn, bk = cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"]
        out_block = (bm, bn // 2 if cfg.kwargs["SUBTILE"] else bn)
        return ((x, (bm, bk)), (w, (bn, bk)), (out, out_block), b, M, N, K)  # (tensor, block): TMA descriptors

    dt = x.dtype
    has_bias = bias is not None
    (tuned or _single_tuned).launch(
        (dev, dt, has_bias, act_id, M, N, K, b.data_ptr() & 15),
        lambda: (dev, dt, has_bias, act_id, m_bucket(M), N, K),
        args,
        lambda cfg: consts,
        lambda cfg: (min(n_sms, triton.cdiv(M, cfg.kwargs["BM"]) * triton.cdiv(N, cfg.kwargs["BN"])), 1, 1),
        dev,
        interp_config=triton.Config({**INTERP_META, "SUBTILE": _INTERP_SUBTILE}) if INTERPRETING else None,
    )
    return out


def persistent_gemm(x, w, bias=None, act_id: int = 3, out=None) -> torch.Tensor:
    """act(x @ w^T + bias); callers validate shapes and dtypes. out: as in persistent_gated."""
    if out is None:
        out = torch.empty((x.shape[0], w.shape[0]), device=x.device, dtype=x.dtype)
    return launch_single(x, w, bias, act_id, out)
