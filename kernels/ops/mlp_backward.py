"""The MLP backward's fused GEMM: dH = dY W_down (the gradient of the down projection's input) with the activation's
backward in the epilogue, for the training ops in kernels.models.custom_ops (glu_mlp_train / gelu_mlp_train).

Gated MLP (y = (act(g) * u) W_down^T, g = x Wg^T, u = x Wu^T), saved g and u ([M, h] each: the two halves of one
[M, 2h] tensor gu = [g | u], or two tensors; kernels.models.train_ops chooses by peak memory):
    dH = dY W_down                       [M, h]   (never written: it lives in the accumulator)
    dg = dH * u * act'(g),  du = dH * act(g)      (the epilogue reads g, u and writes dg, du OVER them, in place)
so the backward's elementwise pass (eager: 4-5 kernels; Liger: one kernel reading dH, g, u and writing dg, du) costs
no HBM round trip of dH ([M, h]: 90 MB at Llama-2-7B's 4096 x 11008 bf16). The [M, 2h] result [dg | du] then gives
    dX = dg Wg + du Wu       (cuBLAS mm + addmm: the second accumulates, no separate add of two [M, d] products)
    [dWg; dWu] = [dg | du]^T X      (ONE GEMM over gu, its [2h, d] output split by rows into the two weight gradients;
                                     two GEMMs where g and u are apart, du freed between them)
Plain MLP (y = gelu(pre) W2^T + b2, pre = x W1^T + b1), saved pre:  dpre = (dY W2) * gelu'(pre), written over pre.

Two kernels compute it: the Triton kernel here (the persistent TMA GEMM of kernels.ops.hopper_gemm with B read as
[BK, BN] tiles of W_down [d, h], no transposed copy, and the saved activations loaded and stored through TMA
descriptors of the same [BM, BN] tile) and the warp-specialised Gluon kernel of kernels.ops.ws_dh, which dh_grad runs
where a first-call measurement finds it faster (_use_ws). TMA needs 16-byte aligned rows: the wrappers use `applies`
and callers fall back to `torch_grad_epilogue` otherwise.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.ops import hopper_gemm, ws_dh, ws_gemm
from kernels.ops.activations import act_and_grad_f32, act_and_grad_torch, act_f32
from kernels.ops.gemm_common import INTERP_META, grouped_tile, m_bucket
from kernels.ops.launch import Tuned
from kernels.ops.triton_util import INTERPRETING, interpreting, num_sms, reraise_if_fatal, timed_both_ways

# epilogue modes (constexpr GRAD): the activation whose backward the epilogue applies
GRAD_IDS = {"gelu_tanh": 0, "silu": 1, "gelu": 2}
GATED_GRADS = ("gelu_tanh", "silu")


@triton.jit
def fuselens_mlp_bwd_dh_kernel(
    dy_desc, wd_desc, g_desc, u_desc,
    M, N, K,
    GRAD: tl.constexpr, GATED: tl.constexpr, OUT_DTYPE: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    PREFETCH: tl.constexpr,
):  # fmt: skip
    """acc = dY[tile rows] W_down[:, tile cols] (M x N = tokens x hidden, K = d_model), then in place:
    GATED: g, u = g_desc, u_desc tiles; g <- acc * u * act'(g), u <- acc * act(g).
    else:  pre = g_desc tile; pre <- acc * gelu'(pre) (u_desc unused).
    PREFETCH loads the tile's saved activations before its K loop instead of after (their latency behind the
    main loop's, at the cost of the registers that hold them through it); tuned like the tile shape."""
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BM, BN, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        if PREFETCH:
            g_in = g_desc.load([off_m, off_n])
            u_in = u_desc.load([off_m, off_n]) if GATED else g_in
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BK
            a = dy_desc.load([off_m, off_k])
            b = wd_desc.load([off_k, off_n])
            if UPCAST:  # interpreter only: see gemm_common.dot_flags
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        if not PREFETCH:
            g_in = g_desc.load([off_m, off_n])
            u_in = u_desc.load([off_m, off_n]) if GATED else g_in
        g = g_in.to(tl.float32)
        act, dact = act_and_grad_f32(g, GRAD)
        if GATED:
            u = u_in.to(tl.float32)
            g_desc.store([off_m, off_n], (acc * u * dact).to(OUT_DTYPE))
            u_desc.store([off_m, off_n], (acc * act).to(OUT_DTYPE))
        else:
            g_desc.store([off_m, off_n], (acc * dact).to(OUT_DTYPE))


def dh_config(bm, bn, bk, stages, warps, group_m=8, prefetch=False):
    return triton.Config(
        {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m, "PREFETCH": prefetch}, num_stages=stages, num_warps=warps
    )


# Shared memory (Triton 3.9 for sm_90, compiled without a GPU): the epilogue's g and u tiles go through shared memory
# as TMA loads and stores, 64 KB at 128 x 128 bf16 beside the pipeline's 32 KB per stage: 128 x 128 x 64 takes 164 KB
# with 3 stages, 197 KB with 4; 128 x 256 needs 279 KB with 3 (over the 227 KB limit), so it is not a candidate.
# 128 x 64 over 4 warps with 5 stages: 156 KB. Tuned per shape at the first call, by measurement.
DH_CONFIGS = [
    dh_config(128, 128, 64, 4, 8),
    dh_config(128, 128, 64, 3, 8, group_m=16),
    dh_config(128, 128, 64, 4, 8, group_m=16),
    dh_config(128, 64, 64, 5, 4),
    dh_config(128, 128, 64, 3, 8, prefetch=True),
    dh_config(128, 128, 64, 3, 8, group_m=16, prefetch=True),
]
_dh_tuned = Tuned(fuselens_mlp_bwd_dh_kernel, DH_CONFIGS, "mlp_bwd_dh_tma")


def applies(dy: torch.Tensor, w_down: torch.Tensor, saved, activation: str) -> bool:
    """The TMA kernel runs this backward: fp16/bf16, M > 64, 16-byte aligned rows of dY, W_down and each saved
    activation (for [g | u] also the u half's start: hidden a multiple of 8), Hopper or the interpreter."""
    if not hopper_gemm.usable(dy, w_down) or w_down.dtype != dy.dtype:
        return False
    es = dy.element_size()
    return all(
        t.dtype == dy.dtype and t.stride(1) == 1 and (t.stride(0) * es) % 16 == 0 and t.data_ptr() % 16 == 0
        for t in _halves(saved, w_down, activation)
    )


def fused_dh_grad(dy: torch.Tensor, w_down: torch.Tensor, saved, activation: str, scratch=False) -> None:
    """In place, through the TMA kernel (callers check `applies`): for a gated activation the saved g and u (`saved`:
    [g | u] [M, 2h] or the pair (g, u)) become dg and du; for "gelu" saved = pre [M, h] becomes dpre."""
    M, K = dy.shape
    N = w_down.shape[1]
    gated = activation in GATED_GRADS
    g, u = _halves(saved, w_down, activation)
    dev = dy.get_device()
    n_sms = 4 if interpreting() else num_sms(dev)
    consts = {
        "GRAD": GRAD_IDS[activation],
        "GATED": gated,
        "OUT_DTYPE": hopper_gemm.TL_DTYPES[dy.dtype],
        "UPCAST": interpreting() and dy.dtype == torch.bfloat16,
        "NUM_SMS": n_sms,
    }

    def args(cfg):
        bm, bn, bk = cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"]
        return ((dy, (bm, bk)), (w_down, (bk, bn)), (g, (bm, bn)), (u, (bm, bn)), M, N, K)

    key = dh_key(dy, w_down, saved, activation)
    if not INTERPRETING and not scratch and key not in _dh_tuned.cache:
        # The kernel writes over its input, and tuning runs every config many times: tune on a scratch copy (whose
        # values end up meaningless), then run once, tuned, on the real tensor.
        fused_dh_grad(dy, w_down, _clone(saved), activation, scratch=True)
    _dh_tuned.launch(
        (dev, dy.dtype, GRAD_IDS[activation], M, N, K, dy.stride(0), g.stride(0), u.stride(0), w_down.stride(0)),
        lambda: key,
        args,
        lambda cfg: consts,
        lambda cfg: (min(n_sms, triton.cdiv(M, cfg.kwargs["BM"]) * triton.cdiv(N, cfg.kwargs["BN"])), 1, 1),
        dev,
        interp_config=triton.Config({**INTERP_META, "PREFETCH": _INTERP_PREFETCH}) if INTERPRETING else None,
    )


_INTERP_PREFETCH = False  # tests flip it to run the prefetching epilogue under the interpreter


def dh_key(dy: torch.Tensor, w_down: torch.Tensor, saved, activation: str) -> tuple:
    """The dH kernels' tuning key (the Triton kernel's config, the Gluon choice): device, dtype, activation, row
    bucket, h, K and the saved activations' row stride, which tells [g | u] (2h) from g, u apart (h): the same shape
    in the two layouts is measured once each (the apart layout runs where x needs its gradient and the joint one
    where it does not, at the same shape)."""
    g, _u = _halves(saved, w_down, activation)
    return (dy.get_device(), dy.dtype, GRAD_IDS[activation], m_bucket(dy.shape[0]), w_down.shape[1], dy.shape[1],
            g.stride(0))  # fmt: skip


def torch_grad_epilogue(dy: torch.Tensor, w_down: torch.Tensor, saved, activation: str) -> None:
    """fused_dh_grad's result without the TMA kernel (fp32, unaligned rows, M <= 64, CPU, pre-Hopper): cuBLAS dH,
    then the activation backward in fp32 torch ops, written over `saved`."""
    dh = (dy @ w_down).float()
    if activation in GATED_GRADS:
        g_out, u_out = _halves(saved, w_down, activation)
        g, u = g_out.float(), u_out.float()
        act, dact = act_and_grad_torch(g, activation)
        g_out.copy_(dh * u * dact)
        u_out.copy_(dh * act)
    else:
        _, dact = act_and_grad_torch(saved.float(), activation)
        saved.copy_(dh * dact)


def dh_grad(dy: torch.Tensor, w_down: torch.Tensor, saved, activation: str) -> str:
    """The epilogue's result written over `saved` ([g | u], the pair (g, u), or pre), through a TMA kernel where one
    applies; returns which ran: "ws"
    (the warp-specialised Gluon kernel, kernels.ops.ws_dh, where the first call's measurement found it faster),
    "tma" (the Triton kernel) or "torch"."""
    if activation not in GRAD_IDS:
        raise ValueError(f"no backward for activation {activation!r}; expected one of {sorted(GRAD_IDS)}")
    if applies(dy, w_down, saved, activation):
        key = dh_key(dy, w_down, saved, activation)
        if key not in FAILED:
            if not INTERPRETING and key not in _dh_tuned.cache:
                try:  # tuning runs on a scratch copy (fused_dh_grad): a failure here leaves `saved` untouched
                    fused_dh_grad(dy, w_down, _clone(saved), activation, scratch=True)
                except RuntimeError as exc:  # no config compiled (shared memory, registers) on this GPU / Triton
                    reraise_if_fatal(exc, "the Triton dH kernel's tuning")
                    FAILED[key] = _why(exc)
            if key not in FAILED:
                cfg = _use_ws(key, dy, w_down, saved, activation)
                if cfg is not None:
                    try:  # it ran at this key's measurement; a launch failing now leaves `saved` untouched
                        ws_dh.ws_dh_grad(dy, w_down, *_halves(saved, w_down, activation), GRAD_IDS[activation],
                                         activation in GATED_GRADS, *cfg)  # fmt: skip
                        return "ws"
                    except Exception as exc:
                        reraise_if_fatal(exc, f"the Gluon dH kernel {cfg}")
                        WS_FAILED[(key, cfg)] = _why(exc)
                        WS_CHOICE[key] = None
                fused_dh_grad(dy, w_down, saved, activation)
                return "tma"
        torch_grad_epilogue(dy, w_down, saved, activation)
        return "torch (TMA kernel failed: " + FAILED[key] + ")"
    torch_grad_epilogue(dy, w_down, saved, activation)
    return "torch"


def _halves(saved, w_down: torch.Tensor, activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, u): a gated MLP's saved pair as it is, or the [M, h] halves of its saved [g | u]; (pre, pre) for the plain
    MLP."""
    if isinstance(saved, tuple):
        return saved
    n = w_down.shape[1]
    return (saved[:, :n], saved[:, n:]) if activation in GATED_GRADS else (saved, saved)


def _clone(saved):
    """A scratch copy of the saved activations (a tensor or a (g, u) pair) for timing kernels that write over them."""
    return tuple(t.clone() for t in saved) if isinstance(saved, tuple) else saved.clone()


# Where the warp-specialised kernels (ws_dh for dH, ws_gemm's saving dual GEMM) are candidates: sm_90 with Gluon
# (ws_dh.applies / ws_gemm.applies), from 1024 rows (below that the 64-row tiles leave most of 132 SMs' second
# consumer idle: 1024 x 3072 is 384 tiles, under 3 per SM). The saving dual GEMM runs up to K = 2048
# (hopper_gemm.WS_MAX_K: at Llama-3-8B it measured 2541.8 vs 2506.7 us for Triton, H200). The dH kernel runs at any
# K, with the configs dh_configs gives: at K = 4096 only its 128-row tiles (the 64-row ones fetch each W_down tile
# twice as often: 661.7 vs 576.8 us for Triton at Llama-2-7B, H200). Tools forcing a Triton config get the Triton
# kernel, and so does a call whose shape is outside these bounds even where its row bucket holds a choice.
WS_MIN_ROWS = 1024
WS_MAX_K = hopper_gemm.WS_MAX_K
WS_CHOICE: dict = {}  # tuning key -> the Gluon kernel's (rows, stages, group_m) where it measured fastest, else None
WS_TIMINGS: dict = {}  # same key -> {"triton": us, "(rows, stages, group_m)": us, ...} from that measurement
WS_FAILED: dict = {}  # (tuning key, config) -> why that Gluon config did not run (compile or launch error)


def _ws_candidate(x: torch.Tensor, forcing: bool, applies, max_k: int | None = WS_MAX_K) -> bool:
    """The bounds above: rows, K (up to max_k; None: any), no forced Triton config, the Gluon kernel's conditions."""
    k_ok = max_k is None or x.shape[1] <= max_k
    return x.shape[0] >= WS_MIN_ROWS and k_ok and not forcing and applies(x)


def dh_configs(k: int) -> list[tuple]:
    """The Gluon dH configs the first-call measurement times at reduction depth K (dY's columns = d_model)."""
    return [cfg for cfg in ws_dh.ALL_CONFIGS if k <= WS_MAX_K or cfg[0] == 128]


def _use_ws(key, dy: torch.Tensor, w_down: torch.Tensor, saved: torch.Tensor, activation: str) -> tuple | None:
    """The Gluon kernel's (rows, stages, group_m) where it runs this call, else None: measured once per key, the tuned
    Triton kernel and each of dh_configs(K) on one scratch copy of `saved` (all write over their input; values drift,
    times do not), two passes in opposite orders. Inside CUDA-graph capture nothing is timed: a choice already made
    runs, else the Triton kernel. A Gluon config that fails to run is left out (WS_FAILED says why)."""
    if not _ws_candidate(dy, _dh_tuned.forcing, ws_dh.applies, max_k=None):
        return None
    if key in WS_CHOICE:
        return WS_CHOICE[key]
    if torch.cuda.is_current_stream_capturing():
        return None
    scratch = _clone(saved)
    gid, gated = GRAD_IDS[activation], activation in GATED_GRADS
    halves = _halves(scratch, w_down, activation)
    originals = _halves(saved, w_down, activation)
    # the Triton kernel's result on these inputs: each Gluon config's first launch must give it (to the bit in every
    # run so far, bench/results/train_dh_configs_h100_80gb_hbm3.md); one that computes something else is left out
    # with the reason, never timed or chosen
    want = _halves(_clone(saved), w_down, activation)
    fused_dh_grad(dy, w_down, want, activation, scratch=True)
    calls = {"triton": lambda: fused_dh_grad(dy, w_down, scratch, activation, scratch=True)}
    for cfg in dh_configs(dy.shape[1]):
        try:
            ws_dh.ws_dh_grad(dy, w_down, *halves, gid, gated, *cfg)
            torch.cuda.synchronize()  # first call only: a fault surfaces here, named after its config
        except Exception as exc:  # out of resources, or a Gluon without this API
            reraise_if_fatal(exc, f"the Gluon dH kernel {cfg}'s first launch")
            WS_FAILED[(key, cfg)] = _why(exc)
            continue
        wrong = result_differs(halves, want)
        for t, o in zip(halves, originals, strict=True):
            t.copy_(o)
        if wrong:
            WS_FAILED[(key, cfg)] = f"its result differs from the Triton kernel's: {wrong}"
            continue
        calls[cfg] = lambda cfg=cfg: ws_dh.ws_dh_grad(dy, w_down, *halves, gid, gated, *cfg)
    best = _keep_fastest(key, calls, WS_TIMINGS)
    WS_CHOICE[key] = None if best == "triton" else best
    return WS_CHOICE[key]


# |got - want|_max / |want|_max above which a candidate kernel's result is not the reference's: bf16 rounds at 2^-8 of
# an element's magnitude, so a different accumulation order moves the largest element by a few 1e-3 of the largest;
# a wrong tile (stale or half-loaded buffers) moves it by O(1)
RESULT_TOL = 2e-2
_ROWS_PER_CHECK = 512  # the comparison's fp32 temporaries: row blocks (at most 512 x 2h x 4 B x 2), not [M, 2h]


def result_differs(got, want) -> str | None:
    """None where every tensor of `got` matches `want`'s within RESULT_TOL (max-norm, relative), else what differs."""
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        worst, scale = 0.0, 0.0
        for r in range(0, a.shape[0], _ROWS_PER_CHECK):
            ab, bb = a[r : r + _ROWS_PER_CHECK].float(), b[r : r + _ROWS_PER_CHECK].float()
            if not torch.isfinite(ab).all():
                return f"output {i} has non-finite values"
            worst = max(worst, float((ab - bb).abs().max()))
            scale = max(scale, float(bb.abs().max()))
        if worst > RESULT_TOL * max(scale, 1e-30):
            return f"output {i}: max |diff| {worst:.3g} against max |ref| {scale:.3g}"
    return None


def _keep_fastest(key, calls: dict, timings: dict):
    """The name of the fastest of `calls` ({name: callable}, "triton" among them), timed both ways
    (triton_util.timed_both_ways); their µs are kept in timings[key]. A lone Triton call is not timed."""
    if len(calls) == 1:
        return "triton"
    times = timed_both_ways(calls)
    timings[key] = {str(k): round(v, 1) for k, v in times.items()}
    return min(times, key=times.get)


def _why(exc: Exception) -> str:
    """One line for a kernel that could not compile or launch (FAILED, WS_FAILED)."""
    return f"{type(exc).__name__}: {str(exc)[:160]}"


# tuning key -> why the TMA kernel could not run there (the bench shows it in its "dH epilogue" column)
FAILED: dict[tuple, str] = {}


# ---- the training forward's gate/up GEMM: the dual GEMM that also keeps g and u ----


@triton.jit
def fuselens_dual_gemm_glu_save_kernel(
    x_desc, wgu_desc, out_desc, g_desc, u_desc,
    M, N, K,
    ACT: tl.constexpr, OUT_DTYPE: tl.constexpr, UPCAST: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    ROWS: tl.constexpr,
):  # fmt: skip
    """hopper_gemm.fuselens_dual_gemm_glu_kernel (one [BM, 2 BN] accumulator over the interleaved weight) whose
    epilogue also stores g and u, the two halves a backward needs, beside act(g) * u."""
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BM, BN, GROUP_M)
        acc = hopper_gemm._gated_tile_acc(x_desc, wgu_desc, pid_m * BM, pid_n, 0, k_tiles, UPCAST, BM, BN, BK)
        acc = tl.permute(tl.reshape(acc, (BM, BN // ROWS, 2, ROWS)), (0, 1, 3, 2))
        g, u = tl.split(tl.reshape(acc, (BM, BN, 2)))
        g_desc.store([pid_m * BM, pid_n * BN], g.to(OUT_DTYPE))
        u_desc.store([pid_m * BM, pid_n * BN], u.to(OUT_DTYPE))
        out_desc.store([pid_m * BM, pid_n * BN], (act_f32(g, ACT) * u).to(OUT_DTYPE))


def save_config(bm, bn, bk, stages, warps, group_m=8):
    return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m}, num_stages=stages, num_warps=warps)


# Shared memory (Triton 3.9, sm_90, bf16): three output tiles go out through TMA stores, so the pipeline is shallower
# than the inference kernel's: 128 x 128 outputs (256-row weight tiles) 131 KB with 2 stages, 179 KB with 3, 227 KB
# with 4 (at the limit: left out); 128 x 64 outputs 147 KB with 4 stages, 180 KB with 5.
SAVE_CONFIGS = [
    save_config(128, 128, 64, 3, 8),
    save_config(128, 128, 64, 3, 8, group_m=16),
    save_config(128, 64, 64, 4, 8),
    save_config(128, 64, 64, 5, 8),
]
_save_tuned = Tuned(fuselens_dual_gemm_glu_save_kernel, SAVE_CONFIGS, "dual_gemm_glu_save_tma")


def save_applies(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> bool:
    """The dual GEMM with saved halves runs: hopper_gemm's TMA conditions and hidden a multiple of the interleave's
    8-row blocks (so the u half of gu starts 16-byte aligned too)."""
    return hopper_gemm.usable(x, w_gate, w_up) and w_gate.shape[0] % hopper_gemm.GATE_UP_ROWS == 0


def dual_gemm_save(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str, apart: bool = False):
    """(h, saved): h = act(x Wg^T) * (x Wu^T) [M, N] and the saved g = x Wg^T, u = x Wu^T, as gu = [g | u] [M, 2N]
    or, `apart`, as the pair (g, u) of two [M, N] tensors; one kernel (callers check save_applies). The interleaved
    weight is built at every call: in training the weights change every step."""
    from kernels.ops.activations import epilogue_act_id

    M, K = x.shape
    N = w_gate.shape[0]
    rows = hopper_gemm.GATE_UP_ROWS
    wgu = hopper_gemm.interleave_gate_up(w_gate, w_up, rows)
    out = x.new_empty((M, N))
    if apart:
        g, u = x.new_empty((M, N)), x.new_empty((M, N))
        saved = (g, u)
    else:
        saved = x.new_empty((M, 2 * N))
        g, u = saved[:, :N], saved[:, N:]
    act = epilogue_act_id(activation, x.dtype)
    consts = save_consts(x, act, rows)
    key = (x.get_device(), x.dtype, act, m_bucket(M), N, K)
    if _use_ws_save(key, x, wgu, out, g, u, consts):
        ws_gemm.ws_gated_save(x, wgu, act, out, g, u)
        return out, saved
    _launch_save(x, wgu, out, g, u, consts)
    return out, saved


def save_consts(x: torch.Tensor, act: int, rows: int) -> dict:
    """The Triton save kernel's constexprs for input x, epilogue activation id `act` and the interleave's block rows."""
    return {
        "ACT": act,
        "OUT_DTYPE": hopper_gemm.TL_DTYPES[x.dtype],
        "UPCAST": interpreting() and x.dtype == torch.bfloat16,
        "NUM_SMS": 4 if interpreting() else num_sms(x.get_device()),
        "ROWS": rows,
    }


def _launch_save(x, wgu, out, g, u, consts: dict) -> None:
    """The Triton save kernel (fuselens_dual_gemm_glu_save_kernel) into out, g, u, its config tuned per shape."""
    M, K = x.shape
    N = out.shape[1]
    dev = x.get_device()
    n_sms = consts["NUM_SMS"]
    dt = x.dtype
    act = consts["ACT"]

    def args(cfg):
        bm, bn, bk = cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"]
        return ((x, (bm, bk)), (wgu, (2 * bn, bk)), (out, (bm, bn)), (g, (bm, bn)), (u, (bm, bn)), M, N, K)

    _save_tuned.launch(
        (dev, dt, act, M, N, K, g.stride(0), u.stride(0)),  # the saved halves of one gu, or two tensors
        lambda: (dev, dt, act, m_bucket(M), N, K),
        args,
        lambda cfg: consts,
        lambda cfg: (min(n_sms, triton.cdiv(M, cfg.kwargs["BM"]) * triton.cdiv(N, cfg.kwargs["BN"])), 1, 1),
        dev,
        interp_config=triton.Config(dict(INTERP_META)) if INTERPRETING else None,
    )


SAVE_WS_CHOICE: dict = {}  # (device, dtype, act, row bucket, N, K) -> True where ws_gated_save measured faster
SAVE_WS_TIMINGS: dict = {}  # same key -> {"triton": us, "ws": us}


def _use_ws_save(key, x, wgu, out, g, u, consts: dict) -> bool:
    """Whether ws_gemm.ws_gated_save runs this call: within _ws_candidate's bounds and with the interleave's 8-row
    blocks, measured once per key against the tuned Triton save kernel as _use_ws measures the dH kernel."""
    if consts["ROWS"] != ws_gemm.ROWS or not _ws_candidate(x, _save_tuned.forcing, ws_gemm.applies):
        return False
    if key in SAVE_WS_CHOICE:
        return SAVE_WS_CHOICE[key]
    if torch.cuda.is_current_stream_capturing():
        return False
    calls = {"triton": lambda: _launch_save(x, wgu, out, g, u, consts)}
    calls["triton"]()  # tuned first, by its own first call
    want = (out.clone(), g.clone(), u.clone())  # its result: the Gluon kernel's first must match (as _use_ws checks)
    try:
        ws_gemm.ws_gated_save(x, wgu, consts["ACT"], out, g, u)
        torch.cuda.synchronize()  # first call only: a fault surfaces here, named after this kernel
        wrong = result_differs((out, g, u), want)
        if wrong:  # (the caller then runs the Triton kernel, over these outputs)
            WS_FAILED[(key, "save")] = f"its result differs from the Triton kernel's: {wrong}"
        else:
            calls["ws"] = lambda: ws_gemm.ws_gated_save(x, wgu, consts["ACT"], out, g, u)
    except Exception as exc:  # out of resources, or a Gluon without this API: the Triton kernel it is
        reraise_if_fatal(exc, "the Gluon save kernel's first launch")
        WS_FAILED[(key, "save")] = _why(exc)
    SAVE_WS_CHOICE[key] = _keep_fastest(key, calls, SAVE_WS_TIMINGS) == "ws"
    return SAVE_WS_CHOICE[key]
