"""Share a view: the page, the runs, the baseline, the Compare candidate and the Timeline step live in the URL.

    /compare?set=hf_geglu_bf16&runs=eager,compile,fuselens&baseline=eager&candidate=fuselens&step=2

A teammate opening the link gets the same view of the bundled sample set (`set`: a folder of sample_traces/,
looked up in samples.discover(), never a path taken from the URL). Runs from uploads live only in the uploader's
session, so for them the link carries the labels and the baseline, and says so; nothing in it is secret.

Why every run writes the URL: Streamlit clears query parameters on page changes, and a link must reproduce the
view as it is now.
"""

from __future__ import annotations

import streamlit as st

from app_pages import samples, state

K_APPLIED = "fl_share_applied"
MAX_PARAM = 400  # characters read from one parameter: a URL is user input


def _param(name: str) -> str:
    return str(st.query_params.get(name, ""))[:MAX_PARAM]


def _runs_param() -> list[str]:
    return [x.strip() for x in _param("runs").split(",") if x.strip()][:32]


def apply_on_first_run(open_default) -> None:
    """On a session's first run: load what the URL names (a bundled set, its runs), else `open_default()`; then the
    baseline, and preselect the candidate and step."""
    if st.session_state.get(K_APPLIED):
        return
    st.session_state[K_APPLIED] = True
    name = _param("set")
    loaded = False
    if name:
        wanted = tuple(_runs_param()) or None
        for s in samples.discover():
            if s.name == name:
                samples.load_set(s, variants=wanted)
                loaded = True
                break
        else:
            state._state()[state.K_ERRORS].append(f"link: no bundled sample set named {name!r}; opened the default")
    if not loaded:
        open_default()
    base = _param("baseline")
    for r in state.runs():
        if base and r.label == base:
            state.set_baseline(r.key)
    if _param("candidate"):
        st.session_state["fl_compare_candidate"] = _param("candidate")
    step = _param("step")
    if step.isdigit():
        st.session_state["fl_timeline_step"] = int(step)


def sync() -> None:
    """Write the current view into the URL (called on every run, after the page is known)."""
    runs = state.runs()
    params: dict[str, str] = {}
    origins = {r.origin for r in runs}
    sets = {r.context.get("_sample_set") for r in runs}
    if runs and origins == {"sample"} and len(sets) == 1 and None not in sets:
        params["set"] = str(next(iter(sets)))
    if runs:
        params["runs"] = ",".join(r.variant.get("name") or r.label for r in runs)
        base = state.baseline()
        if base is not None:
            params["baseline"] = base.label
    cand = st.session_state.get("fl_compare_candidate")
    if cand:
        params["candidate"] = str(cand)
    step = st.session_state.get("fl_timeline_step")
    if isinstance(step, int) and step >= 0:
        params["step"] = str(step)
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)


def link_caption() -> str:
    """What the sidebar says about the link."""
    runs = state.runs()
    if runs and all(r.origin == "sample" for r in runs):
        return "The address bar holds this view (page, runs, baseline, candidate, step): copy it to share."
    return (
        "The address bar holds this view's page, labels, baseline, candidate and step; uploaded traces stay in your "
        "session, so a teammate needs the same files."
    )
