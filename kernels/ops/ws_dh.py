"""Warp-specialised (ping-pong) MLP backward GEMM for Hopper (sm_90), in Gluon: dH = dY W_down with the activation's
backward in the epilogue, the epilogue of one tile running while the tensor cores work on the next.

Same result as kernels.ops.mlp_backward.fuselens_mlp_bwd_dh_kernel (in place over the saved activations):
    GATED: g, u <- dH * u * act'(g), dH * act(g)        else: pre <- dH * gelu'(pre)
Why a second kernel: the Triton kernel runs its epilogue after each tile's K loop on the same warps, and this
epilogue moves four [BM, BN] tiles through HBM (g, u in; dg, du out). At the HF shape (8192 x 768 -> 3072, bf16, H100)
that kernel took 147 us for a 38.6 GFLOP GEMM whose cuBLAS time is ~52 us and whose epilogue traffic, 201 MB, is
~60 us at 3.35 TB/s: the two ran one after the other. Here (the split of kernels.ops.ws_gemm):
  - one producer warp issues, per tile, the TMA loads of the tile's saved g and u into its consumer's epilogue
    buffers (once that consumer has stored its previous tile from them: `epi_empty`); a second one issues the K
    loop's loads of dY [BM, BK] and W_down [BK, BN] (W_down read as it lies, [d, h]: no transposed copy) into a
    ring of STAGES stages;
  - two consumer warpgroups take alternate output tiles; their main loops take turns (`done`), so one consumer's
    epilogue (read g, u from shared memory, act and act' in fp32, write dg, du over them, TMA-store both) runs under
    the other's main loop, and the g, u loads were issued a whole tile ahead.
Each thread reads and writes the same elements of the epilogue buffers (one distributed layout for load and store),
so dg and du go back into the buffers they were computed from.

Shared memory at BN 128, 5 stages: 5 x (8 KB dY + 16 KB W_down) + 2 consumers x (16 KB g + 16 KB u) = 184 KB.
Applies where ws_gemm.applies does (sm_90, fp16/bf16, Gluon present, not interpreting); TMA alignment is checked by
the caller (mlp_backward.applies).
"""

from __future__ import annotations

import torch
import triton

from kernels.ops import ws_gemm
from kernels.ops.activations import act_and_grad_f32
from kernels.ops.launch import Fixed
from kernels.ops.triton_util import num_sms

gluon = ws_gemm.gluon
if gluon is not None:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
    )

BM, BN, BK = 64, 128, 64  # output tile per consumer (one warpgroup: wgmma M = 64) and K step
STAGES = 5
GROUP_M = 16
# (rows per consumer tile, stages, group_m) the first-call measurement tries (mlp_backward._use_ws; mlp_backward.
# dh_configs picks by K). 64-row tiles with a buffer pair per consumer (6 stages: 208 KB of shared memory):
CONFIGS = [(64, 5, 16), (64, 4, 8), (64, 6, 32), (64, 3, 16)]
# 128-row tiles (two m64 wgmmas per K step: half the W_down traffic per output of 64-row tiles, the K = 4096 rows'
# lever). With 4 stages (4 x 32 KB) only one epilogue buffer pair (64 KB) fits beside the ring, and both consumers
# share it (epi_shared). H100, bf16 (bench/results/train_dh_configs_h100_80gb_hbm3.md): Llama-2-7B dH 597.1 us vs
# Triton 624.6 (the 64-row configs 745-1127), Llama-3-8B 1528.9 vs 1605.4, TinyLlama 101.2 vs 108.9 (best 64-row);
# HF GEGLU 143.5 vs 114.2 and BERT 210+ vs 102, where 64-row tiles win. A pair per consumer needs the ring cut to
# 3 or 2 stages (3 x 32 + 2 x 64 = 224 KB), and that costs more than the shared pair (the same file's second run:
# HF 157.6 / 195.2 us vs 142.9, Llama-2-7B 746.9 / 1252.1 vs 598.3), so no such config is offered. (128, 3, 16) with a
# shared pair was never fastest either.
WIDE_CONFIGS = [(128, 4, 8), (128, 4, 16)]
# Every config the first-call measurement may try (mlp_backward.dh_configs picks by K). An epilogue in registers
# (g, u read and dg, du written by pointer in the accumulator's layout, no epilogue buffers, so the whole of shared
# memory holds the ring: 9 x 24 KB at 64 rows, 7 x 32 KB at 128) measured slower at every row on the H200 (HF
# 156.6-223.1 us against 103.5; Llama-2-7B 611.3-678.7 against 557.4; bench/results/train_dh_configs_h200.md) and is
# not built: the TMA loads of g and u a tile ahead are what hides the epilogue, not more ring stages.
ALL_CONFIGS = CONFIGS + WIDE_CONFIGS
# Dynamic shared memory a block may opt into on sm_90 (227 KB)
SMEM_LIMIT_BYTES = 232_448


def epi_shared(rows: int, stages: int, elem_bytes: int = 2) -> bool:
    """Whether the two consumers share one epilogue buffer pair: where a pair each (g and u, [rows, BN]) does not fit
    in shared memory beside the ring of `stages` dY [rows, BK] and W_down [BK, BN] tiles."""
    ring = stages * (rows * BK + BK * BN) * elem_bytes
    return ring + 2 * 2 * rows * BN * elem_bytes > SMEM_LIMIT_BYTES


# 10 warps (4 + 4 + 1 + 1), allocated as 3 warpgroups x 128 threads x 168 registers, fit an SM's 65,536; setmaxnreg
# moves the producers' share to the consumers: the fp32 accumulator, g and u, and the epilogue's fp32 temporaries
CONSUMER_REGS, PRODUCER_REGS, MAX_REGS = 232, 24, 168

if gluon is not None:

    @gluon.jit
    def _consume(descs, bufs, bars, M, N, K, WHICH: gl.constexpr, GRAD: gl.constexpr, GATED: gl.constexpr,
                 GROUP_M: gl.constexpr, NUM_PROGS: gl.constexpr, STAGES: gl.constexpr,
                 EPI_SHARED: gl.constexpr):  # fmt: skip
        """Consumer WHICH (0 or 1): local tiles WHICH, WHICH + 2, ... of this program."""
        dy_desc, w_desc, g_desc, u_desc = descs
        a_bufs, b_bufs, g_bufs, u_bufs = bufs
        ready, empty, done, epi_ready, epi_empty = bars
        BM: gl.constexpr = dy_desc.block_type.shape[0]
        BK: gl.constexpr = dy_desc.block_type.shape[1]
        BN: gl.constexpr = w_desc.block_type.shape[1]
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
        pid = gl.program_id(0)
        k_tiles = gl.cdiv(K, BK)
        n_local = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - pid, NUM_PROGS)
        QUARTERS: gl.constexpr = BM > 64  # 128-row tiles: the epilogue in 64 x 64 quarters (registers)
        if EPI_SHARED:  # one epilogue buffer pair for both consumers (epi_shared)
            g_smem = g_bufs.index(0)
            u_smem = u_bufs.index(0)
        else:
            g_smem = g_bufs.index(WHICH)
            u_smem = u_bufs.index(WHICH)
        for j in range(WHICH, n_local, 2):
            off_m, off_n = ws_gemm._tile(pid + j * NUM_PROGS, M, N, BM, BN, GROUP_M)
            acc = ws_gemm.main_loop(a_bufs, b_bufs, ready, empty, done, j, k_tiles,
                                    gl.zeros((BM, BN), gl.float32, layout), WHICH, STAGES, False)  # fmt: skip
            # this tile's g and u have landed: each consumer has its own ready barrier, completed once per tile of
            # its own, also where the two share one buffer pair (EPI_SHARED). One barrier for both would let a
            # consumer whose main loop outruns the other's load (small K) pass on the parity of the tile before
            # its own: it waits every second phase only, and a wait returns once the other parity's phase is done.
            mbarrier.wait(epi_ready.index(WHICH), (j // 2) & 1)
            # 128-row tiles in four 64 x 64 quarters: a 128 x 128 tile's g, u and temporaries beside the accumulator spill
            if QUARTERS:
                quarter: gl.constexpr = gl.NVMMADistributedLayout(
                    version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN // 2, 16]
                )
                q00, q01, q10, q11 = _quarters(acc, quarter)
                R: gl.constexpr = BM // 2
                C: gl.constexpr = BN // 2
                _epilogue(q00, g_smem.slice(0, R, 0).slice(0, C, 1), u_smem.slice(0, R, 0).slice(0, C, 1), quarter,
                          GRAD, GATED)  # fmt: skip
                _epilogue(q01, g_smem.slice(0, R, 0).slice(C, C, 1), u_smem.slice(0, R, 0).slice(C, C, 1), quarter,
                          GRAD, GATED)  # fmt: skip
                _epilogue(q10, g_smem.slice(R, R, 0).slice(0, C, 1), u_smem.slice(R, R, 0).slice(0, C, 1), quarter,
                          GRAD, GATED)  # fmt: skip
                _epilogue(q11, g_smem.slice(R, R, 0).slice(C, C, 1), u_smem.slice(R, R, 0).slice(C, C, 1), quarter,
                          GRAD, GATED)  # fmt: skip
            else:
                _epilogue(acc, g_smem, u_smem, layout, GRAD, GATED)
            fence_async_shared()
            tma.async_copy_shared_to_global(g_desc, [off_m, off_n], g_smem)
            if GATED:
                tma.async_copy_shared_to_global(u_desc, [off_m, off_n], u_smem)
            tma.store_wait(pendings=0)  # the buffers are read out: the producer may load the next tile's g, u
            if EPI_SHARED:
                mbarrier.arrive(epi_empty.index(0))
            else:
                mbarrier.arrive(epi_empty.index(WHICH))

    @gluon.jit
    def _quarters(acc, quarter: gl.constexpr):
        """A 128-row accumulator's four 64 x BN/2 quarters (rows 0-63 left and right, then rows 64-127), moved
        between registers only: each is a subset of the same threads' accumulator registers."""
        BM: gl.constexpr = acc.shape[0]
        BN: gl.constexpr = acc.shape[1]
        R: gl.constexpr = BM // 2
        C: gl.constexpr = BN // 2
        top, bottom = gl.split(gl.permute(gl.reshape(acc, (2, R, BN)), (1, 2, 0)))
        t0, t1 = gl.split(gl.permute(gl.reshape(top, (R, 2, C)), (0, 2, 1)))
        b0, b1 = gl.split(gl.permute(gl.reshape(bottom, (R, 2, C)), (0, 2, 1)))
        return (gl.convert_layout(t0, quarter), gl.convert_layout(t1, quarter), gl.convert_layout(b0, quarter),
                gl.convert_layout(b1, quarter))  # fmt: skip

    @gluon.jit
    def _epilogue(acc, g_smem, u_smem, layout: gl.constexpr, GRAD: gl.constexpr, GATED: gl.constexpr):
        """g, u (shared memory, `layout` = acc's) <- acc * u * act'(g), acc * act(g); or g <- acc * act'(g) (plain)."""
        g = g_smem.load(layout).to(gl.float32)
        act, dact = act_and_grad_f32(g, GRAD)
        if GATED:
            u = u_smem.load(layout).to(gl.float32)
            g_smem.store((acc * u * dact).to(g_smem.dtype))
            u_smem.store((acc * act).to(g_smem.dtype))
        else:
            g_smem.store((acc * dact).to(g_smem.dtype))

    @gluon.jit
    def _consumer0(descs, bufs, bars, M, N, K, GRAD: gl.constexpr, GATED: gl.constexpr, GROUP_M: gl.constexpr,
                   NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, EPI_SHARED: gl.constexpr):  # fmt: skip
        _consume(descs, bufs, bars, M, N, K, 0, GRAD, GATED, GROUP_M, NUM_PROGS, STAGES, EPI_SHARED)

    @gluon.jit
    def _consumer1(descs, bufs, bars, M, N, K, GRAD: gl.constexpr, GATED: gl.constexpr, GROUP_M: gl.constexpr,
                   NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, EPI_SHARED: gl.constexpr):  # fmt: skip
        _consume(descs, bufs, bars, M, N, K, 1, GRAD, GATED, GROUP_M, NUM_PROGS, STAGES, EPI_SHARED)

    @gluon.jit
    def _producer(descs, bufs, bars, M, N, K, GRAD: gl.constexpr, GATED: gl.constexpr, GROUP_M: gl.constexpr,
                  NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, EPI_SHARED: gl.constexpr):  # fmt: skip
        dy_desc, w_desc, g_desc, u_desc = descs
        a_bufs, b_bufs, g_bufs, u_bufs = bufs
        ready, empty, done, epi_ready, epi_empty = bars
        BM: gl.constexpr = dy_desc.block_type.shape[0]
        BK: gl.constexpr = dy_desc.block_type.shape[1]
        BN: gl.constexpr = w_desc.block_type.shape[1]
        pid = gl.program_id(0)
        k_tiles = gl.cdiv(K, BK)
        n_local = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - pid, NUM_PROGS)
        for j in range(n_local):
            off_m, off_n = ws_gemm._tile(pid + j * NUM_PROGS, M, N, BM, BN, GROUP_M)
            _load_ring(dy_desc, w_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, j, k_tiles, STAGES)

    @gluon.jit
    def _epi_producer(descs, bufs, bars, M, N, K, GRAD: gl.constexpr, GATED: gl.constexpr, GROUP_M: gl.constexpr,
                      NUM_PROGS: gl.constexpr, STAGES: gl.constexpr, EPI_SHARED: gl.constexpr):  # fmt: skip
        """Its own warp: each tile's saved g and u into the epilogue buffers as soon as they are free, so a wait for
        a consumer's epilogue never holds back the K loop's loads (_producer)."""
        dy_desc, w_desc, g_desc, u_desc = descs
        a_bufs, b_bufs, g_bufs, u_bufs = bufs
        ready, empty, done, epi_ready, epi_empty = bars
        BM: gl.constexpr = dy_desc.block_type.shape[0]
        BN: gl.constexpr = w_desc.block_type.shape[1]
        pid = gl.program_id(0)
        n_local = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - pid, NUM_PROGS)
        for j in range(n_local):
            off_m, off_n = ws_gemm._tile(pid + j * NUM_PROGS, M, N, BM, BN, GROUP_M)
            if EPI_SHARED:  # one buffer pair both consumers share: tile j's once tile j - 1 has been stored from it,
                # signalled on its consumer's ready barrier (_consume)
                _load_epilogue(g_desc, u_desc, g_bufs.index(0), u_bufs.index(0), epi_ready.index(j % 2),
                               epi_empty.index(0), off_m, off_n, (j & 1) ^ 1, GATED)  # fmt: skip
            else:  # a buffer pair per consumer: tile j's once tile j - 2 has been stored from it
                c = j % 2
                _load_epilogue(g_desc, u_desc, g_bufs.index(c), u_bufs.index(c), epi_ready.index(c),
                               epi_empty.index(c), off_m, off_n, ((j // 2) & 1) ^ 1, GATED)  # fmt: skip

    @gluon.jit
    def _load_epilogue(g_desc, u_desc, g_smem, u_smem, ready_bar, empty_bar, off_m, off_n, phase,
                       GATED: gl.constexpr):  # fmt: skip
        """The tile's saved g (and u) into its epilogue buffers, once their previous tile has been stored from them
        (`phase`: the parity to wait for; a fresh barrier passes the first wait at once)."""
        tile_bytes: gl.constexpr = g_desc.block_type.nbytes
        mbarrier.wait(empty_bar, phase)
        if GATED:
            mbarrier.expect(ready_bar, 2 * tile_bytes)
            tma.async_copy_global_to_shared(g_desc, [off_m, off_n], ready_bar, g_smem)
            tma.async_copy_global_to_shared(u_desc, [off_m, off_n], ready_bar, u_smem)
        else:
            mbarrier.expect(ready_bar, tile_bytes)
            tma.async_copy_global_to_shared(g_desc, [off_m, off_n], ready_bar, g_smem)

    @gluon.jit
    def _load_ring(dy_desc, w_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, j, k_tiles, STAGES: gl.constexpr):
        """Tile j's K loop operands, dY [BM, BK] and W_down [BK, BN] per step, into the ring."""
        BK: gl.constexpr = dy_desc.block_type.shape[1]
        nbytes: gl.constexpr = dy_desc.block_type.nbytes + w_desc.block_type.nbytes
        for k in range(k_tiles):
            pos = j * k_tiles + k
            s = pos % STAGES
            mbarrier.wait(empty.index(s), ((pos // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            tma.async_copy_global_to_shared(dy_desc, [off_m, k * BK], bar, a_bufs.index(s))
            tma.async_copy_global_to_shared(w_desc, [k * BK, off_n], bar, b_bufs.index(s))

    @gluon.jit
    def fuselens_mlp_bwd_dh_ws_kernel(dy_desc, w_desc, g_desc, u_desc, M, N, K, GRAD: gl.constexpr,
                                      GATED: gl.constexpr, GROUP_M: gl.constexpr, NUM_PROGS: gl.constexpr,
                                      STAGES: gl.constexpr, EPI_SHARED: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                                      PRODUCER_REGS: gl.constexpr):  # fmt: skip
        """dY [M, K] x W_down [K, N] with the activation backward applied in place to the g (and u) tiles; one program
        per SM, persistent."""
        BM: gl.constexpr = dy_desc.block_type.shape[0]
        BK: gl.constexpr = dy_desc.block_type.shape[1]
        BN: gl.constexpr = w_desc.block_type.shape[1]
        a_bufs = gl.allocate_shared_memory(dy_desc.dtype, [STAGES, BM, BK], dy_desc.layout)
        b_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES, BK, BN], w_desc.layout)
        EPI_BUFS: gl.constexpr = 1 if EPI_SHARED else 2
        g_bufs = gl.allocate_shared_memory(g_desc.dtype, [EPI_BUFS, BM, BN], g_desc.layout)
        u_bufs = gl.allocate_shared_memory(u_desc.dtype, [EPI_BUFS if GATED else 1, BM, BN], u_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        done = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        epi_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        epi_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        for i in gl.static_range(2):
            mbarrier.init(done.index(i), count=1)
            mbarrier.init(epi_ready.index(i), count=1)
            mbarrier.init(epi_empty.index(i), count=1)
        args = ((dy_desc, w_desc, g_desc, u_desc), (a_bufs, b_bufs, g_bufs, u_bufs),
                (ready, empty, done, epi_ready, epi_empty), M, N, K, GRAD, GATED, GROUP_M, NUM_PROGS,
                STAGES, EPI_SHARED)  # fmt: skip
        gl.warp_specialize(
            [(_consumer0, args), (_consumer1, args), (_producer, args), (_epi_producer, args)],
            [4, 1, 1],
            [CONSUMER_REGS, PRODUCER_REGS, PRODUCER_REGS],
        )


_KERNEL = Fixed(fuselens_mlp_bwd_dh_ws_kernel, "ws_dh", ws_gemm._desc, num_warps=4, maxnreg=MAX_REGS) if gluon else None


def applies(dy: torch.Tensor) -> bool:
    """Where this kernel can run (the caller, mlp_backward.applies, has checked TMA alignment and dtypes)."""
    return ws_gemm.applies(dy)


def ws_dh_grad(dy: torch.Tensor, w_down: torch.Tensor, g: torch.Tensor, u: torch.Tensor, grad_id: int, gated: bool,
               bm: int = BM, stages: int = STAGES, group_m: int = GROUP_M) -> None:  # fmt: skip
    """In place: g (and u), [M, N] views of the saved activations, become the activation backward of dY W_down.
    For a plain MLP pass u = g and gated=False."""
    M, K = dy.shape
    N = w_down.shape[1]
    dev = dy.device.index or 0
    programs = min(num_sms(dev), triton.cdiv(M, bm) * triton.cdiv(N, BN))
    consts = {"GRAD": grad_id, "GATED": gated, "GROUP_M": group_m, "NUM_PROGS": programs, "STAGES": stages}
    consts["EPI_SHARED"] = epi_shared(bm, stages, dy.element_size())
    consts |= {"CONSUMER_REGS": CONSUMER_REGS, "PRODUCER_REGS": PRODUCER_REGS}
    # what the compiled kernel and its launch depend on (ws_gemm.ws_gated's spec, for these four tensors)
    spec = (dev, dy.dtype, M, N, K, dy.stride(0), w_down.stride(0), g.stride(0), grad_id, gated, bm, stages, group_m)
    spec += (programs, u.stride(0))
    spec += (dy.data_ptr() & 15, w_down.data_ptr() & 15, g.data_ptr() & 15, u.data_ptr() & 15)
    args = ((dy, (bm, BK)), (w_down, (BK, BN)), (g, (bm, BN)), (u, (bm, BN)), M, N, K)
    _KERNEL.launch(spec, args, consts, (programs, 1, 1), dev)
