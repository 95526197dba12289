"""Warp-specialised (ping-pong) dual GEMM for Hopper (sm_90), in Gluon: act(X Wg^T) * (X Wu^T) with the epilogue of
one tile running while the tensor cores work on the next.

Why a second dual GEMM: the Triton kernel of kernels.ops.hopper_gemm runs its epilogue on the same warps as its
wgmma, after each tile's K loop, so at K = 2048 (TinyLlama: 32 K steps per tile) the tensor pipe is busy only 78-82%
of the time (ncu on the H100, docs/KERNELS.md). Triton 3.6's own `warp_specialize` does not split that loop on
sm_90. Here the split is written out (docs/KERNELS.md, the warp-specialised dual GEMM):
  - one producer warp issues the TMA loads of X and of the interleaved [gate; up] weight tile into a ring of STAGES
    shared-memory stages (`ready` / `empty` mbarriers per stage);
  - two consumer warpgroups take alternate output tiles of BM x BN; each K step is ONE wgmma of width 2 BN, as in
    the Triton kernel (interleave_gate_up's 8-row blocks, so gate and up of an output column sit in one thread);
  - the consumers' main loops take turns (`done` mbarriers): each consumer starts its tile j once the other has
    finished tile j - 1's main loop, so the other's epilogue (activation, multiply, TMA store) overlaps this main loop,
    and every ring position before a tile has completed when its consumer waits on it (a parity wait cannot then see
    an older completion of the same stage: without the turns, consumer 1 ran ahead on stale data at K = 2048);
  - tiles walk in bands of GROUP_M row tiles (32: every row tile of a 2048-token input, so a wave's weight columns
    are read once from HBM; 8 measured 146 us, 16 138, 32 133 at TinyLlama fp16 on the H100).
Measured at TinyLlama's gate/up (2048 x 2048 -> 5632, H100, all in one process): with 4 stages fp16 132.5 us, bf16
129.2, against the Triton kernel's 140.3 / 133.4 and cuBLAS's [gate; up] GEMM without any activation 135.6 / 132.7;
with 5 stages (below) 128.3 / 124.6. hopper_gemm.persistent_gated runs it where its first-call measurement finds it
faster (hopper_gemm.WS_CHOICE).

Applies to sm_90 only (wgmma), 2-byte dtypes, and not under the interpreter (Gluon kernels do not run there):
`applies`; TMA alignment is the caller's check (hopper_gemm.usable).
"""

from __future__ import annotations

import torch
import triton

from kernels.ops.activations import act_f32
from kernels.ops.launch import Fixed
from kernels.ops.triton_util import interpreting, num_sms, sm_capability

try:  # Gluon ships with Triton >= 3.5; without it the Triton kernel is the only dual GEMM
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
except ImportError:  # pragma: no cover - depends on the installed Triton
    gluon = None

BM, BN, BK = 64, 128, 64  # output tile per consumer (one warpgroup: wgmma M = 64) and K step
# 5 x (8 KB of X + 32 KB of weight) + 2 x 8 KB output buffers = 216 KB of shared memory (limit 227): each tile leaves
# in two 64-column halves through one 8 KB buffer per consumer, so a 5th stage fits. TinyLlama gate/up, H100: 124.6 us
# bf16 / 128.3 fp16 against 127.5 / 131.8 with 4 stages and whole-tile stores.
STAGES = 5
SPLIT_STORE = True
GROUP_M = 32
# 9 warps (4 + 4 + 1) are allocated as 3 warpgroups: 3 x 128 threads x 168 registers <= 65,536 per SM; setmaxnreg then
# moves registers from the producer's warpgroup (24) to the consumers
CONSUMER_REGS, PRODUCER_REGS, MAX_REGS = 232, 24, 168
ROWS = 8  # gate/up rows per block of the interleaved weight this kernel reads (the epilogue's reshape assumes it)

if gluon is not None:

    @gluon.jit
    def _tile(tile_id, M, N, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr):
        """(row, column) offsets of tile `tile_id` in grouped order (bands of GROUP_M row tiles walk N together)."""
        num_pid_m = gl.cdiv(M, BM)
        in_group = GROUP_M * gl.cdiv(N, BN)
        first_m = (tile_id // in_group) * GROUP_M
        size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
        return (first_m + (tile_id % in_group) % size_m) * BM, ((tile_id % in_group) // size_m) * BN

    @gluon.jit
    def main_loop(a_bufs, b_bufs, ready, empty, done, j, k_tiles, acc, WHICH: gl.constexpr, STAGES: gl.constexpr,
                  B_ROWS_N: gl.constexpr):  # fmt: skip
        """Consumer WHICH's K loop of its local tile j, into `acc`, once the other consumer's main loop of tile j - 1
        is done (the two take turns on the tensor cores); each stage released once its wgmma is done with it.
        B_ROWS_N: the B tiles lie [N, K] (a weight, read transposed), else [K, N]. Also ws_dh's."""
        mbarrier.wait(done.index(1 - WHICH), ((j - 1) // 2) & 1, pred=j > 0)  # the other's main loop of j - 1
        prev = 0
        for k in range(k_tiles):
            pos = j * k_tiles + k  # ring position: the producer fills positions in the same order
            s = pos % STAGES
            mbarrier.wait(ready.index(s), (pos // STAGES) & 1)
            if B_ROWS_N:
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, is_async=True)
            else:
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index(prev), pred=k > 0)  # the previous step's wgmma is done with its stage
            prev = s
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index(prev))
        mbarrier.arrive(done.index(WHICH))
        return acc

    @gluon.jit
    def _store(val, desc, off_m, off_n, smem):
        """One [BM, BN] tile to HBM through this consumer's buffer, whole or as two half-width stores (the buffer's
        width says which); waits first until the buffer's previous store has read it out."""
        BN: gl.constexpr = val.shape[1]
        HALF: gl.constexpr = desc.block_type.shape[1]
        if HALF == BN:
            tma.store_wait(pendings=0)
            smem.store(val)
            fence_async_shared()
            tma.async_copy_shared_to_global(desc, [off_m, off_n], smem)
        else:  # two half-width stores through one half-size buffer: 8 KB less shared memory per consumer
            lo, hi = gl.split(gl.permute(gl.reshape(val, (val.shape[0], 2, HALF)), (0, 2, 1)))
            tma.store_wait(pendings=0)
            smem.store(lo)
            fence_async_shared()
            tma.async_copy_shared_to_global(desc, [off_m, off_n], smem)
            tma.store_wait(pendings=0)
            smem.store(hi)
            fence_async_shared()
            tma.async_copy_shared_to_global(desc, [off_m, off_n + HALF], smem)

    @gluon.jit
    def _consume(descs, bufs, bars, M, N, K, WHICH: gl.constexpr, ACT: gl.constexpr, GROUP_M: gl.constexpr,
                 NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, SAVE: gl.constexpr):  # fmt: skip
        """Consumer WHICH (0 or 1): local tiles WHICH, WHICH + 2, ... of this program. SAVE: also store g and u (the
        training forward keeps them for the backward) through the same buffer, before act(g) * u."""
        x_desc, w_desc, out_desc, g_desc, u_desc = descs
        x_bufs, w_bufs, out_bufs = bufs
        ready, empty, done = bars
        BM: gl.constexpr = x_desc.block_type.shape[0]
        BK: gl.constexpr = x_desc.block_type.shape[1]
        BN2: gl.constexpr = w_desc.block_type.shape[0]
        BN: gl.constexpr = BN2 // 2
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN2, 16]
        )
        pid = gl.program_id(0)
        k_tiles = gl.cdiv(K, BK)
        n_local = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - pid, NUM_PROGS)
        out_smem = out_bufs.index(WHICH)
        for j in range(WHICH, n_local, 2):
            off_m, off_n = _tile(pid + j * NUM_PROGS, M, N, BM, BN, GROUP_M)
            acc = main_loop(x_bufs, w_bufs, ready, empty, done, j, k_tiles, gl.zeros((BM, BN2), gl.float32, layout),
                            WHICH, STAGES, True)  # fmt: skip
            # ROWS gate columns then ROWS up columns (interleave_gate_up): split them without moving data
            acc = gl.permute(gl.reshape(acc, (BM, BN // 8, 2, 8)), (0, 1, 3, 2))
            g, u = gl.split(gl.reshape(acc, (BM, BN, 2)))
            if SAVE:
                _store(g.to(out_desc.dtype), g_desc, off_m, off_n, out_smem)
                _store(u.to(out_desc.dtype), u_desc, off_m, off_n, out_smem)
            _store((act_f32(g, ACT) * u).to(out_desc.dtype), out_desc, off_m, off_n, out_smem)
        tma.store_wait(pendings=0)

    @gluon.jit
    def _consumer0(descs, bufs, bars, M, N, K, ACT: gl.constexpr, GROUP_M: gl.constexpr, NUM_PROGS: gl.constexpr,
                   STAGES: gl.constexpr, SAVE: gl.constexpr):  # fmt: skip
        _consume(descs, bufs, bars, M, N, K, 0, ACT, GROUP_M, NUM_PROGS, STAGES, SAVE)

    @gluon.jit
    def _consumer1(descs, bufs, bars, M, N, K, ACT: gl.constexpr, GROUP_M: gl.constexpr, NUM_PROGS: gl.constexpr,
                   STAGES: gl.constexpr, SAVE: gl.constexpr):  # fmt: skip
        _consume(descs, bufs, bars, M, N, K, 1, ACT, GROUP_M, NUM_PROGS, STAGES, SAVE)

    @gluon.jit
    def _producer(descs, bufs, bars, M, N, K, ACT: gl.constexpr, GROUP_M: gl.constexpr, NUM_PROGS: gl.constexpr,
                  STAGES: gl.constexpr, SAVE: gl.constexpr):  # fmt: skip
        x_desc, w_desc = descs[0], descs[1]
        x_bufs, w_bufs = bufs[0], bufs[1]
        ready, empty = bars[0], bars[1]
        BM: gl.constexpr = x_desc.block_type.shape[0]
        BK: gl.constexpr = x_desc.block_type.shape[1]
        BN: gl.constexpr = w_desc.block_type.shape[0] // 2
        nbytes: gl.constexpr = x_desc.block_type.nbytes + w_desc.block_type.nbytes
        pid = gl.program_id(0)
        k_tiles = gl.cdiv(K, BK)
        n_local = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - pid, NUM_PROGS)
        for j in range(n_local):
            off_m, off_n = _tile(pid + j * NUM_PROGS, M, N, BM, BN, GROUP_M)
            for k in range(k_tiles):
                pos = j * k_tiles + k
                s = pos % STAGES
                mbarrier.wait(empty.index(s), ((pos // STAGES) & 1) ^ 1)  # fresh barriers pass the first round
                bar = ready.index(s)
                mbarrier.expect(bar, nbytes)
                tma.async_copy_global_to_shared(x_desc, [off_m, k * BK], bar, x_bufs.index(s))
                tma.async_copy_global_to_shared(w_desc, [2 * off_n, k * BK], bar, w_bufs.index(s))

    @gluon.jit
    def _dual_gemm_ws(x_desc, w_desc, out_desc, g_desc, u_desc, M, N, K, ACT: gl.constexpr, GROUP_M: gl.constexpr,
                      NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                      PRODUCER_REGS: gl.constexpr, SAVE: gl.constexpr):  # fmt: skip
        """The body of both kernels below: shared memory, barriers, the three partitions."""
        BM: gl.constexpr = x_desc.block_type.shape[0]
        BK: gl.constexpr = x_desc.block_type.shape[1]
        BN2: gl.constexpr = w_desc.block_type.shape[0]
        x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BM, BK], x_desc.layout)
        w_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES, BN2, BK], w_desc.layout)
        out_bufs = gl.allocate_shared_memory(out_desc.dtype, [2] + out_desc.block_type.shape, out_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        done = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        for i in gl.static_range(2):
            mbarrier.init(done.index(i), count=1)
        args = ((x_desc, w_desc, out_desc, g_desc, u_desc), (x_bufs, w_bufs, out_bufs), (ready, empty, done), M, N, K,
                ACT, GROUP_M, NUM_PROGS, STAGES, SAVE)  # fmt: skip
        gl.warp_specialize(
            [(_consumer0, args), (_consumer1, args), (_producer, args)], [4, 1], [CONSUMER_REGS, PRODUCER_REGS]
        )

    @gluon.jit
    def fuselens_dual_gemm_glu_ws_kernel(x_desc, w_desc, out_desc, M, N, K, ACT: gl.constexpr, GROUP_M: gl.constexpr,
                                         NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                                         PRODUCER_REGS: gl.constexpr):  # fmt: skip
        """act(X Wg^T) * (X Wu^T) from the interleaved weight w_desc ([2N, K]); one program per SM, persistent."""
        _dual_gemm_ws(x_desc, w_desc, out_desc, out_desc, out_desc, M, N, K, ACT, GROUP_M, NUM_PROGS, STAGES,
                      CONSUMER_REGS, PRODUCER_REGS, False)  # fmt: skip

    @gluon.jit
    def fuselens_dual_gemm_glu_save_ws_kernel(x_desc, w_desc, out_desc, g_desc, u_desc, M, N, K, ACT: gl.constexpr,
                                              GROUP_M: gl.constexpr, NUM_PROGS: gl.constexpr, STAGES: gl.constexpr,
                                              CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):  # fmt: skip
        """The training forward's dual GEMM (mlp_backward.fuselens_dual_gemm_glu_save_kernel's result): g and u
        stored too, into the two halves of the saved [M, 2N]."""
        _dual_gemm_ws(x_desc, w_desc, out_desc, g_desc, u_desc, M, N, K, ACT, GROUP_M, NUM_PROGS, STAGES,
                      CONSUMER_REGS, PRODUCER_REGS, True)  # fmt: skip


_GL_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def applies(x: torch.Tensor) -> bool:
    """True where this kernel can run: Gluon present, not interpreting, sm_90, fp16/bf16 (the caller, hopper_gemm,
    has checked TMA alignment)."""
    return (
        gluon is not None
        and not interpreting()
        and x.is_cuda
        and x.dtype in _GL_DTYPES
        and sm_capability(x.device.index or 0) == (9, 0)
    )


_LAYOUTS: dict = {}  # (dtype, block) -> the NVMMA shared layout of a tile of that block


def _desc(t: torch.Tensor, block):
    """The Gluon descriptor of t in tiles of `block`, its layout made once per (dtype, block)."""
    key = (t.dtype, tuple(block))
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _LAYOUTS[key] = gl.NVMMASharedLayout.get_default_for(list(block), getattr(gl, _GL_DTYPES[t.dtype]))
    return GluonDescriptor.from_tensor(t, list(block), layout)


_KERNEL = Fixed(fuselens_dual_gemm_glu_ws_kernel, "ws_gated", _desc, num_warps=4, maxnreg=MAX_REGS) if gluon else None


def ws_gated(x: torch.Tensor, wgu: torch.Tensor, act_id: int, out: torch.Tensor, stages: int = STAGES,
             split_store: bool = SPLIT_STORE) -> torch.Tensor:  # fmt: skip
    """act(x @ w_gate^T) * (x @ w_up^T) into out [M, N], from wgu = interleave_gate_up(w_gate, w_up) ([2N, K])."""
    M, K = x.shape
    N = out.shape[1]
    dev = x.device.index or 0
    programs = min(num_sms(dev), triton.cdiv(M, BM) * triton.cdiv(N, BN))
    out_block = (BM, BN // 2 if split_store else BN)
    consts = {"ACT": act_id, "GROUP_M": GROUP_M, "NUM_PROGS": programs, "STAGES": stages}
    consts |= {"CONSUMER_REGS": CONSUMER_REGS, "PRODUCER_REGS": PRODUCER_REGS}
    # what the compiled kernel and its launch depend on: M, N, K by value (Triton specialises ints on divisibility by
    # 16), the strides and the base pointers' 16-byte alignment of the descriptors' tensors
    spec = (dev, x.dtype, M, N, K, x.stride(0), wgu.stride(0), out.stride(0), act_id, stages, split_store, programs)
    spec += (x.data_ptr() & 15, wgu.data_ptr() & 15, out.data_ptr() & 15)
    args = ((x, (BM, BK)), (wgu, (2 * BN, BK)), (out, out_block), M, N, K)
    _KERNEL.launch(spec, args, consts, (programs, 1, 1), dev)
    return out


_SAVE_KERNEL = (
    Fixed(fuselens_dual_gemm_glu_save_ws_kernel, "ws_gated_save", _desc, num_warps=4, maxnreg=MAX_REGS)
    if gluon
    else None
)


def ws_gated_save(x: torch.Tensor, wgu: torch.Tensor, act_id: int, out: torch.Tensor, g: torch.Tensor, u: torch.Tensor,
                  stages: int = STAGES) -> None:  # fmt: skip
    """ws_gated that also writes g = x Wg^T and u = x Wu^T into g and u ([M, N] each: the halves of the training
    forward's saved [g | u]). Each tile leaves as three stores (g, u, act(g) * u) through the half-width buffer."""
    M, K = x.shape
    N = out.shape[1]
    dev = x.device.index or 0
    programs = min(num_sms(dev), triton.cdiv(M, BM) * triton.cdiv(N, BN))
    half = (BM, BN // 2)
    consts = {"ACT": act_id, "GROUP_M": GROUP_M, "NUM_PROGS": programs, "STAGES": stages}
    consts |= {"CONSUMER_REGS": CONSUMER_REGS, "PRODUCER_REGS": PRODUCER_REGS}
    spec = (dev, x.dtype, M, N, K, x.stride(0), wgu.stride(0), out.stride(0), g.stride(0), u.stride(0), act_id, stages)
    spec += (programs,)
    spec += (x.data_ptr() & 15, wgu.data_ptr() & 15, out.data_ptr() & 15, g.data_ptr() & 15, u.data_ptr() & 15)
    args = ((x, (BM, BK)), (wgu, (2 * BN, BK)), (out, half), (g, half), (u, half), M, N, K)
    _SAVE_KERNEL.launch(spec, args, consts, (programs, 1, 1), dev)
