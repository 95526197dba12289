"""How a GEMM kernel walks its output tiles, from what a trace holds: the analyzer.dram operand re-read rule's input.

    schedule(name, grid, block, smem_bytes, regs, gemm, device) -> Schedule | str (why not)

A GEMM kernel computes its output in tiles. Each tile reads a row panel of one operand and a column panel of the
other (tile × K elements each). Tiles run in waves of as many CTAs as are resident at once. Each wave reads the
panels its tiles need; panels an earlier wave read may still be in L2 (analyzer.dram decides that). What this
module reads from the trace:

* **Tile.** cuBLAS / CUTLASS names carry it: `nvjet_sm90_tst_256x128_…`, `…_tilesize128x128x64_…`,
  `…_128x256_32x3_…`. cuBLAS is column-major: PyTorch's out[M, N] = x[M, K]·w[N, K]ᵀ is cuBLAS's Cᵀ, so its m is
  PyTorch's N. The name's first number is the tile along N (the weight's rows), the second the tile along M. For
  example, the 192x128 down projection at N = 768 makes 4 tiles along N and 64 along M=8192. A Triton kernel launched
  one program per tile (grid = tiles) gives the tile's area: M·N / grid, taken square. FuseLens' persistent kernels
  have the tiles of `kernels/ops/hopper_gemm.py` and `kernels/ops/ws_gemm.py` (OWN_TILES).
* **Order.** CUTLASS's persistent scheduler (`get_rasterization_order`, RasterOrderOptions::Heuristic) walks along
  m when tiles_n > tiles_m, else along n: the side with fewer tiles moves fastest. We take that for cuBLAS and
  CUTLASS kernels, in cuBLAS's orientation. Triton's matmul (and Inductor's templates, FuseLens' kernels) walks
  grouped: bands of GROUP_M = 8 row tiles (FuseLens' Gluon dual GEMM: 32, OWN_TILES), row index fastest inside a
  band.
* **Wave.** A persistent grid (fewer CTAs than tiles) runs `grid` tiles at a time. Otherwise the wave is
  SMs × CTAs per SM, from the device's SM count, shared memory, registers and threads (Kineto's deviceProperties
  and the kernel's launch record).

A batched GEMM (batch > 1) is left out: its batches' operands are apart, and the order across them is the library's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from analyzer.opinfo import dtypes
from analyzer.opinfo.cost_rules import FUSELENS_OPS
from analyzer.opinfo.gemm import Gemm, gemm_problem
from analyzer.opinfo.tensors import tensors

GROUP_M = 8  # Triton's matmul tutorial, Inductor's mm templates, kernels/ops/hopper_gemm.py: bands of 8 row tiles
# FuseLens' persistent kernels (one program per SM, tile not in the grid): (tile along M, tile along N, weight rows
# per N tile, row tiles per band of the grouped walk). kernels/ops/hopper_gemm.py autotunes among 128 x 256 configs
# for M > 1024 (SINGLE_CONFIGS; the dual GEMM's 128 x 128 output tile reads 2 x 128 weight rows: gate and up
# interleaved); kernels/ops/ws_gemm.py's warp-specialised dual GEMMs take 64 x 128 tiles in bands of 32 row tiles.
OWN_TILES = {
    "fuselens_gemm_bias_act_kernel": (128, 256, 1, GROUP_M),
    "fuselens_dual_gemm_glu_kernel": (128, 128, 2, GROUP_M),
    "fuselens_dual_gemm_glu_ws_kernel": (64, 128, 2, 32),
    "fuselens_dual_gemm_glu_save_ws_kernel": (64, 128, 2, 32),
    "fuselens_mlp_bwd_dh_ws_kernel": (64, 128, 1, 16),  # kernels/ops/ws_dh.py (its band is measured per shape: 8-32)
}
_NVJET = re.compile(r"^nvjet_\w*?_(\d+)x(\d+)_")  # nvjet_sm90_tst_256x128_…, nvjet_tst_64x64_… (B200)
_TILESIZE = re.compile(r"tilesize(\d+)x(\d+)x\d+")
_CUTLASS = re.compile(r"gemm\w*?_(\d+)x(\d+)_")
_TRITON = ("triton_tem_", "triton_mm", "fuselens_")


@dataclass(frozen=True)
class Schedule:
    """Output tiles in the order a kernel runs them: `rows` x `cols` tiles; `order` "rows" (row index fastest),
    "cols" (column index fastest) or "grouped" (bands of `group` rows, row index fastest inside a band)."""

    rows: int
    cols: int
    row_panel_bytes: float  # operand bytes a row of tiles shares (the tile's rows x K)
    col_panel_bytes: float  # operand bytes a column of tiles shares
    tile_out_bytes: float  # output bytes of one tile
    order: str
    group: int
    wave: int  # tiles in flight at once
    how: str  # what the figures rest on, for dram_basis

    @property
    def tiles(self) -> int:
        return self.rows * self.cols


# FuseLens' custom GEMM ops run one GEMM whose shapes their arguments give: (x [M, K], weight [N, K], ...); the dual
# GEMM (x, w_gate [N, K], w_up [N, K], ...) reads two weights per output column (OWN_TILES' third figure)
OWN_OPS = FUSELENS_OPS - {"fuselens::glu_gating"}


def problem(op_name: str | None, dims, types) -> Gemm | None:
    """The GEMM an op runs (analyzer.opinfo.gemm), FuseLens' custom GEMM ops included."""
    if op_name in OWN_OPS:
        ts = tensors(dims, types)
        if len(ts) < 2 or len(ts[0].shape) != 2 or len(ts[1].shape) != 2 or ts[0].shape[1] != ts[1].shape[1]:
            return None
        (m, k), n = ts[0].shape, ts[1].shape[0]
        return Gemm(m, n, k, ts[0].dtype, 1, ts[0], ts[1], how=f"{op_name} x [M,K], weight [N,K]")
    return gemm_problem(op_name, dims, types)


def _ctas(grid) -> int | None:
    try:
        dims = [int(x) for x in str(grid).replace("(", "").replace(")", "").split(",") if x.strip()]
    except ValueError:
        return None
    return math.prod(dims) if dims and all(d > 0 for d in dims) else None


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _resident(block, smem, regs, device: dict | None) -> int | None:
    """CTAs one SM holds at once: the least of its shared memory, registers and threads over the kernel's."""
    if not device:
        return None
    threads = _ctas(block)
    smem, regs = _num(smem), _num(regs)
    if not threads or not (regs > 0):
        return None
    limits = [int(device.get("maxThreadsPerMultiprocessor") or 0) // threads]
    limits.append(int(device.get("regsPerMultiprocessor") or 0) // max(int(regs) * threads, 1))
    if smem > 0:
        limits.append(int(device.get("sharedMemPerMultiprocessor") or 0) // int(smem))
    n = min(limits)
    return n if n > 0 else None


def schedule(name: str, grid, block, smem, regs, g: Gemm, device: dict | None) -> Schedule | str:
    """The tile walk of GEMM kernel `name` running problem `g` (see the module doc), or why it is not known."""
    if g.batch != 1:
        return "batched GEMM: operand re-reads not modelled"
    ia, ib = dtypes.itemsize(g.a.dtype if g.a else g.dtype), dtypes.itemsize(g.b.dtype if g.b else g.dtype)
    io = dtypes.itemsize(g.out.dtype if g.out is not None and g.out.dtype else g.dtype)
    if not (ia and ib and io):
        return "GEMM operand dtypes unknown: operand re-reads not modelled"
    ctas = _ctas(grid)
    if ctas is None:
        return "no grid recorded: operand re-reads not modelled"
    sms = int((device or {}).get("numSms") or 0)
    m = _NVJET.match(name) or _TILESIZE.search(name) or _CUTLASS.search(name)
    if m:  # cuBLAS's orientation: rows are its m (PyTorch's N, the weight's rows), columns its n (PyTorch's M)
        tn_, tm_ = int(m.group(1)), int(m.group(2))
        rows, cols = math.ceil(g.n / tn_), math.ceil(g.m / tm_)
        order = "rows" if cols > rows else "cols"  # CUTLASS: along m when tiles_n > tiles_m
        how = f"tile {tn_}x{tm_} (N x M) from the name, CUTLASS raster along {'N' if order == 'rows' else 'M'}"
        panels = (tn_ * g.k * ib, tm_ * g.k * ia, tn_ * tm_ * io)
        group = 1
    elif name in OWN_TILES or name.startswith(_TRITON):
        group = GROUP_M
        if name in OWN_TILES:
            bm, bn, wrows, group = OWN_TILES[name]
            how = f"tile {bm}x{bn} (M x N) of kernels/ops"
        else:
            if sms and ctas in (sms, 2 * sms):  # one program per SM: a persistent walk whose tile the grid hides
                return "persistent Triton GEMM without its tile in the name: operand re-reads not modelled"
            side = math.sqrt(g.m * g.n / ctas)
            bm = bn = max(int(round(side)), 1)
            wrows = 1
            how = f"tile ≈{bm}x{bn} from grid {ctas} over the {g.m}x{g.n} output"
        rows, cols = math.ceil(g.m / bm), math.ceil(g.n / bn)
        order = "grouped"
        how += f", Triton grouped order (GROUP_M {group})"
        panels = (bm * g.k * ia, wrows * bn * g.k * ib, bm * bn * io)
    else:
        return "GEMM kernel's tile not known from its name: operand re-reads not modelled"
    tiles = rows * cols
    if ctas < tiles and (not sms or ctas <= 2 * sms):  # a persistent grid walks all tiles, `ctas` at a time
        wave = ctas
        how += f", persistent grid of {ctas}"
    else:
        per_sm = _resident(block, smem, regs, device)
        if not sms or per_sm is None:
            return "SM count or occupancy unknown: operand re-reads not modelled"
        wave = min(tiles, sms * per_sm)
        how += f", waves of {wave} ({sms} SMs x {per_sm})"
    return Schedule(rows, cols, *panels, order=order, group=group, wave=max(wave, 1), how=how)
