"""The sidebar: add traces (upload several at once), label them, pick the baseline, load bundled samples.

Why the uploader's key rotates after each batch: the widget would otherwise keep every uploaded file (up to 1 GB
each) in server memory and hand it back on every rerun; once parsed, the runs live in session state and the
uploader is emptied for the next batch.
"""

from __future__ import annotations

import time

import streamlit as st

from analyzer import api
from app_core import keys, samples, share, state, ui


def _ingest(files) -> None:
    """Parse a batch of uploads with a visible progress indicator; side files (manifest, ncu) attach to traces."""
    state.clear_messages()
    traces, side = [], []
    for f in files:
        data = f.getvalue()
        doc = state.read_side_file(f.name, data)
        if isinstance(doc, str):  # a side file off the runner's schema: one line, the traces load without it
            state.add_error(doc)
            continue
        (side if doc is not None else traces).append((f.name, doc if doc is not None else data))
    if traces and all(r.origin == "sample" for r in state.runs()) and state.runs():
        # The bundled samples were a demo: a user's own traces replace them in the comparison (reload from the sidebar).
        state.remove_origin("sample")
        # A toast, not a page message: it is news once, and must not sit on every page (and screenshot) after.
        st.toast("Bundled samples set aside for your traces; reload them under Sample sets.", icon=":material/info:")
    total = sum(len(d) for _, d in traces)
    with st.status(f"Parsing {len(traces)} trace(s), {ui.fmt_bytes(total)}…", expanded=True) as status:
        bar = st.progress(0.0)
        done_bytes = 0
        for i, (name, data) in enumerate(traces):
            bar.progress(
                min(done_bytes / max(total, 1), 1.0),
                text=f"{ui.esc(name, 80)} ({ui.fmt_bytes(len(data))}), {i + 1} of {len(traces)}",
            )
            t0 = time.perf_counter()
            run = state.add_trace(name, data)
            if run is not None:
                st.write(
                    f"✓ {ui.esc(name, 80)}: {run.summary.trace.meta.n_events:,} events in {time.perf_counter() - t0:,.1f} s"
                )
            done_bytes += len(data)
        bar.progress(1.0)
        for name, doc in side:
            if state.is_manifest(doc):
                n = state.attach_uploaded_manifest(doc, name)
                state.add_note(f"{name}: run context attached to {n} trace(s).")
            elif not state.attach_ncu(name, doc):
                state.add_error(f"{name}: Nsight Compute bytes, but no loaded trace of that variant")
        if state.baseline() is None:
            state.prefer_baseline()
        failed = len(state.errors())
        status.update(
            label=f"Parsed {len(traces) - failed} of {len(traces)} trace(s)", state="error" if failed else "complete"
        )


def _cache_use() -> str:
    """'The server's trace cache holds 1.2 GB of its 4.3 GB bound.' (the disk the checkbox spends; not its path)."""
    used, bound = api.cache_use()
    return f"The server's trace cache holds {ui.fmt_bytes(used)} of its {ui.fmt_bytes(bound)} bound."


def _relabel(key: str) -> None:
    state.relabel(key, st.session_state.get(keys.LABEL_PREFIX + key, ""))


def _pick_baseline() -> None:
    state.set_baseline(st.session_state[keys.BASELINE_PICK])


def _load_sample(name: str) -> None:
    st.session_state[keys.LOAD_SAMPLE] = name


def render() -> None:
    ss = st.session_state
    ss.setdefault(keys.UPLOAD_GEN, 0)
    with st.sidebar:
        st.markdown("### Traces")
        files = st.file_uploader(
            "Add PyTorch profiler traces",
            type=["json", "gz"],
            accept_multiple_files=True,
            key=f"fl_upload_{ss[keys.UPLOAD_GEN]}",
            help="Kineto Chrome-trace JSON (.json / .json.gz), up to 1 GB each. Several at once: e.g. eager and "
            "torch.compile. A runner manifest.json or <variant>.ncu.json dropped with them attaches its context "
            "and measured bytes. Files stay in this server's memory; nothing is written to disk unless you tick "
            "“Keep analysed uploads on this server's disk” below.",
        )
        st.checkbox(
            "Keep analysed uploads on this server's disk",
            key=keys.KEEP_UPLOADS,
            help="Off: uploads live in this session's memory only and are parsed again when added again. On: their "
            "analysed tables (kernel and op names included, up to ~30× a gzip upload's size) go to the server's "
            "trace cache, so the same file opens in a second next time, for anyone on this server. " + _cache_use(),
        )
        if files:
            _ingest(files)
            ss[keys.UPLOAD_GEN] += 1  # empties the uploader (see module doc)
            st.rerun()

        runs = state.runs()
        if runs:
            run_keys = [r.key for r in runs]
            labels = {r.key: r.label for r in runs}
            ss[keys.BASELINE_PICK] = state.baseline().key
            st.selectbox(
                "Baseline",
                run_keys,
                format_func=lambda k: labels.get(k, k),
                key=keys.BASELINE_PICK,
                on_change=_pick_baseline,
                help="Every other run is compared against this one (usually eager).",
            )
            for r in runs:
                ss[keys.LABEL_PREFIX + r.key] = r.label
                c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
                c1.text_input(
                    "Label" if r is runs[0] else "label",
                    key=keys.LABEL_PREFIX + r.key,
                    on_change=_relabel,
                    args=(r.key,),
                    label_visibility="collapsed",
                    max_chars=40,
                )
                c2.button(
                    "",
                    key=f"fl_rm_{r.key}",
                    icon=":material/close:",
                    help=f"Remove {r.file_name}",
                    on_click=state.remove,
                    args=(r.key,),
                    type="tertiary",
                )
                role = "baseline" if r is runs[0] else "candidate"
                st.caption(
                    f"{role} · {ui.esc(r.file_name, 60)} · {ui.fmt_bytes(r.size_bytes)} · {ui.esc(r.gpu_name, 40)}"
                )

        sets = samples.discover()
        if sets:
            with st.expander("Sample sets", expanded=not runs):
                for s in sets:
                    st.button(
                        s.title,
                        key=f"fl_sample_{s.name}",
                        on_click=_load_sample,
                        args=(s.name,),
                        help=f"sample_traces/{s.name}: " + ", ".join(v.get("name", "?") for v, _ in s.traces),
                        width="stretch",
                    )
        st.caption(share.link_caption())
        with st.expander("Chart titles"):
            st.text_input(
                "Subtitle on exported charts",
                key=keys.SUBTITLE,
                placeholder=ui.subtitle() or "workload · shapes · dtype · GPU",
                help="Leave empty for the automatic one (from the runner's manifest and the traces).",
                max_chars=200,
            )


def load_requested_sample() -> None:
    """Load a sample set the user asked for (button callbacks cannot show progress, so it happens here)."""
    name = st.session_state.pop(keys.LOAD_SAMPLE, None)
    if name is None:
        return
    for s in samples.discover():
        if s.name == name:
            state.remove_origin("sample")
            samples.load_set(s)
            return
