"""How a Diff (analyzer.diff) is shown: headline, fusion groups, categories, GEMMs, unmatched, what is left.

Shared by Compare (everything) and Overview (the headline only). Every byte figure of a Diff is an estimate from
recorded shapes and dtypes, and says so; times are measured kernel durations.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from analyzer.diff.facts import side_number
from analyzer.fmt import safe_text, short_name
from app_pages import state, ui


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _force_diff() -> None:
    state.diff(force=True)


@st.fragment(run_every=1.0)
def _poll_pending() -> None:
    """While the diff computes on its worker thread: elapsed time, then a full rerun when it is ready."""
    d = state.diff(compute=False)
    if not isinstance(d, state.DiffPending):
        st.rerun(scope="app")
    st.caption(f"Computing the fusion diff ({d.ops_per_step:,} GPU ops per step)… {d.elapsed_s:,.0f} s")


def current_diff(compact: bool = False):
    """The session's Diff, or None after saying inline why there is none yet (too big, computing, or an error).

    Other pages stay usable meanwhile: the diff runs on a worker thread. Runs that cannot be compared (no GPU
    kernel in their steps) cost one warning line each; the others are still compared."""
    base, cands, lines = state.comparison()
    for line in lines:
        st.warning(ui.esc(line), icon=":material/warning:")
    d = state.diff()
    if d is None and lines:
        st.info(
            f"{len(cands) + (base is not None)} of {len(state.runs())} loaded runs can be compared; the fusion diff "
            "needs two (a baseline and a candidate).",
            icon=":material/info:",
        )
        return None
    if isinstance(d, state.DiffDeferred):
        st.info(
            f"The steps hold up to {d.ops_per_step:,} GPU ops. The fusion diff aligns the runs' kernel sequences and "
            "takes a while at this size (about 2-4 s per 100k ops on 2 cores); the other pages work meanwhile.",
            icon=":material/hourglass_empty:",
        )
        st.button("Compute the fusion diff", key=f"fl_force_diff_{compact}", on_click=_force_diff)
        return None
    if isinstance(d, state.DiffPending):
        _poll_pending()
        return None
    if isinstance(d, str):
        st.error(ui.esc(d), icon=":material/error:")
        return None
    return d


def _runs_by_label() -> dict[str, state.Run]:
    return {r.label: r for r in state.runs()}


def summary_table(d) -> pd.DataFrame:
    """One row per candidate: what it changed against the baseline, per step."""
    runs = _runs_by_label()
    rows = []
    for cd in d.candidates:
        h = cd.headline()
        base_ev = side_number(runs[cd.base_label].variant.get("median_us")) if cd.base_label in runs else None
        cand_ev = side_number(runs[cd.label].variant.get("median_us")) if cd.label in runs else None
        rows.append(
            {
                "candidate": cd.label,
                "conditions": h.get("comparability"),
                "factor": ui.cell(h.get("condition_factor"), "{:.3f}"),
                "kernels/step": f"{cd.base.kernels_per_step} → {cd.run.kernels_per_step}",
                "GPU time/step (µs)": cd.run.gpu_time_us_per_step,
                "change": (h.get("gpu_time_change_pct") or math.nan) / 100.0,
                "CUDA-event time (µs)": ui.cell(cand_ev),
                "speed-up (CUDA events)": ui.cell(base_ev / cand_ev if base_ev and cand_ev else None, "{:.2f}×"),
                "HBM bytes avoided/step (est.)": cd.hbm_bytes_avoided_per_step,
                "DRAM bytes avoided/step (predicted)": cd.predicted_dram_bytes_saved_per_step,
                "saved by fusion (µs)": cd.time_saved_us_per_step,
                "fusion groups": h.get("n_fusions", 0),
                "round trips left (est. bytes)": cd.run.remaining_bytes_per_step,
                "data": "⚠ in doubt" if runs.get(cd.label) and runs[cd.label].summary.doubts else "ok",
            }
        )
    return pd.DataFrame(rows)


def headline(d, label: str | None = None) -> None:
    """Big numbers for one candidate (default: the first), and a one-row-per-candidate table when there are more."""
    cd = d.candidate(label) if label else d.candidates[0]
    b, c = cd.base, cd.run
    h = cd.headline()
    avoided = cd.hbm_bytes_avoided_per_step
    st.markdown(f"#### {ui.esc(cd.label)} vs {ui.esc(cd.base_label)}")
    doubts(cd.base_label, cd.label)
    conditions_badge(cd)
    m = st.columns(4)
    m[0].metric(
        "Kernels per step",
        f"{b.kernels_per_step} → {c.kernels_per_step}",
        delta=f"{c.kernels_per_step - b.kernels_per_step:+d} kernels",
        delta_color="inverse",
        help="GPU kernels in the representative steady-state step (memcpy/memset not counted).",
    )
    m[1].metric(
        "HBM bytes avoided per step",
        ui.fmt_bytes(avoided),
        delta=f"{avoided:,.0f} B (estimate)",
        delta_color="off",
        delta_arrow="off",
        help="Intermediates the fused kernels no longer write to HBM and read back (estimate from recorded shapes "
        "and dtypes; see 'how bytes avoided are counted' below).",
    )
    gpu_b, gpu_c = b.gpu_time_us_per_step, c.gpu_time_us_per_step
    # runs recorded under other GPU conditions: the metric shows the candidate normalised (analyzer.diff.comparability)
    norm = h.get("comparability") == "skewed" and _finite(h.get("normalised_gpu_time_change_pct"))
    calls = (h.get("spread") or {}).get("calls") or {}
    pct = h.get("normalised_gpu_time_change_pct" if norm else "gpu_time_change_pct")
    call = calls.get("gpu_time_normalised" if norm else "gpu_time")
    m[2].metric(
        "GPU time per step" + (" (normalised)" if norm else ""),
        ui.fmt_us(cd.normalised_gpu_time_us_per_step if norm else gpu_c),
        delta=f"{pct:+.1f}% vs {ui.fmt_us(gpu_b)}" + (" · a tie" if call == "tie" else "") if _finite(pct) else None,
        delta_color="off" if call == "tie" else "inverse",
        help="Sum of GPU kernel durations per step, median over steady-state steps (measured). A tie: the two runs' "
        "per-step ranges overlap. Normalised (when the GPU conditions differed): the candidate's kernel times "
        f"divided by the condition factor of their class; as recorded {ui.fmt_us(gpu_c)}.",
    )
    m[3].metric(
        "Time saved by fusion per step",
        ui.fmt_us(cd.time_saved_us_per_step),
        delta=f"{h.get('n_fusions', 0)} fusion group(s)",
        delta_color="off",
        delta_arrow="off",
        help="Replaced baseline kernels' time minus the fused kernels' time (fusion groups and swaps only).",
    )
    traffic = cd.traffic_avoided()  # logical vs predicted DRAM vs measured DRAM: one sentence for every surface
    st.markdown(f"**{ui.esc(traffic['text'])}**")
    st.caption(
        "Logical: "
        + ui.esc(traffic["basis"]["logical"])
        + ". Predicted DRAM: "
        + ui.esc(traffic["basis"]["predicted"])
        + " (docs/COST_MODEL.md, 'DRAM model'). Measured: "
        + (ui.esc(traffic["basis"]["measured"]) if traffic.get("measured_dram_bytes_per_step") is not None else "no")
        + " in-sequence Nsight Compute counters with these runs."
    )
    if not cd.bytes_complete:
        st.caption("Some fused kernels lack recorded shapes: the bytes avoided are a lower bound.")
    if len(d.candidates) > 1:
        candidates_table(d)


def doubts(*labels: str) -> None:
    """A warning beside the figures of any shown run whose data is in doubt (summary.doubts): a damaged file's
    "1.6 µs, -99.3%" must not stand alone in green."""
    runs = _runs_by_label()
    for lab in labels:
        r = runs.get(lab)
        reasons = r.summary.doubts if r is not None else []
        if reasons:
            st.warning(
                f"**{ui.esc(lab)}: figures in doubt** — " + ui.esc("; ".join(reasons[:3]), 600),
                icon=":material/warning:",
            )


_VERDICT_LOOK = {
    "comparable": ("green", ":material/check_circle:"),
    "skewed": ("red", ":material/warning:"),
    "not checkable": ("gray", ":material/help:"),
}


def conditions_badge(cd) -> None:
    """Were both runs recorded under the same GPU conditions (analyzer.diff.comparability), and what the changed
    kernels saved once the candidate's times are normalised; each with its spread over the profiled steps."""
    comp = cd.comparability
    verdict = comp.verdict if comp is not None else "not checkable"
    color, icon = _VERDICT_LOOK.get(verdict, _VERDICT_LOOK["not checkable"])
    text = f"GPU conditions: {verdict}"
    if comp is not None and comp.factor is not None:
        text += f" · factor {comp.factor:.3f}"
    st.badge(text, color=color, icon=icon)
    lines = cd.lead_lines()
    st.caption(ui.esc(lines[0].split(" — ", 1)[-1], limit=600))  # the verdict is on the badge
    for line in lines[1:]:
        st.caption(ui.esc(line, limit=600))


def candidates_table(d) -> None:
    st.dataframe(
        summary_table(d),
        hide_index=True,
        width="stretch",
        column_config={
            "GPU time/step (µs)": st.column_config.NumberColumn(format="%.1f"),
            "change": st.column_config.NumberColumn(format="percent", help="GPU time per step vs the baseline"),
            "HBM bytes avoided/step (est.)": st.column_config.NumberColumn(format="localized"),
            "saved by fusion (µs)": st.column_config.NumberColumn(format="%.1f"),
            "round trips left (est. bytes)": st.column_config.NumberColumn(
                format="localized", help="HBM round trips this run still makes that a fusion could remove"
            ),
            "CUDA-event time (µs)": st.column_config.TextColumn(
                help="The runner's median over 100 timed steps, from its manifest; — = not recorded (plain Kineto "
                "traces carry no runner timing)"
            ),
            "speed-up (CUDA events)": st.column_config.TextColumn(
                help="Baseline CUDA-event time / this run's; — = one of the two was not recorded"
            ),
            "data": st.column_config.TextColumn(help="⚠: this run's file was cut, damaged or held wrong types"),
            "factor": st.column_config.TextColumn(
                help="candidate / baseline time of the kernels identical in both runs (1 = same GPU conditions); "
                "— = no such kernels to compare"
            ),
        },
    )


CARDS = 4  # fusion groups shown as cards, by time saved; the rest (a layer has ~6-10) fold into one table


def fusion_card(f) -> None:
    """One fusion group as a card: what it computes, fused kernel ← replaced kernels, the gain, and how its bytes
    avoided add up. Long lists (an RMSNorm replaces 10 kernels and keeps 10 tensors on chip) fold into expanders."""
    with st.container(border=True):
        what = f"{ui.esc(f.pattern)}: " if getattr(f, "pattern", "") else ""
        st.markdown(
            f"**{what}{ui.esc(short_name(f.fused_kernel, 100))}** ← {len(f.replaces)} kernels ({ui.esc('+'.join(f.ops))})"
        )
        c = st.columns(4)
        c[0].metric("time saved", f"{f.time_saved_us_per_step:,.1f} µs", help=f"×{f.count_per_step} per step")
        c[1].metric(
            "HBM bytes avoided (est.)",
            ui.fmt_bytes(f.bytes_avoided_per_step),
            help=f"{f.bytes_avoided_per_step:,.0f} B per step",
        )
        c[2].metric("kernel time", f"{f.base_time_us_per_step:,.1f} → {f.candidate_time_us_per_step:,.1f} µs")
        if _finite(f.base_gbps) and _finite(f.candidate_gbps):
            c[3].metric("achieved GB/s (est.)", f"{f.base_gbps:,.0f} → {f.candidate_gbps:,.0f}")
        if getattr(f, "bytes_note", ""):
            st.caption(f"bytes avoided: {ui.esc(f.bytes_note)}")
        long = len(f.replaces) + len(f.intermediates) > 6
        box = (
            st.expander(f"replaced kernels ({len(f.replaces)}) and intermediates ({len(f.intermediates)})")
            if long
            else st.container()
        )
        with box:
            for name, op in zip(f.replaces, f.replaced_ops, strict=False):
                st.caption(f"replaces {ui.esc(short_name(name, 120))}" + (f" · {ui.esc(op)}" if op else ""))
            for i in f.intermediates:
                shape = i.get("matrix") or "×".join(str(x) for x in i["shape"])
                reads = int(i.get("reads") or 1)
                st.markdown(
                    f"- intermediate **{ui.esc(shape)} {ui.esc(i['dtype'])}**, {ui.fmt_bytes(i['bytes'])}: written by "
                    f"{ui.esc(short_name(i.get('producer_op') or i.get('producer'), 60))}, read {reads}× → "
                    f"{ui.fmt_bytes(i['round_trip_bytes'])} of HBM traffic no longer made"
                )


def fusion_groups(cd) -> None:
    """Fusion groups as cards, the most time saved first (what a review slide needs); beyond CARDS groups the rest
    fold into one table; swaps and kernel choices as a table below."""
    if not cd.fusions:
        st.info("No fusion groups: no candidate kernel replaced several baseline kernels.")
    ranked = sorted(cd.fusions, key=lambda f: -(f.time_saved_us_per_step if _finite(f.time_saved_us_per_step) else 0))
    for f in ranked[:CARDS]:
        fusion_card(f)
    if len(ranked) > CARDS:
        small = ranked[CARDS:]
        saved = sum(f.time_saved_us_per_step for f in small if _finite(f.time_saved_us_per_step))
        with st.expander(f"{len(small)} smaller fusion groups ({saved:,.1f} µs saved per step together)"):
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "what": getattr(f, "pattern", ""),
                            "fused kernel": short_name(f.fused_kernel, 60),
                            "replaces": f"{len(f.replaces)} kernels ({'+'.join(f.ops)})",
                            "×/step": f.count_per_step,
                            "bytes avoided (est.)": f.bytes_avoided_per_step,
                            "before (µs)": f.base_time_us_per_step,
                            "after (µs)": f.candidate_time_us_per_step,
                            "saved (µs)": f.time_saved_us_per_step,
                        }
                        for f in small
                    ]
                ),
                hide_index=True,
                width="stretch",
                column_config={
                    "bytes avoided (est.)": st.column_config.NumberColumn(format="localized"),
                    "before (µs)": st.column_config.NumberColumn(format="%.1f"),
                    "after (µs)": st.column_config.NumberColumn(format="%.1f"),
                    "saved (µs)": st.column_config.NumberColumn(format="%.1f"),
                },
            )
    others = cd.swaps + cd.kernel_choices
    if others:
        rows = [
            {
                "kind": f.kind,
                "new kernel": f.fused_kernel,
                "← replaces": " + ".join(f.replaces),
                "ops": "+".join(f.ops),
                "×/step": f.count_per_step,
                "before (µs)": f.base_time_us_per_step,
                "after (µs)": f.candidate_time_us_per_step,
                "saved (µs)": f.time_saved_us_per_step,
            }
            for f in others
        ]
        with st.expander(f"Swaps and kernel choices ({len(others)}): one kernel for another, no bytes avoided by rule"):
            st.dataframe(
                pd.DataFrame(rows),
                hide_index=True,
                width="stretch",
                column_config={
                    "before (µs)": st.column_config.NumberColumn(format="%.1f"),
                    "after (µs)": st.column_config.NumberColumn(format="%.1f"),
                    "saved (µs)": st.column_config.NumberColumn(format="%.1f"),
                },
            )
    groups = cd.fusions + others
    if groups:
        with st.expander("Why each kernel was grouped (evidence)"):
            for f in groups:
                st.text(f"{short_name(f.fused_kernel, 120)}\n  " + "\n  ".join(safe_text(e, 240) for e in f.evidence))


def gemms(cd) -> None:
    if not cd.matched_gemms:
        st.caption("No GEMMs matched between the two runs.")
        return
    df = pd.DataFrame(cd.matched_gemms)
    keep = [
        "problem", "count_per_step", "base_kernel", "candidate_kernel", "base_time_us_per_step",
        "candidate_time_us_per_step", "time_saved_us_per_step", "base_tflops", "candidate_tflops", "matched_by",
    ]  # fmt: skip
    df = df[[c for c in keep if c in df]].copy()
    from analyzer.fmt import short_name

    for c in ("base_kernel", "candidate_kernel"):  # full names in the diff's JSON; the table must fit a slide
        if c in df:
            df[c] = df[c].map(lambda n: short_name(n, 40))
    for c in ("base_tflops", "candidate_tflops"):
        if c in df:
            df[c] = df[c].map(lambda v: ui.cell(v, "{:,.0f}"))
    tf_help = "Estimated GEMM FLOPs / measured time; — = no FLOP estimate (shapes not recorded) or no time"
    st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        column_config={
            "problem": st.column_config.TextColumn("GEMM (M×N×K dtype)"),
            "base_kernel": st.column_config.TextColumn("kernel before", width="medium"),
            "candidate_kernel": st.column_config.TextColumn("kernel after", width="medium"),
            "matched_by": st.column_config.TextColumn("matched by", width="small"),
            "count_per_step": st.column_config.NumberColumn("×/step"),
            "base_time_us_per_step": st.column_config.NumberColumn("before (µs)", format="%.1f"),
            "candidate_time_us_per_step": st.column_config.NumberColumn("after (µs)", format="%.1f"),
            "time_saved_us_per_step": st.column_config.NumberColumn("saved (µs)", format="%.1f"),
            "base_tflops": st.column_config.TextColumn("TFLOP/s before", help=tf_help),
            "candidate_tflops": st.column_config.TextColumn("TFLOP/s after", help=tf_help),
        },
    )


def unmatched(cd) -> None:
    c1, c2 = st.columns(2)
    for col, rows, who in ((c1, cd.unmatched_base, cd.base_label), (c2, cd.unmatched_candidate, cd.label)):
        col.markdown(f"**Only in {ui.esc(who)}**")
        if rows:
            col.dataframe(
                pd.DataFrame(rows),
                hide_index=True,
                width="stretch",
                column_config={"time_us_per_step": st.column_config.NumberColumn("µs/step", format="%.1f")},
            )
        else:
            col.caption("none")


def remaining(cd) -> None:
    """Where the rest is: HBM round trips the candidate still makes that a fusion could remove, ranked by their
    time at the bandwidth roof (the first row is the fusion to do next). Kernel names shortened; the JSON has them."""
    from analyzer.fmt import short_name

    def who(name, op) -> str:
        return f"{short_name(name, 36)}" + (f" ({op})" if op and op != name else "")

    if cd.run.remaining_unknown:
        st.caption(f"Unknown for {ui.esc(cd.label)}: {ui.esc(cd.run.remaining_unknown)}.")
        return
    rows = [
        {
            "kind": r["kind"],
            "at the HBM roof (µs)": r.get("time_at_roof_us"),
            "round trip (est. bytes)": r["round_trip_bytes"],
            "tensor": f"{r.get('matrix') or r['shape']} {r['dtype']}",
            "×/step": r.get("count_per_step", 1),
            "written by": who(r["producer"], r.get("producer_op")),
            "read by": " + ".join(short_name(x, 28) for x in r["readers"]),
            "what would avoid it": r["would_avoid"],
        }
        for r in cd.run.remaining
    ]
    if not rows:
        st.caption(f"{ui.esc(cd.label)} makes no HBM round trip a fusion could remove (by the diff's rule).")
        return
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        column_config={
            "round trip (est. bytes)": st.column_config.NumberColumn(format="localized"),
            "at the HBM roof (µs)": st.column_config.NumberColumn(
                format="%.1f", help="the round trip's bytes at the GPU's peak HBM bandwidth: the least it costs"
            ),
        },
    )
