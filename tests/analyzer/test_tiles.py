"""analyzer.opinfo.tiles: the tile walk of a GEMM kernel read from its name, grid and shapes (the input of the DRAM
model's operand re-read rule), and analyzer.dram.operand_rereads checked against a brute-force LRU simulation."""

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from analyzer import load_trace
from analyzer.dram import device_of, operand_rereads, tile_walk
from analyzer.opinfo.gemm import Gemm
from analyzer.opinfo.tensors import Tensor
from analyzer.opinfo.tiles import Schedule, problem, schedule

ROOT = Path(__file__).resolve().parents[2]
H100 = {"numSms": 132, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536,
        "sharedMemPerMultiprocessor": 233472}  # fmt: skip


def _gemm(m, n, k, dtype="bf16"):
    return Gemm(m, n, k, dtype, 1, Tensor((m, k), dtype), Tensor((n, k), dtype))


def test_cublas_tile_is_read_in_cublas_orientation_with_cutlass_raster():
    # the down projection of the plain MLP: 192 along N = 768 (4 tiles), 128 along M = 8192 (64 tiles); tiles_n (64)
    # > tiles_m (4): CUTLASS walks along m (N here) fastest; a persistent grid of 2 x 66 = 132 CTAs
    s = schedule("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT", "2,66,1", "384,1,1", 221420, 168,
                 _gemm(8192, 768, 8192), H100)  # fmt: skip
    assert isinstance(s, Schedule)
    assert (s.rows, s.cols, s.order, s.wave) == (4, 64, "rows", 132)
    assert s.row_panel_bytes == 192 * 8192 * 2 and s.col_panel_bytes == 128 * 8192 * 2
    assert s.tile_out_bytes == 192 * 128 * 2
    # the Gemma-like up projection: 64 tiles along N = 16384, 16 along M = 2048: walks M fastest
    s = schedule("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "2,66,1", "384,1,1", 213188, 168,
                 _gemm(2048, 16384, 2048), H100)  # fmt: skip
    assert (s.rows, s.cols, s.order) == (64, 16, "cols")
    # other cuBLAS / CUTLASS spellings of the tile (B200's nvjet names carry no sm90)
    for name in ("nvjet_tst_128x256_64x6_2x1_v_bz_bias_TNN",
                 "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_kernel",
                 "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
                 "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8"):  # fmt: skip
        s = schedule(name, "512,1,1", "256,1,1", 100000, 128, _gemm(8192, 8192, 1024), H100)
        assert isinstance(s, Schedule) and (s.rows, s.cols) == (64, 32), name


def test_non_persistent_grid_runs_in_waves_of_resident_ctas():
    # 64 x 32 tiles on 2048 CTAs of 256 threads, 100 kB of shared memory: 2 per SM (233,472 B), 264 at a time
    s = schedule("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", "2048,1,1", "256,1,1", 100000, 128,
                 _gemm(8192, 8192, 1024), H100)  # fmt: skip
    assert s.wave == 264 and "132 SMs x 2" in s.how
    no_device = schedule("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", "2048,1,1", "256,1,1",
                         100000, 128, _gemm(8192, 8192, 1024), None)  # fmt: skip
    assert isinstance(no_device, str) and "SM count" in no_device


def test_triton_tile_from_the_grid_and_own_kernels_from_their_source():
    s = schedule("triton_tem_fused_mm_0", "1024,1,1", "256,1,1", 98304, 128, _gemm(4096, 4096, 4096), H100)
    assert isinstance(s, Schedule) and (s.rows, s.cols, s.order, s.group) == (32, 32, "grouped", 8)
    # one program per SM hides the tile: not modelled, and the reason says so
    why = schedule("triton_tem_fused_mm_0", "132,1,1", "256,1,1", 98304, 128, _gemm(4096, 4096, 4096), H100)
    assert isinstance(why, str) and "persistent" in why
    own = schedule("fuselens_gemm_bias_act_kernel", "132,1,1", "256,1,1", 229920, 168, _gemm(8192, 8192, 768), H100)
    assert (own.rows, own.cols, own.wave, own.order) == (64, 32, 132, "grouped")
    dual = schedule("fuselens_dual_gemm_glu_kernel", "132,1,1", "256,1,1", 229408, 159, _gemm(8192, 3072, 768), H100)
    assert dual.col_panel_bytes == 2 * 128 * 768 * 2  # gate and up rows of one output column tile


def test_unknown_kernels_and_batched_gemms_say_why():
    assert "not known" in schedule("my_gemm_kernel", "132,1,1", "256,1,1", 0, 64, _gemm(64, 64, 64), H100)
    batched = Gemm(256, 256, 64, "bf16", 8, Tensor((8, 256, 64), "bf16"), Tensor((8, 64, 256), "bf16"))
    assert "batched" in schedule("nvjet_sm90_tst_128x128_64x4_1x1_h_bz_TNT", "2,66,1", "384,1,1", 0, 168, batched, H100)


def test_fuselens_custom_ops_read_as_gemms():
    g = problem("fuselens::gemm_bias_act", [[8192, 768], [8192, 768], [8192], []], ["c10::BFloat16"] * 3 + [""])
    assert (g.m, g.n, g.k) == (8192, 8192, 768)
    g = problem("fuselens::dual_gemm_glu", [[8192, 768], [3072, 768], [3072, 768], []], ["c10::BFloat16"] * 3 + [""])
    assert (g.m, g.n, g.k) == (8192, 3072, 768)


def test_recorded_kernels_get_a_schedule():
    """Every GEMM kernel of the recorded H100 sample sets has a tile walk (name, grid and the trace's device)."""
    for case, variant in (("plain_8192tok_h8192_bf16", "fuselens"), ("hf_geglu_bf16", "eager"),
                          ("gemma_layer_bf16", "eager")):  # fmt: skip
        t = load_trace(ROOT / "sample_traces" / case / f"{variant}.json.gz")
        g = t.gpu_ops[t.gpu_ops["category"] == "gemm"].drop_duplicates("name")
        for r in g.itertuples():
            gm = problem(r.op_name, r.input_dims, r.input_types)
            if gm is None or gm.batch != 1:
                continue
            s = schedule(r.name, r.grid, r.block, r.shared_memory_bytes, r.registers_per_thread, gm, device_of(t))
            assert isinstance(s, Schedule), (case, r.name, s)


def _lru(s: Schedule, cap: float, slices: int = 32) -> float:
    """The same abstraction simulated byte-range by byte-range: every wave walks K in `slices` steps together,
    touching its panels' slices and writing its share of outputs; an LRU of `cap` bytes; misses on a re-touch."""
    i, j = tile_walk(s)
    w = np.arange(s.tiles) // s.wave
    lru: OrderedDict = OrderedDict()
    used, miss, seen = 0.0, 0.0, set()
    for wv in range(int(w[-1]) + 1):
        sel = w == wv
        rows, cols, n = sorted(set(i[sel].tolist())), sorted(set(j[sel].tolist())), int(sel.sum())
        for q in range(slices):
            items = [(("a", r, q), s.row_panel_bytes / slices) for r in rows]
            items += [(("b", c, q), s.col_panel_bytes / slices) for c in cols]
            items += [(("o", wv, q), n * s.tile_out_bytes / slices)]
            for key, b in items:
                if key in lru:
                    lru.move_to_end(key)
                    continue
                if key in seen:
                    miss += b
                seen.add(key)
                lru[key] = b
                used += b
                while used > cap:
                    used -= lru.popitem(last=False)[1]
    return miss


@pytest.mark.parametrize(
    "s",
    [
        Schedule(12, 64, 4.7e6 / 12, 12.6e6 / 64, 65536, "rows", 1, 132, ""),
        Schedule(4, 64, 3.1e6, 2.1e6, 49152, "rows", 1, 132, ""),
        Schedule(64, 32, 196608, 393216, 65536, "grouped", 8, 132, ""),
        Schedule(64, 16, 1048576, 524288, 65536, "cols", 1, 132, ""),
        Schedule(40, 40, 1e6, 1e6, 65536, "grouped", 8, 100, ""),
    ],
    ids=["up-rows", "down-rows", "grouped", "cols", "grouped-ragged"],
)
def test_closed_form_equals_an_lru_simulation(s):
    for cap in (10e6, 25e6, 50e6):
        assert operand_rereads(s, cap) == pytest.approx(_lru(s, cap), rel=0.01, abs=0.05e6), cap


def test_one_wave_or_a_cache_holding_everything_reads_operands_once():
    s = Schedule(8, 16, 1e6, 1e6, 65536, "rows", 1, 128, "")
    assert operand_rereads(s, 1e6) == 0.0  # 128 tiles on 128 CTAs: one wave
    big = Schedule(64, 64, 1e6, 1e6, 65536, "grouped", 8, 132, "")
    assert operand_rereads(big, 1e12) == 0.0
    assert operand_rereads(big, 1.0) == pytest.approx(1e6 * (np.unique(
        np.stack([tile_walk(big)[0], np.arange(big.tiles) // 132]), axis=1).shape[1] - 64 + np.unique(
        np.stack([tile_walk(big)[1], np.arange(big.tiles) // 132]), axis=1).shape[1] - 64))  # fmt: skip


def test_huge_gemm_is_left_out_and_says_why():
    from analyzer.dram import MAX_TILES, _Ctx, _gemm_rereads

    dims, types = [[131072, 1024], [1024, 131072]], ["c10::BFloat16"] * 2
    launch = ("2,66,1", "384,1,1", 213188, 168)
    rr, why = _gemm_rereads("nvjet_sm90_tst_128x128_64x4_1x2_h_bz_TNT", "aten::mm", dims, types, launch,
                            _Ctx(52428800.0, H100, 2))  # fmt: skip
    assert MAX_TILES < 1024 * 1024 and rr == 0.0 and "more than the re-read rule walks" in why
    assert "operands counted once" in why
