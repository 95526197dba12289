"""How a Diff (analyzer.diff) is shown: headline, fusion groups, categories, GEMMs, unmatched, what is left.

Shared by Compare (everything) and Overview (the headline only). Every byte figure of a Diff is an estimate from
recorded shapes and dtypes, and says so; times are measured kernel durations.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analyzer.api import BASIS_TEXT, finite, headline_text, safe_text, short_name, side_number, traffic_text
from app_core import plan_view, state, ui


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


# (row label, tooltip) of the side-by-side table: one column per candidate, so 3-4 candidates fit a slide at 1280 px
# (one row per candidate with 13 columns ran 600 px past the page's right edge).
SIDE_BY_SIDE_HELP = {
    "headline": "the one change per step to quote and its call, on the best-supported figure (CUDA events, else the "
    "step span when the GPU waited on the host, else the GPU time normalised for the GPU's conditions, else as recorded)",
    "kernels/step": "GPU kernels in the representative steady-state step, baseline → candidate",
    "GPU time/step": "sum of GPU kernel durations per step (median over steady-state steps) and its raw change, as "
    "recorded: not corrected for the GPU's conditions",
    "CUDA-event time": "the runner's median over 100 timed steps (manifest); — = not recorded (plain Kineto traces "
    "carry no runner timing)",
    "speed-up (CUDA events)": "baseline CUDA-event time / the candidate's; — = one of the two was not recorded",
    "HBM bytes avoided/step (est.)": "intermediates no longer written and read back (estimate from shapes, dtypes)",
    "DRAM bytes avoided/step (predicted)": "the bytes avoided that would have reached DRAM, after what the L2 cache "
    "keeps (analyzer.dram's L2-aware prediction)",
    "saved by fusion": "replaced kernels' time minus the fused kernels' time, per step",
    "fusion groups": "fused kernels that replaced several baseline kernels",
    "round trips left (est.)": "HBM round trips the candidate still makes that a fusion could remove",
    "GPU conditions": "same GPU clocks/contention in both runs? (the runner's control probe, else the kernels identical "
    "in both runs and run in the same context); factor = candidate / baseline time of those; — = none to compare",
    "data": "⚠: the candidate's file was cut, damaged or held wrong types",
}


def summary_table(d) -> pd.DataFrame:
    """What every candidate changed against the baseline, per step: one row per measure, one column per candidate
    (all cells text: an unknown figure is "—", never None)."""
    runs = _runs_by_label()
    cols = {}
    for cd in d.candidates:
        h = cd.headline()
        base_ev = side_number(runs[cd.base_label].variant.get("median_us")) if cd.base_label in runs else None
        cand_ev = side_number(runs[cd.label].variant.get("median_us")) if cd.label in runs else None
        pct = h.get("raw_gpu_time_change_pct")
        verdict = h.get("comparability")
        factor = ui.cell(h.get("condition_factor"), "{:.3f}")
        q = h["headline"]
        cols[cd.label] = {
            "headline": f"{ui.fmt_pct(q.get('change_pct'))} {q.get('verdict')} ({BASIS_TEXT.get(q.get('basis'), '')})",
            "kernels/step": f"{cd.base.kernels_per_step} → {cd.run.kernels_per_step}",
            "GPU time/step": ui.fmt_us(cd.run.gpu_time_us_per_step) + (f" ({ui.fmt_pct(pct)})" if finite(pct) else ""),
            "CUDA-event time": ui.cell(cand_ev, "{:,.1f} µs"),
            "speed-up (CUDA events)": ui.cell(base_ev / cand_ev if base_ev and cand_ev else None, "{:.2f}×"),
            "HBM bytes avoided/step (est.)": ui.fmt_bytes(cd.hbm_bytes_avoided_per_step),
            "DRAM bytes avoided/step (predicted)": ui.fmt_bytes(cd.predicted_dram_bytes_saved_per_step),
            "saved by fusion": ui.fmt_us(cd.time_saved_us_per_step),
            "fusion groups": str(h.get("n_fusions", 0)),
            "round trips left (est.)": ui.fmt_bytes(cd.run.remaining_bytes_per_step),
            "GPU conditions": f"{verdict or ui.NONE}"
            + (f" · {factor}" if factor != ui.NONE else "")
            + (" (other context)" if cd.comparability is not None and cd.comparability.source == "context" else ""),
            "data": "⚠ in doubt" if runs.get(cd.label) and runs[cd.label].summary.doubts else "ok",
        }
    df = pd.DataFrame(cols)
    df.index.name = f"vs {d.candidates[0].base_label}" if d.candidates else "measure"
    return df.reset_index()


def headline(d, label: str | None = None) -> None:
    """Big numbers for one candidate (default: the first), and a one-row-per-candidate table when there are more."""
    cd = d.candidate(label) if label else d.candidates[0]
    b, c = cd.base, cd.run
    h = cd.headline()
    avoided = cd.hbm_bytes_avoided_per_step
    st.markdown(f"#### {ui.esc(cd.label)} vs {ui.esc(cd.base_label)}")
    doubts(cd.base_label, cd.label)
    headline_card(cd, h["headline"])
    conditions_badge(cd)
    m = st.columns(4)
    m[0].metric(
        "Kernels per step",
        f"{b.kernels_per_step} → {c.kernels_per_step}",
        delta=f"{ui.signed(c.kernels_per_step - b.kernels_per_step, ',.0f')} kernels",
        delta_color="inverse" if c.kernels_per_step != b.kernels_per_step else "off",
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
    norm = h.get("comparability") == "skewed" and finite(h.get("normalised_gpu_time_change_pct"))
    calls = (h.get("spread") or {}).get("calls") or {}
    pct = h.get("normalised_gpu_time_change_pct" if norm else "raw_gpu_time_change_pct")
    call = calls.get("gpu_time_normalised" if norm else "gpu_time")
    m[2].metric(
        "GPU time per step" + (" (normalised)" if norm else " (as recorded)"),
        ui.fmt_us(cd.normalised_gpu_time_us_per_step if norm else gpu_c),
        delta=f"{ui.fmt_pct(pct)} vs {ui.fmt_us(gpu_b)}" + (" · a tie" if call == "tie" else "")
        if finite(pct)
        else None,
        delta_color="off" if call == "tie" else "inverse",
        help="Sum of GPU kernel durations per step, median over steady-state steps (measured). A tie: the two runs' "
        "per-step ranges overlap. Normalised (when the GPU conditions differed): the candidate's kernel times "
        f"divided by the condition factor of their class; as recorded {ui.fmt_us(gpu_c)}.",
    )
    m[3].metric(
        "Time saved by fusion per step",
        ui.fmt_us(cd.time_saved_us_per_step),
        delta=_groups_text(cd, h),
        delta_color="off",
        delta_arrow="off",
        help="Replaced baseline kernels' time minus the fused kernels' time (fusion groups and swaps only).",
    )
    step_times(cd, calls)
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


_HEADLINE_LOOK = {
    "faster": ("green", ":material/trending_down:"),
    "slower": ("red", ":material/trending_up:"),
    "tie": ("gray", ":material/drag_handle:"),
    "uncertain": ("orange", ":material/help:"),
}


def headline_card(cd, q: dict) -> None:
    """The one change to quote (analyzer.diff.headline): its figure and call first, the reason under it."""
    color, icon = _HEADLINE_LOOK.get(q.get("verdict"), _HEADLINE_LOOK["uncertain"])
    cols = st.columns([1, 3], vertical_alignment="center")
    cols[0].metric(
        f"Headline · {BASIS_TEXT.get(q.get('basis'), '')}",
        ui.fmt_pct(q.get("change_pct")) + " per step",
        delta=q.get("verdict"),
        delta_color="off",
        delta_arrow="off",
        help="The one figure to quote for this comparison: the runner's CUDA events when recorded, else the step span "
        "when the GPU waited on the host, else the GPU time normalised for the GPU's conditions, else as recorded. "
        "'uncertain' when another figure of the GPU's work calls the opposite beyond its spread.",
    )
    with cols[1]:
        st.badge(headline_text(q, ui.esc(cd.label, 60), ui.esc(cd.base_label, 60)), color=color, icon=icon)
        st.caption(ui.esc(q.get("reason") or "", limit=900))


def step_times(cd, calls: dict) -> None:
    """GPU busy, idle and the step span side by side: where the GPU time and the step's length part ways (a GPU
    waiting on the host), the span is the time a step took."""
    b, c = cd.base, cd.run
    m = st.columns(3)
    for col, (name, key, call, hint) in zip(
        m,
        (
            ("GPU busy per step", "gpu_busy_us_per_step", "gpu_busy", "union of GPU op intervals"),
            ("GPU idle per step", "idle_us_per_step", None, "gaps inside the step: the GPU waiting on the host"),
            ("Step span", "span_us_per_step", "span", "first GPU op start to last op end: busy + idle"),
        ),
        strict=True,
    ):
        vb, vc = getattr(b, key), getattr(c, key)
        delta = f"{ui.signed(vc - vb, ',.1f')} µs vs {ui.fmt_us(vb)}" if finite(vb) and finite(vc) else None
        if call and calls.get(call) == "tie":
            delta = (delta or "") + " · a tie"
        col.metric(
            name,
            ui.fmt_us(vc),
            delta=delta,
            delta_color="off" if call is None or calls.get(call) == "tie" else "inverse",
            help=f"Median over steady-state steps ({hint}), {cd.base_label} → {cd.label}.",
        )


def headline_markdown(d, label: str | None = None) -> str:
    """The headline of one candidate as Markdown for a design doc (the same figures as the metrics above)."""
    cd = d.candidate(label) if label else d.candidates[0]
    b, c = cd.base, cd.run
    h = cd.headline()
    q = h["headline"]
    pct = h.get("raw_gpu_time_change_pct")
    change = f" ({ui.fmt_pct(pct)} vs {ui.fmt_us(b.gpu_time_us_per_step)})" if finite(pct) else ""
    lines = [
        f"**Headline: {headline_text(q, cd.label, cd.base_label)}**",
        "",
        f"{q.get('reason') or ''}",
        "",
        f"**{cd.label} vs {cd.base_label}** (per step, median over steady-state steps)",
        "",
        f"- Kernels per step: {b.kernels_per_step} → {c.kernels_per_step}",
        f"- HBM bytes avoided per step: {ui.fmt_bytes(cd.hbm_bytes_avoided_per_step)} "
        f"({cd.hbm_bytes_avoided_per_step:,.0f} B, estimate from recorded shapes and dtypes)",
        f"- GPU time per step, as recorded: {ui.fmt_us(c.gpu_time_us_per_step)}{change}",
        f"- GPU busy / idle / step span per step: {ui.fmt_us(b.gpu_busy_us_per_step)} / {ui.fmt_us(b.idle_us_per_step)}"
        f" / {ui.fmt_us(b.span_us_per_step)} → {ui.fmt_us(c.gpu_busy_us_per_step)} / {ui.fmt_us(c.idle_us_per_step)} / "
        f"{ui.fmt_us(c.span_us_per_step)}",
        f"- Time saved by fusion per step: {ui.fmt_us(cd.time_saved_us_per_step)} ({_groups_text(cd, h)})",
    ]
    for f in cd.fusions:
        name = short_name(f.fused_kernel, 80).replace("`", "'")
        lines.append(f"- Fusion: `{name}` ← {' + '.join(f.ops)} ({len(f.replaces)} kernels)")
    return "\n".join(lines)


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
        where = {"probe": " (control probe)", "context": " (identical kernels in another context)"}
        text += f" · factor {comp.factor:.3f}" + where.get(comp.source, "")
    st.badge(text, color=color, icon=icon)
    lines = cd.lead_lines()
    st.caption(ui.esc(lines[0].split(" — ", 1)[-1], limit=600))  # the verdict is on the badge
    for line in lines[1:]:
        st.caption(ui.esc(line, limit=600))


def candidates_table(d) -> None:
    df = summary_table(d)
    first = df.columns[0]
    st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(df)),
        column_config={first: st.column_config.TextColumn(pinned=True, help="; ".join(
            f"{k}: {v}" for k, v in SIDE_BY_SIDE_HELP.items()
        ))},
    )  # fmt: skip
    ui.copy_markdown(df, "fl_copy_candidates", "every candidate side by side")


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
        c[0].metric("time saved", f"{f.time_saved_us_per_step:,.1f} µs", help=f"{f.count_per_step} per step")
        c[1].metric(
            "HBM bytes avoided (est.)",
            ui.fmt_bytes(f.bytes_avoided_per_step),
            help=f"{f.bytes_avoided_per_step:,.0f} B per step",
        )
        c[2].metric("kernel time", f"{f.base_time_us_per_step:,.1f} → {f.candidate_time_us_per_step:,.1f} µs")
        if finite(f.base_gbps) and finite(f.candidate_gbps):
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
                shared = i.get("shared_operand")  # a GEMM merge's operand: read, never written
                what = "operand" if shared else "intermediate"
                src = (
                    ""
                    if shared
                    else f"written by {ui.esc(short_name(i.get('producer_op') or i.get('producer'), 60))}, "
                )
                st.markdown(
                    f"- {what} **{ui.esc(shape)} "
                    f"{ui.esc(i['dtype'])}**, {ui.fmt_bytes(i['bytes'])}: {src}"
                    f"{traffic_text({**i, 'reads': reads}).removeprefix('written once, ')} → "
                    f"{ui.fmt_bytes(i['round_trip_bytes'])} of HBM traffic no longer made"
                )


def _groups_text(cd, h: dict) -> str:
    """'3 fusion group(s)', with the swaps (1 → 1 replacements) when there are any: their time is in the same
    figure (HTA's trace_diff pair: 0 fusion groups and a −16.0 ms 'saving', all of it swaps)."""
    n_swaps = sum(f.count_per_step for f in cd.swaps)
    return f"{h.get('n_fusions', 0)} fusion group(s)" + (f", {n_swaps} swap(s)" if n_swaps else "")


def fusion_groups(cd) -> None:
    """Fusion groups as cards, the most time saved first (what a review slide needs); beyond CARDS groups the rest
    fold into one table; swaps and kernel choices as a table below."""
    if not cd.fusions:
        st.info("No fusion groups: no candidate kernel replaced several baseline kernels.")
    ranked = sorted(cd.fusions, key=lambda f: -(f.time_saved_us_per_step if finite(f.time_saved_us_per_step) else 0))
    for f in ranked[:CARDS]:
        fusion_card(f)
    if len(ranked) > CARDS:
        small = ranked[CARDS:]
        saved = sum(f.time_saved_us_per_step for f in small if finite(f.time_saved_us_per_step))
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


def gemms_table(cd) -> pd.DataFrame:
    """Matched GEMMs as slide-width text: before → after in one cell per measure, short kernel names."""
    rows = []
    for g in cd.matched_gemms:
        same = g.get("same_kernel") or g.get("base_kernel") == g.get("candidate_kernel")
        kern = short_name(g.get("base_kernel"), 34)
        if not same:
            kern += " → " + short_name(g.get("candidate_kernel"), 34)
        rows.append(
            {
                "GEMM (M×N×K dtype)": g.get("problem"),
                "×/step": str(g.get("count_per_step", "")),
                "time/step (µs)": f"{ui.cell(g.get('base_time_us_per_step'))} → "
                f"{ui.cell(g.get('candidate_time_us_per_step'))}",
                "saved (µs)": ui.signed_cell(g.get("time_saved_us_per_step")),
                "TFLOP/s": f"{ui.cell(g.get('base_tflops'), '{:,.0f}')} → {ui.cell(g.get('candidate_tflops'), '{:,.0f}')}",
                "kernel": kern if not same else f"{kern} (same)",
            }
        )
    return pd.DataFrame(rows)


def gemms(cd) -> None:
    if not cd.matched_gemms:
        st.caption("No GEMMs matched between the two runs.")
        return
    df = gemms_table(cd)
    st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        column_config={
            "TFLOP/s": st.column_config.TextColumn(
                help="Estimated GEMM FLOPs / measured time, before → after; — = no FLOP estimate (shapes not "
                "recorded) or no time"
            ),
            "kernel": st.column_config.TextColumn(help="kernel before → after (template arguments collapsed)"),
        },
    )
    ui.copy_markdown(df, "fl_copy_gemms", "matched GEMMs")


def unmatched(cd) -> None:
    # One above the other: side by side, a whole model's tables (name, category, op, shapes, figures) ran ~150 px
    # past a half page at 1280 px.
    c1, c2 = st.container(), st.container()
    for col, rows, who in ((c1, cd.unmatched_base, cd.base_label), (c2, cd.unmatched_candidate, cd.label)):
        col.markdown(f"**Only in {ui.esc(who)}**")
        if rows:
            df = pd.DataFrame(rows)
            if "name" in df:  # short names, shapes in a narrow column (full ones in the JSON)
                df["name"] = df["name"].map(lambda n: short_name(n, 40))
            col.dataframe(
                df,
                hide_index=True,
                width="stretch",
                column_config={
                    "time_us_per_step": st.column_config.NumberColumn("µs/step", format="%.1f"),
                    "shapes": st.column_config.TextColumn("shapes", width="small"),
                    "op": st.column_config.TextColumn("op", width="small"),
                    "name": st.column_config.TextColumn("name", width="medium"),  # half a page: 40 chars cut
                    "category": st.column_config.TextColumn("category", width="small"),
                },
            )
        else:
            col.caption("none")


def _fix_short(text: str) -> str:
    """'a GEMM-epilogue fusion (GEMM + the pointwise work …) would keep …' → 'a GEMM-epilogue fusion'."""
    t = " ".join(str(text).split())
    for cut in (" (", " would "):
        if cut in t:
            t = t.split(cut, 1)[0]
    return t


def remaining_table(cd) -> pd.DataFrame:
    rows = []
    for r in cd.run.remaining:
        producer = r.get("producer_op") or short_name(r["producer"], 30)
        rows.append(
            {
                "tensor": f"{r.get('matrix') or r['shape']} {r['dtype']}"
                + (f" ({r['count_per_step']} per step)" if int(r.get("count_per_step") or 1) > 1 else ""),
                "round trip/step (est.)": ui.fmt_bytes(r["round_trip_bytes"]),
                "at the HBM roof": ui.fmt_us(r.get("time_at_roof_us")),
                "what would avoid it": _fix_short(r["would_avoid"]),
                "written by → read by": f"{short_name(producer, 24)} → "
                + " + ".join(short_name(x, 24) for x in r["readers"]),
            }
        )
    return pd.DataFrame(rows)


def remaining(cd) -> None:
    """Where the rest is: HBM round trips the candidate still makes that a fusion could remove, ranked by their
    time at the bandwidth roof (the first row is the fusion to do next). Kernel names shortened; the JSON has them."""
    plan_view.predicted_vs_achieved(cd.base_label, cd.label)  # the baseline's fusion plan: taken or left, per step
    if cd.run.remaining_unknown:
        st.caption(f"Unknown for {ui.esc(cd.label)}: {ui.esc(cd.run.remaining_unknown)}.")
        return
    if not cd.run.remaining:
        st.caption(f"{ui.esc(cd.label)} makes no HBM round trip a fusion could remove (by the diff's rule).")
        return
    df = remaining_table(cd)
    st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        column_config={
            "round trip/step (est.)": st.column_config.TextColumn(
                help="bytes written to HBM and read back per step (estimate from shapes and dtypes)"
            ),
            "at the HBM roof": st.column_config.TextColumn(
                help="the round trip's bytes at the GPU's peak HBM bandwidth: the least it costs per step"
            ),
            "what would avoid it": st.column_config.TextColumn(width="medium"),
            # a whole model's producers and readers are long; sized so the table fits 1280 px beside the sidebar
            "tensor": st.column_config.TextColumn(width="medium"),
            "written by → read by": st.column_config.TextColumn(width="medium"),
        },
    )
    full = sorted({f"{r['kind']}: " + " ".join(str(r["would_avoid"]).split()) for r in cd.run.remaining})
    st.caption(ui.esc(" · ".join(full), 800))
    ui.copy_markdown(df, "fl_copy_remaining", "round trips left")


def accounting(cd) -> None:
    """Where every baseline kernel went (analyzer.diff.accounting), the step's phases when it trains, and the
    fusion groups by pattern: what a reviewer reads first on a whole model, before the groups themselves."""
    acct = cd.accounting
    if acct is None:
        return
    shares = acct.base_shares()
    st.markdown(f"**{ui.esc(acct.text())}**")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "baseline GPU ops": b,
                    # GPU ops (memsets and copies too), so it can pass the kernel count above it
                    "GPU ops/step": acct.base_count[b],
                    "GPU µs/step": acct.base_time_us[b],
                    "share": shares[b],
                }
                for b in shares  # the buckets in BASE_BUCKETS order
            ]
        ),
        hide_index=True,
        width="stretch",
        key="fl_accounting",
        column_config={
            "GPU µs/step": st.column_config.NumberColumn(format="%.1f"),
            "share": st.column_config.NumberColumn(format="percent"),
        },
    )
    st.caption(
        "matched: the same work runs in the candidate · fused: replaced by a Triton kernel (Inductor, Liger, "
        "FuseLens) · replaced: by a library kernel (cuDNN / flash attention, a cuBLAS epilogue) · removed: copies, "
        "fills, mask and index building the candidate does not do · unexplained: none of these, listed below."
    )
    if acct.unexplained:
        with st.expander(f"Unexplained baseline kernels ({len(acct.unexplained)})", expanded=not acct.reliable):
            st.dataframe(
                pd.DataFrame(acct.unexplained)[["name", "op", "shapes", "count_per_step", "time_us_per_step"]],
                hide_index=True,
                width="stretch",
            )
    if cd.phases:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "phase": p,
                        f"{cd.base_label} (µs)": round(v["base_us"], 1),
                        f"{cd.label} (µs)": round(v["candidate_us"], 1),
                        "saved (µs)": round(v["saved_us"], 1),
                        "saved by fusion groups and swaps (µs)": round(v["fusions_saved_us"], 1),
                    }
                    for p, v in cd.phases.items()
                ]
            ),
            hide_index=True,
            width="stretch",
            key="fl_phases",
            column_config={
                c: st.column_config.NumberColumn(format="localized")
                for c in (
                    f"{cd.base_label} (µs)",
                    f"{cd.label} (µs)",
                    "saved (µs)",
                    "saved by fusion groups and swaps (µs)",
                )
            },
        )
    patterns = cd.pattern_summary()
    if len(cd.fusions) > CARDS:
        st.markdown("**Fusion groups by what they compute** (groups repeated per layer counted ×N)")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "what": p["pattern"],
                        "phase": p["phase"],
                        "groups/step": p["groups_per_step"],
                        "bytes avoided (est.)": p["bytes_avoided_per_step"],
                        "before (µs)": p["base_time_us_per_step"],
                        "saved (µs)": p["time_saved_us_per_step"],
                    }
                    for p in patterns
                ]
            ),
            hide_index=True,
            width="stretch",
            key="fl_patterns",
            column_config={
                "bytes avoided (est.)": st.column_config.NumberColumn(format="localized"),
                "before (µs)": st.column_config.NumberColumn(format="%.1f"),
                "saved (µs)": st.column_config.NumberColumn(format="%.1f"),
            },
        )
