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

from app_core import keys, params, samples, state


def apply_on_first_run(open_default) -> None:
    """On a session's first run: load what the URL names (a bundled set, its runs), else `open_default()`; then the
    baseline, and preselect the candidate and step. A link to uploaded runs opens nothing: it lists the runs it
    needs and waits for them (`apply_pending`)."""
    if st.session_state.get(keys.SHARE_APPLIED):
        return
    st.session_state[keys.SHARE_APPLIED] = True
    view, problems = params.parse(dict(st.query_params))
    state.add_errors(problems)
    if view.set:
        for s in samples.discover():
            if s.name == view.set:
                samples.load_set(s, variants=tuple(view.runs) or None)
                loaded = {r.label for r in state.runs()}
                for lab in [x for x in view.runs if x not in loaded]:
                    state.add_error(f"link: set {view.set!r} has no run {lab!r}; left out")
                    view.runs.remove(lab)
                break
        else:
            state.add_error(f"link: no bundled sample set named {view.set!r}; opened the default")
            view = params.View()
            open_default()
    elif view.runs and not view.bad_set:
        st.session_state[keys.SHARE_PENDING] = (
            view  # runs from the sharer's uploads: say so, and wait for the same files
        )
    else:
        open_default()
    _apply(view)


def _apply(view: params.View) -> bool:
    """Baseline, candidate and step of `view` when all its runs are loaded; False (nothing changed) otherwise."""
    by_label = {r.label: r for r in state.runs()}
    if any(lab not in by_label for lab in view.runs):
        return False
    for name in ("baseline", "candidate"):
        value = getattr(view, name)
        if value and value not in by_label:
            state.add_error(f"link: {name} {value!r} is not a loaded run; ignored")
            setattr(view, name, None)
    if view.baseline in by_label:
        state.set_baseline(by_label[view.baseline].key)
    if view.candidate:
        st.session_state[keys.COMPARE_CANDIDATE] = view.candidate
    if view.step is not None:
        st.session_state[keys.TIMELINE_STEP] = view.step
    return True


def missing_runs() -> list[str]:
    """The runs a pending shared link names that are not loaded (in the link's order); [] when none is pending."""
    view = st.session_state.get(keys.SHARE_PENDING)
    if view is None:
        return []
    loaded = {r.label for r in state.runs()}
    return [lab for lab in view.runs if lab not in loaded]


def apply_pending() -> None:
    """Once the runs a shared link named are loaded (the same files uploaded), apply its view and forget it."""
    view = st.session_state.get(keys.SHARE_PENDING)
    if view is not None and _apply(view):
        del st.session_state[keys.SHARE_PENDING]
        state.add_note(
            "The shared link's view is applied: "
            + ", ".join(view.runs)
            + (f"; baseline {view.baseline}" if view.baseline else "")
        )


def dismiss_pending() -> None:
    st.session_state.pop(keys.SHARE_PENDING, None)


def sync() -> None:
    """Write the current view into the URL (called on every run, after the page is known). While a shared link's
    runs are not loaded, the URL keeps saying what it asked for, so the link can be passed on as it came."""
    apply_pending()
    if st.session_state.get(keys.SHARE_PENDING) is not None:
        return
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
    cand = st.session_state.get(keys.COMPARE_CANDIDATE)
    if cand:
        params["candidate"] = str(cand)
    step = st.session_state.get(keys.TIMELINE_STEP)
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
