"""The Kernels view as a table (pure pandas): one row per distinct kernel per run, filters, and a safe CSV export.

Why `csv_bytes` rewrites cells: a kernel or op name from an uploaded trace such as `=HYPERLINK(…)` or
`=cmd|' /C calc'!A0` would run as a formula when the CSV is opened in Excel / LibreOffice / Sheets. Every text cell
is passed through `analyzer.cells.spreadsheet_safe` (formula starters, full-width forms included, get a leading
apostrophe; numbers stay numbers).
"""

from __future__ import annotations

import pandas as pd

from analyzer.cells import spreadsheet_safe
from analyzer.dram import device_of, predict_step
from analyzer.fmt import base_name, safe_text

# Display order: where the time goes and how close to the roofs first, then what the kernel is. Units in names, like the schema; "(est.)" marks the estimates (bytes, FLOPs and what rests on them).
COLUMNS = {
    "run": "run",
    "name": "kernel",
    "time_us_per_step": "time/step (µs)",
    "share_pct": "% of run's GPU time",
    "count_per_step": "calls/step",
    "dur_us_median": "median call (µs)",
    "achieved_gbps": "GB/s (est.)",
    "achieved_tflops": "TFLOP/s (est.)",
    "pct_peak_bw": "% peak BW (est.)",
    "flags": "flags",
    "pct_peak_flops": "% peak FLOP/s (est.)",
    "bytes_per_call": "bytes/call (est.)",
    "dram_bytes_per_call": "DRAM bytes/call (predicted)",
    "flops_per_call": "FLOPs/call (est.)",
    "category": "category",
    "library": "library",
    "ops": "ops",
    "op_name": "op",
    "shapes": "shapes",
    "dtypes": "dtypes",
    "cost_basis": "estimate basis",
    "dram_basis": "DRAM prediction basis",
}
TEXT_COLUMNS = (
    "run",
    "name",
    "category",
    "library",
    "ops",
    "op_name",
    "shapes",
    "dtypes",
    "cost_basis",
    "flags",
    "dram_basis",
)


def kernels_view(tables: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Stack Summary.kernels tables (KERNEL_SUMMARY) of several runs, with a run column and each kernel's share.

    Sorted by time per step, longest first: the top of the table is where the time goes.
    """
    parts = []
    for label, k in tables:
        k = k.copy()
        if "flags" in k:  # a list per kernel (analyzer.cost.hbm_flags): one text cell
            k["flags"] = k["flags"].map(lambda f: "; ".join(f) if isinstance(f, (list, tuple)) else str(f or ""))
        total = k["time_us_per_step"].sum()
        k.insert(0, "run", label)
        k["share_pct"] = 100.0 * k["time_us_per_step"] / total if total > 0 else float("nan")
        parts.append(k)
    if not parts:
        return pd.DataFrame(columns=list(COLUMNS))
    out = pd.concat(parts, ignore_index=True)
    for c in COLUMNS:
        if c not in out:
            out[c] = "" if c in TEXT_COLUMNS else float("nan")
    return out[list(COLUMNS)].sort_values("time_us_per_step", ascending=False, kind="stable", ignore_index=True)


def filter_view(
    df: pd.DataFrame,
    *,
    runs: list[str] | None = None,
    categories: list[str] | None = None,
    libraries: list[str] | None = None,
    text: str = "",
) -> pd.DataFrame:
    """Rows matching every given filter. `text` is a case-insensitive substring of kernel, op, ops or shapes
    (a literal string, never a regex: user input must not be able to make the server backtrack for minutes)."""
    mask = pd.Series(True, index=df.index)
    if runs:
        mask &= df["run"].isin(runs)
    if categories:
        mask &= df["category"].isin(categories)
    if libraries:
        mask &= df["library"].isin(libraries)
    needle = text.strip().lower()
    if needle:
        hay = (
            df["name"].astype(str)
            + "\n"
            + df["op_name"].astype(str)
            + "\n"
            + df["ops"].astype(str)
            + "\n"
            + df["shapes"].astype(str)
        ).str.lower()
        mask &= hay.str.contains(needle, regex=False)
    return df[mask]


def csv_bytes(df: pd.DataFrame, *, rename: bool = True) -> bytes:
    """UTF-8 CSV (with BOM, so Excel reads µ correctly) of `df`, formula injection neutralised, every text cell
    through `fmt.safe_text` (escape sequences, control characters and bidi overrides dropped).

    Rows end in CRLF (RFC 4180): with pandas' default "\n" a cell holding a bare CR is written unquoted, and a
    spreadsheet that breaks the row there would see what follows the CR (say `=1+1`) as a new, un-neutralised cell.
    With CRLF the csv writer quotes every cell that holds a CR or LF."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object or pd.api.types.is_string_dtype(out[c]):
            out[c] = out[c].map(lambda v: spreadsheet_safe(safe_text(v)) if isinstance(v, str) else v)
    if rename:
        out = out.rename(columns=COLUMNS)
    return out.to_csv(index=False, lineterminator="\r\n").encode("utf-8-sig")


def measured_bytes(step_kernels: pd.DataFrame, ncu: dict, gpu=None, device=None) -> tuple[pd.DataFrame, dict]:
    """Logical, predicted-DRAM and Nsight-Compute-measured bytes for one step, per kernel and in total.

    `step_kernels`: GPU_OPS rows (kernels only) of one steady-state step; `ncu`: a runner <variant>.ncu.json
    ({'kernels': [{'kernel', 'id', 'dram_bytes_read', 'dram_bytes_write', 'warm_dram_bytes_read', …}, …]} in launch
    order, one step). `gpu`: the trace's GpuSpec and `device` its deviceProperties entry (analyzer.dram.device_of),
    for the DRAM model's prediction (analyzer.dram; NaN without a GpuSpec).
    measured_bytes is the in-sequence ("warm") figure where the runner recorded it, else the flushed one
    (`totals['measured']` says which); the flushed figure under-counts writes still in L2 when a kernel ends.
    Kernels pair by launch position when both sides have the same count (the runner profiles the same step
    shape), else by base name.
    """
    meas = [k for k in ncu.get("kernels", []) if isinstance(k, dict)]
    warm = bool(meas) and all("warm_dram_bytes_read" in m for m in meas)
    pre = "warm_" if warm else ""
    est = step_kernels.sort_values("ts_us", kind="stable")
    pred = predict_step(est, gpu, device)["dram_bytes"].to_numpy()

    def got(m: dict, p: str) -> float:
        r, w = m.get(f"{p}dram_bytes_read"), m.get(f"{p}dram_bytes_write")
        return float(r) + float(w) if r is not None and w is not None else float("nan")

    rows = []
    if len(meas) == len(est):
        for name, logical, dram, m in zip(est["name"], est["bytes"], pred, meas, strict=True):
            rows.append((name, logical, dram, got(m, pre), got(m, "")))
        how = "by launch position"
    else:
        by_name: dict[str, list[float]] = {}
        for m in meas:
            acc = by_name.setdefault(base_name(m.get("kernel", "")), [0.0, 0.0])
            acc[0] += got(m, pre)
            acc[1] += got(m, "")
        frame = est.assign(_dram=pred)
        for name, grp in frame.groupby("name", sort=False):
            m_w, m_f = by_name.pop(base_name(name), [float("nan"), float("nan")])
            rows.append((name, grp["bytes"].sum(min_count=1), grp["_dram"].sum(min_count=1), m_w, m_f))
        how = "by kernel name"
    cols = ["kernel", "estimated_bytes", "predicted_dram_bytes", "measured_bytes", "measured_flushed_bytes"]
    df = pd.DataFrame(rows, columns=cols)
    total = lambda s: s.sum(min_count=1)  # noqa: E731
    df = df.groupby("kernel", sort=False, as_index=False).agg(
        calls=("kernel", "size"),
        estimated_bytes=("estimated_bytes", total),
        predicted_dram_bytes=("predicted_dram_bytes", total),
        measured_bytes=("measured_bytes", total),
        measured_flushed_bytes=("measured_flushed_bytes", total),
    )
    df["measured / estimate"] = df["measured_bytes"] / df["estimated_bytes"]
    df["measured / predicted"] = df["measured_bytes"] / df["predicted_dram_bytes"]
    totals = {
        "estimated_bytes": float(df["estimated_bytes"].sum()),
        "predicted_dram_bytes": float(df["predicted_dram_bytes"].sum(min_count=len(df))),
        "measured_bytes": float(df["measured_bytes"].sum()),
        "measured": "in sequence (--cache-control none)" if warm else "caches flushed before each kernel",
        "matched": how,
        "kernels_estimated": int(len(est)),
        "kernels_measured": int(len(meas)),
    }
    # NaN, not an error, where there is nothing to divide by (a page shows "—")
    totals["measured / estimate"] = (
        totals["measured_bytes"] / totals["estimated_bytes"] if totals["estimated_bytes"] else float("nan")
    )
    totals["measured / predicted"] = (
        totals["measured_bytes"] / totals["predicted_dram_bytes"] if totals["predicted_dram_bytes"] else float("nan")
    )
    return df, totals


def measured_step(steps: pd.DataFrame, steps_used) -> int:
    """The step a runner's Nsight Compute pass stands for: the last steady-state step, else the first recorded one."""
    return int(steps_used[-1]) if steps_used else int(steps["step"].iloc[0])


def run_measured_bytes(trace, steps_used, ncu: dict) -> tuple[pd.DataFrame, dict]:
    """`measured_bytes` for one run: the kernels of its measured step (`measured_step`) against its ncu side file,
    with the trace's GPU and deviceProperties for the DRAM prediction."""
    step = measured_step(trace.steps, steps_used)
    k = trace.kernels
    return measured_bytes(k[k["step"] == step], ncu, trace.gpu, device_of(trace))
