"""A shared link's parameters, validated: what the URL may say, and one line for anything it says wrong.

    /compare?set=hf_geglu_bf16&runs=eager,compile&baseline=eager&candidate=compile&step=2

A URL is user input. Each parameter is read here, once, into a `View`; a bad one is dropped with one line naming it
(`link: step '²' is not a step number; showing the representative step`), never a traceback. `str.isdigit()` is
not the test for a number: it accepts '²' and '٣', which `int()` then refuses or reads as another number.

Also here: keeping a selector's session value among the options it offers now (`keep_choice`), since a value that
outlived its run (a candidate from the demo after an upload) would otherwise still be shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analyzer.api import safe_text

MAX_PARAM = 400  # characters read from one parameter
MAX_RUNS = 32  # runs named in one link
MAX_LABEL = 40  # a run label's length (state.relabel's bound)
MAX_STEP = 1_000_000  # a step position; a trace with more steps than this is not a Kineto trace we read
KNOWN = ("set", "runs", "baseline", "candidate", "step")
_STEP = re.compile(r"[0-9]{1,7}")  # ASCII digits only
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")  # a sample set folder name


@dataclass
class View:
    """What a link asks for; every field already checked for form (not yet for being loaded)."""

    set: str | None = None
    runs: list[str] = field(default_factory=list)
    baseline: str | None = None
    candidate: str | None = None
    step: int | None = None
    bad_set: bool = False  # a `set` was named but refused: the runs are a sample set's, not uploads to wait for

    def is_empty(self) -> bool:
        return not (self.set or self.runs or self.baseline or self.candidate or self.step is not None)


def _clip(value: object) -> str:
    return str(value if value is not None else "")[:MAX_PARAM]


def _shown(value: str) -> str:
    """The value as the line quotes it: repr() escapes control and bidi characters (and keeps '²' readable)."""
    return safe_text(repr(value[:40]) + ("…" if len(value) > 40 else ""))


def parse(query: dict) -> tuple[View, list[str]]:
    """`View` of a link's query parameters and one error line per bad parameter (it is then ignored)."""
    view, problems = View(), []
    for name in query:
        if name not in KNOWN:
            problems.append(f"link: unknown parameter {_shown(str(name))} ignored (known: {', '.join(KNOWN)})")
    raw_set = _clip(query.get("set", "")).strip()
    if raw_set:
        if _NAME.fullmatch(raw_set):
            view.set = raw_set
        else:
            view.bad_set = True
            problems.append(f"link: set {_shown(raw_set)} is not a sample set name; opened the default")
    raw_runs = [x.strip() for x in _clip(query.get("runs", "")).split(",") if x.strip()]
    for r in raw_runs:
        if len(r) > MAX_LABEL or safe_text(r) != r:
            problems.append(f"link: run label {_shown(r)} is not a label this app writes; ignored")
        elif r not in view.runs:
            view.runs.append(r)
    if len(view.runs) > MAX_RUNS:
        problems.append(f"link: {len(view.runs)} runs named; the first {MAX_RUNS} are used")
        view.runs = view.runs[:MAX_RUNS]
    for name in ("baseline", "candidate"):
        value = _clip(query.get(name, "")).strip()
        if not value:
            continue
        if view.runs and value not in view.runs:
            problems.append(f"link: {name} {_shown(value)} is not one of the link's runs; ignored")
        elif len(value) > MAX_LABEL or safe_text(value) != value:
            problems.append(f"link: {name} {_shown(value)} is not a label this app writes; ignored")
        else:
            setattr(view, name, value)
    if view.candidate is not None and view.candidate == view.baseline:
        problems.append(f"link: candidate {_shown(view.candidate)} is the baseline; ignored")
        view.candidate = None
    raw_step = _clip(query.get("step", "")).strip()
    if raw_step:
        if _STEP.fullmatch(raw_step) and int(raw_step) < MAX_STEP:
            view.step = int(raw_step)
        else:
            problems.append(f"link: step {_shown(raw_step)} is not a step number; showing the representative step")
    return view, problems


def keep_choice(session_state, key: str, options: list, default=None, *, what: str = "", notes: list | None = None):
    """Make `session_state[key]` one of `options` before its selector is drawn, and return it.

    Setting the value (rather than deleting a stale one) is what makes the widget show it: a selector whose key
    outlived its options otherwise keeps displaying the old choice while the page uses another. A stale value that
    came from somewhere (a link, the demo) adds one line to `notes` when given."""
    current = session_state.get(key)
    if current in options:
        return current
    choice = default if default in options else (options[0] if options else None)
    if current is not None and notes is not None and what:
        notes.append(f"{what} {_shown(str(current))} is not loaded; showing {_shown(str(choice))}")
    if choice is None:
        session_state.pop(key, None)
    else:
        session_state[key] = choice
    return choice


def keep_choices(session_state, key: str, options: list) -> list:
    """The multi-select version (all options selected at first): drop values that are no longer options, and select
    options offered for the first time (a run just uploaded is shown, not silently left out)."""
    seen_key = f"{key}__offered"
    offered = session_state.get(seen_key)
    current = session_state.get(key)
    if current is None or offered is None:
        kept = list(options)
    else:
        kept = [v for v in current if v in options] + [v for v in options if v not in offered and v not in current]
    session_state[seen_key] = list(options)
    if current is None or kept != list(current):
        session_state[key] = kept
    return kept
