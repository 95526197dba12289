"""Profile on this GPU: run kernels.profile in a subprocess, show its progress live, then open Compare on the result."""

from __future__ import annotations

import secrets
import shlex
import sys

import streamlit as st

from app_core import keys, nav, profile_job, samples, state, ui

st.title("Profile on this GPU")
st.caption(
    "Runs `python -m kernels.profile` in a separate process (this server never creates a CUDA context): one "
    "torch.profiler trace per variant (CPU + CUDA, shapes recorded, 3 active steps), CUDA-event timings and, "
    "optionally, Nsight Compute DRAM bytes. When it finishes, the traces load here and Compare opens on them."
)
ui.show_messages()

# Who started a job: a random token in this session's state (the server's session id is fixed under AppTest).
session = st.session_state.setdefault(keys.OWNER_TOKEN, secrets.token_hex(8))
has_gpu, gpu_text = profile_job.gpu_available()
if has_gpu:
    st.success(ui.esc(gpu_text), icon=":material/memory:")
else:
    st.warning(f"Profiling is disabled: {ui.esc(gpu_text)}.", icon=":material/block:")


# Pure helpers live in profile_job (importing a page file runs the page, forms and all).
FUSELENS_VARIANTS = profile_job.FUSELENS_VARIANTS
fuselens_path_notes = profile_job.fuselens_path_notes
fallback_hint = profile_job.fallback_hint


def _session_id() -> str | None:
    """This session's Streamlit id (the runtime tells whether it is still connected; the token above cannot)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def _load_results(job: profile_job.Job) -> None:
    """Replace this session's runs with the job's traces and switch to Compare."""
    job.consumed = True
    found = samples.read_set(job.out_dir)
    if found is None:
        state.add_error(f"{job.out_dir.name}: the runner wrote no usable manifest or trace")
        return
    previous = len(state.runs())
    for r in state.runs():
        state.remove(r.key)
    loaded = samples.load_set(found, origin="profile")
    note = f"Loaded {len(loaded)} trace(s) recorded in runs/{job.out_dir.name}"
    if previous:
        note += f"; the {previous} previously loaded trace(s) were set aside (re-add them from the sidebar)"
    state.add_note(note + ".")
    if job.state == "partial":
        state.add_note(f"Some variants failed: {job.message}")
    state.add_notes(fuselens_path_notes(job.out_dir))
    if len(loaded) >= 2:
        st.switch_page(nav.page("compare.py"))


# A run whose tab was closed or reloaded (its session is gone) passes to this session: Cancel, progress and results
# work here as they would have there, instead of everyone seeing "busy" until the time limit.
adopted = profile_job.orphan()
if adopted is not None:
    profile_job.adopt(adopted, session, _session_id())
    st.info(
        "This page took over a profiling run started in a tab that was closed or reloaded"
        + (": cancel it below or wait for its results." if adopted.running else "."),
        icon=":material/sync_problem:",
    )

mine = profile_job.last_for(session)
if mine is not None and not mine.running and not mine.consumed:
    if mine.state in ("done", "partial"):
        _load_results(mine)
    else:
        mine.consumed = True
        st.error(f"Profiling {mine.state}: {ui.esc(mine.message)}", icon=":material/error:")
        tail = mine.snapshot()["stderr"][-12:]
        if tail:
            with st.expander("Runner output (last lines)"):
                st.code("\n".join(tail), language=None)


@st.fragment(run_every=1.0)
def progress_panel() -> None:
    """Live progress of the running job, polled every second; a full rerun when it ends loads the results."""
    job = profile_job.current()
    if job is None:
        st.rerun(scope="app")  # it just ended: the page above loads the traces and opens Compare
        return
    snap = job.snapshot()
    total = max(snap["total"], 1)
    own = job.owner == session
    who = "" if own else " (started by another session)"
    st.progress(
        min(snap["done"] / total, 1.0), text=f"{snap['done']}/{total} variants · {snap['elapsed_s']:,.0f} s{who}"
    )
    st.caption(ui.esc(snap["message"]))
    rows = [e for e in snap["events"] if e.get("variant")]
    if rows:
        st.dataframe(
            [
                {"variant": e["variant"], "event": e["event"].replace("variant_", ""), "message": e["message"]}
                for e in rows
            ],
            hide_index=True,
            width="stretch",
        )
    if own:
        st.button("Cancel run", key="fl_cancel", on_click=job.cancel, icon=":material/stop_circle:", type="primary")


running = profile_job.current()
if running is not None:
    if running.owner != session:
        st.info("Busy: a profiling run started by another session is in progress; one run at a time on this server.")
    progress_panel()

with st.form("fl_profile_form"):
    c1, c2 = st.columns([2, 1])
    workload = c1.selectbox(
        "Workload",
        profile_job.WORKLOADS + profile_job.MODEL_WORKLOADS,
        format_func=lambda w: samples.WORKLOAD_NAMES.get(w, w),
        help="geglu: the Hugging Face post's MLP (gate/up/down, no bias, gelu_tanh). plain: Linear-GELU-Linear. "
        "llama-model / gemma-model: a whole Hugging Face causal LM (transformers, random weights) with its own "
        "widths and the layers below; its variants are eager, sdpa, compile, compile-fuselens.",
    )
    dtype = c2.selectbox("dtype", profile_job.DTYPES)
    variants = st.multiselect(
        "Variants",
        list(dict.fromkeys(profile_job.VARIANTS + profile_job.LAYER_VARIANTS)),
        default=list(profile_job.DEFAULT_VARIANTS),
        help="eager: cuBLAS + ATen kernels; compile: torch.compile (Inductor); liger: Liger-Kernel gating (skipped if "
        "not installed); fuselens-gating / fuselens: this repo's Triton kernels (forward only; fuselens runs the "
        "measured-fastest of its paths); fuselens-graph: fuselens replayed from a CUDA graph.",
    )
    c1, c2, c3, c4 = st.columns(4)
    batch = c1.number_input("batch", 1, profile_job.MAX_BATCH, 64, step=1)
    seq = c2.number_input("seq", 1, profile_job.MAX_SEQ, 128, step=1)
    d_model = c3.number_input("d_model", 1, profile_job.MAX_DIM, 768, step=1)
    hidden = c4.number_input("hidden", 1, profile_job.MAX_DIM, 3072, step=1)
    c1, c2, c3 = st.columns([2, 2, 1])
    measure = c1.checkbox("Measure bytes with Nsight Compute (slower)", help="ncu DRAM read + write bytes per kernel")
    train = c2.checkbox(
        "Training step",
        help="MLPs: forward + backward. Whole models: loss, backward and an AdamW step. fuselens trains through its "
        "training op (MLPs); fuselens-gating, fuselens-graph and a model's compile-fuselens are forward-only: skipped",
    )
    layers = c3.number_input(
        "layers",
        1,
        profile_job.MAX_LAYERS,
        4,
        step=1,
        help="Whole models only: decoder layers (d_model and hidden "
        "are the model's own: Llama 2048 / 5632, Gemma 2048 / 16384)",
    )
    why_disabled = None if has_gpu else gpu_text
    submitted = st.form_submit_button(
        "Run profile",
        type="primary",
        icon=":material/play_arrow:",
        disabled=not has_gpu,
        help=f"Disabled: {why_disabled}" if why_disabled else "One run at a time on this server.",
    )

params = profile_job.Params(
    workload=workload,
    batch=int(batch),
    seq=int(seq),
    d_model=int(d_model),
    hidden=int(hidden),
    dtype=dtype,
    variants=tuple(variants),
    measure_bytes=bool(measure),
    train=bool(train),
    layers=int(layers),
)
problems = params.problems()
if problems:
    st.error("Cannot run: " + ui.esc("; ".join(problems)))
else:
    hint = fallback_hint(params)
    if hint:
        st.warning(ui.esc(hint), icon=":material/call_split:")
    st.caption("What runs (an argument list, never a shell string), from the project folder:")
    argv = params.argv(profile_job.RUNS_DIR / "profile-<timestamp>")
    shown = ["python", *argv[1:]] if argv[0] == sys.executable else argv  # the same command, readable
    shown = [a.replace(str(profile_job.ROOT) + "/", "") for a in shown]
    st.code(shlex.join(shown), language="bash", wrap_lines=True)

if submitted and has_gpu and not problems:
    try:
        profile_job.start(params, session, owner_session=_session_id())
    except profile_job.Busy as exc:
        st.warning(f"Busy: {ui.esc(exc)}", icon=":material/hourglass_top:")
    except ValueError as exc:
        st.error(ui.esc(exc))
    else:
        st.rerun()
