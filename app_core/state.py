"""Session state of the dashboard: the loaded runs, their labels, the baseline, and one-line load errors.

Pages read and write it through the accessors here (`runs`, `baseline`, `run_by_key`, `errors`, `add_error`,
`add_note` …), never by indexing st.session_state; every key it holds is named in app_core.keys.

Why this shape:
* A run is keyed by the xxh3-128 digest of its bytes (analyzer.readers.cache.content_key, ~0.1–0.35 s per GB).
  Parsing goes through the analyzer's on-disk columnar cache (size-bounded, see README "Trace cache"), so a trace
  is parsed once however many sessions or servers open it; a cached open reads the tables back in well under a
  second. No in-memory cross-session cache (`st.cache_data` kept up to 24 whole traces, unbounded in bytes, after
  their sessions closed: 8.75 GiB held for one 2 M-kernel upload): a run lives in its session's state only, so
  its memory returns when the session closes or the run is removed (`_release` hands freed heap back to the OS).
* Nothing here takes a server-side path from user input: uploads arrive as bytes and stay in memory; the only paths
  read are the project's own sample_traces/ and the runs/ folders the Profile page creates.
* Uploads are not written to disk: their analysed tables (kernel names included; a dense trace's entry is ~28× its
  gzip size) go to the on-disk cache only when the user ticks "Keep analysed uploads on this server's disk" in the
  sidebar (keys.KEEP_UPLOADS). Samples and Profile runs are files on this server already and are cached as usual.
* Parses share a memory budget (ParseBudget): each reserves its estimated peak (1.6× the JSON bytes, from the gzip
  trailer or a 15:1 guess), and one that would pass the budget while others run waits for them, then is refused
  with one line: a few large uploads at once queue instead of exhausting the machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from analyzer import api
from analyzer.api import (
    ENTRY_NUMBERS,
    MANIFEST_SCHEMA,
    FuseLensError,
    content_key,
    decompression_cap,
    diff_runs,
    entry_problems,
    est_bytes_json,
    file_label,
    gzip_ratio_limit,
    load_summary,
    release_freed_memory,
    safe_text,
    side_number,
    unique_label,
)
from app_core import keys
from fuselens import settings
from fuselens.paths import samples_dir

log = logging.getLogger("fuselens.app")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = samples_dir()  # the clone's sample_traces/, else the copy an installed wheel carries
MAX_SIDE_FILE_BYTES = 4 << 20  # manifest.json / <variant>.ncu.json are kBs; 4 MB of `{},` decodes to ~100 MB of objects


@dataclass
class Run:
    """One loaded trace in this session."""

    key: str  # content digest
    file_name: str
    label: str
    origin: str  # 'sample', 'upload' or 'profile'
    summary: object  # analyzer.summary.Summary
    size_bytes: int
    parse_s: float
    context: dict = field(default_factory=dict)  # from the runner's manifest: workload, shapes, dtype, gpu, torch …
    variant: dict = field(default_factory=dict)  # this run's manifest entry: status, median_us, ncu …
    measured: dict | None = None  # <variant>.ncu.json: Nsight Compute DRAM bytes per kernel, when recorded

    @property
    def trace(self):
        return self.summary.trace

    @property
    def gpu_name(self) -> str:
        gpu = (self.context.get("gpu") or {}).get("name") if isinstance(self.context.get("gpu"), dict) else None
        return gpu or self.trace.meta.gpu_name or "unknown GPU"

    @property
    def torch_version(self) -> str:
        return str(self.context.get("torch") or self.trace.meta.extra.get("torch") or "") or "not recorded"


# ---------------------------------------------------------------------------------------------------- parsing
def digest(data: bytes) -> str:
    return content_key(data)


def _parse(key: str, name: str, _data: bytes, cache: bool | None = None):
    """load_trace + summarize, through the on-disk cache unless `cache` is False, keyed by the same content digest
    (not hashed again), inside the server's parse memory budget."""
    with PARSE_BUDGET.reserve(name, estimated_peak_bytes(_data)):
        t0 = time.perf_counter()
        summary = load_summary(_data, name=name, key=key, cache=cache)
        return summary, time.perf_counter() - t0


def keep_uploads() -> bool:
    """True when the user allowed uploads' analysed tables on the on-disk cache (the sidebar's checkbox)."""
    return bool(st.session_state.get(keys.KEEP_UPLOADS, False))


# ---------------------------------------------------------------------------------------------------- memory budget
ENV_PARSE_BUDGET = "FUSELENS_PARSE_BUDGET_BYTES"
ENV_PARSE_WAIT = "FUSELENS_PARSE_WAIT_S"
PEAK_PER_JSON_BYTE = 1.6  # a trace's parse peaks at ~1.6× its JSON bytes (docs/ARCHITECTURE.md)


def estimated_peak_bytes(data: bytes) -> int:
    """What parsing `data` may cost at its peak: 1.6× its JSON bytes (gzip: the trailer's size, or 15× when that
    is implausible), never more than the loader lets through (the decompression cap; 50:1 for gzip)."""
    json_bytes = est_bytes_json(data)
    with contextlib.suppress(FuseLensError, ValueError):
        if data[:2] == b"\x1f\x8b" and 0 < gzip_ratio_limit() < math.inf:
            json_bytes = min(json_bytes, int(len(data) * gzip_ratio_limit()))
        json_bytes = min(json_bytes, decompression_cap())
    return int(json_bytes * PEAK_PER_JSON_BYTE)


class BudgetRefused(FuseLensError):
    """A parse that would pass the server's memory budget while others run, and waited too long for them."""


class ParseBudget:
    """Bytes of estimated peak memory that parses in this server process may hold at once.

    A parse reserves its estimate; while others hold the budget and it would not fit, it waits (they finish in
    seconds to minutes), and after `wait_s` is refused with one line. A parse alone always runs, whatever its
    estimate: the loader's cap and bomb guard bound it. Total: $FUSELENS_PARSE_BUDGET_BYTES, else half the
    machine's memory."""

    def __init__(self, total: int | None = None, wait_s: float | None = None):
        self._total, self._wait_s = total, wait_s
        self.used = 0
        self.running = 0
        self._cond = threading.Condition()

    @property
    def total(self) -> int:
        if self._total is not None:
            return self._total
        env = settings.text(ENV_PARSE_BUDGET)
        with contextlib.suppress(ValueError):
            if env and float(env) > 0:
                return int(float(env))
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
        except (ValueError, OSError, AttributeError):
            return 8 << 30

    @property
    def wait_s(self) -> float:
        if self._wait_s is not None:
            return self._wait_s
        with contextlib.suppress(ValueError):
            return max(0.0, float(settings.text(ENV_PARSE_WAIT) or 600))
        return 600.0

    @contextlib.contextmanager
    def reserve(self, name: str, nbytes: int):
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            while self.running and self.used + nbytes > self.total:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BudgetRefused(
                        f"{name}: not parsed: the server is parsing {self.running} other trace(s) holding "
                        f"~{self.used / 1e9:,.1f} GB of its {self.total / 1e9:,.1f} GB parse budget, and this one "
                        f"needs ~{nbytes / 1e9:,.1f} GB; add it again in a minute ({ENV_PARSE_BUDGET})"
                    )
                self._cond.wait(min(left, 1.0))
            self.used += nbytes
            self.running += 1
        try:
            yield
        finally:
            with self._cond:
                self.used -= nbytes
                self.running -= 1
                self._cond.notify_all()


PARSE_BUDGET = ParseBudget()  # one per server process: every session's parses share it


def _release() -> None:
    """Give the heap that a removed run freed back to the OS (glibc keeps freed small blocks otherwise)."""
    release_freed_memory()


def _state():
    ss = st.session_state
    ss.setdefault(keys.RUNS, {})
    ss.setdefault(keys.ERRORS, [])
    ss.setdefault(keys.NOTES, [])
    ss.setdefault(keys.DIFFS, {})
    return ss


def runs() -> list[Run]:
    """Runs in display order: the baseline first, then the others in load order."""
    ss = _state()
    all_runs = list(ss[keys.RUNS].values())
    base = ss.get(keys.BASELINE)
    return sorted(all_runs, key=lambda r: r.key != base)


def baseline() -> Run | None:
    ss = _state()
    return ss[keys.RUNS].get(ss.get(keys.BASELINE))


def candidates() -> list[Run]:
    base = baseline()
    return [r for r in runs() if base is None or r.key != base.key]


def errors() -> list[str]:
    return list(_state()[keys.ERRORS])


def notes() -> list[str]:
    return list(_state()[keys.NOTES])


def add_error(line: str) -> None:
    """A one-line error (naming the file) shown at the top of every page until dismissed or the next upload."""
    _state()[keys.ERRORS].append(line)


def add_errors(lines) -> None:
    _state()[keys.ERRORS].extend(lines)


def add_note(line: str) -> None:
    """A one-line notice shown like an error, as information."""
    _state()[keys.NOTES].append(line)


def add_notes(lines) -> None:
    _state()[keys.NOTES].extend(lines)


def run_by_key(key: str) -> Run | None:
    """The loaded run with this key, or None."""
    return _state()[keys.RUNS].get(key)


def clear_messages() -> None:
    ss = _state()
    ss[keys.ERRORS] = []
    ss[keys.NOTES] = []


def add_trace(
    name: str,
    data: bytes,
    *,
    origin: str = "upload",
    label: str | None = None,
    context: dict | None = None,
    variant: dict | None = None,
    measured: dict | None = None,
) -> Run | None:
    """Parse `data` (cached by content) and add it as a run. On failure: one error line naming the file, no raise.

    The other runs are never touched by a failure: a bad file costs only its own line.
    """
    ss = _state()
    key = digest(data)
    existing = ss[keys.RUNS].get(key)
    if existing is not None:
        ss[keys.NOTES].append(f"{name}: same content as the loaded run “{existing.label}”; kept once.")
        return existing
    try:
        summary, parse_s = _parse(key, name, data, cache=None if origin != "upload" or keep_uploads() else False)
    except FuseLensError as err:
        ss[keys.ERRORS].append(str(err) if str(err).startswith(name) else f"{name}: {err}")
        return None
    except MemoryError:
        ss[keys.ERRORS].append(
            f"{name}: out of memory while parsing {len(data) / 1e6:,.0f} MB; the other traces stay loaded"
        )
        return None
    except Exception as exc:  # an analyzer bug must cost one line, not the session (details go to the server log)
        log.exception("unexpected error while parsing %s", name)
        first = " ".join(str(exc).split())[:200]
        ss[keys.ERRORS].append(f"{name}: could not be analyzed (internal error {type(exc).__name__}: {first})")
        return None
    taken = {r.label for r in ss[keys.RUNS].values()}
    run = Run(
        key=key,
        file_name=name,
        label=unique_label(safe_text(label, 40) or file_label(name) or "run", taken),
        origin=origin,
        summary=summary,
        size_bytes=len(data),
        parse_s=parse_s,
        context=dict(context or {}),
        variant=dict(variant or {}),
        measured=measured,
    )
    _apply_facts(run)
    ss[keys.RUNS][key] = run
    if ss.get(keys.BASELINE) not in ss[keys.RUNS]:
        ss[keys.BASELINE] = key
    ss[keys.DIFFS] = {}
    return run


def remove(key: str) -> None:
    ss = _state()
    run = ss[keys.RUNS].pop(key, None)
    if ss.get(keys.BASELINE) not in ss[keys.RUNS]:
        ss[keys.BASELINE] = next(iter(ss[keys.RUNS]), None)
    ss[keys.DIFFS] = {}
    if run is not None:
        del run
        _release()


def remove_origin(origin: str) -> None:
    for r in [r for r in _state()[keys.RUNS].values() if r.origin == origin]:
        remove(r.key)


def set_baseline(key: str) -> None:
    ss = _state()
    if key in ss[keys.RUNS]:
        ss[keys.BASELINE] = key


def relabel(key: str, label: str) -> None:
    ss = _state()
    run = ss[keys.RUNS].get(key)
    if run is None:
        return
    taken = {r.label for r in ss[keys.RUNS].values() if r.key != key}
    run.label = unique_label(safe_text(label, 40) or file_label(run.file_name) or "run", taken)


def prefer_baseline(names: tuple[str, ...] = ("eager",)) -> None:
    """Make the first run whose label or variant is one of `names` the baseline (eager is the natural one)."""
    for r in _state()[keys.RUNS].values():
        if r.label in names or r.variant.get("name") in names:
            set_baseline(r.key)
            return


# ---------------------------------------------------------------------------------------------------- side files
def is_manifest(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("schema") == MANIFEST_SCHEMA and isinstance(doc.get("variants"), list)


def is_ncu(doc: object) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("kernels"), list) and "metrics" in doc


def read_side_file(name: str, data: bytes) -> dict | str | None:
    """A runner manifest.json or <variant>.ncu.json uploaded beside traces (the document, checked by
    analyzer.runmeta); a str: one line saying why a side file was left out (off-schema, too deep, a field of the
    wrong type); None: not a side file (then it is a trace)."""
    lower = Path(name).name.lower()
    named = lower == "manifest.json" or lower.endswith(".ncu.json")  # the runner's names: said, never parsed as a trace
    if not lower.endswith(".json") or (len(data) > MAX_SIDE_FILE_BYTES and not named):
        return None
    head = bytes(data[:4096]).lstrip()
    if not named and (not head.startswith(b"{") or b"traceEvents" in head):
        return None
    where = safe_text(name, 80)
    try:
        doc = api.decode_json(data, where, MAX_SIDE_FILE_BYTES)
    except api.SideFileError as err:
        return f"{err}; left out" if named else None
    if not isinstance(doc, dict):
        return f"{where}: not a JSON object; left out" if named else None
    try:
        if doc.get("schema") == MANIFEST_SCHEMA or lower == "manifest.json" and "variants" in doc:
            api.check_manifest(doc, where)
            return doc if is_manifest(doc) else f"{where}: variants: missing; left out"
        if is_ncu(doc) or lower.endswith(".ncu.json"):
            api.check_ncu(doc, where)
            return doc
    except api.SideFileError as err:
        return f"{err}; left out"
    return f"{where}: not a runner manifest or Nsight Compute file; left out" if named else None


def _apply_facts(run: Run) -> None:
    """Put the manifest facts where analyzer.diff looks for them (this session's copy of the trace meta)."""
    if run.context and run.variant:
        api.attach_manifest(run.trace, manifest=run.context, entry=run.variant)  # one mapping for every source


def measured_roofs(run: Run) -> dict:
    """{'copy_gbps', 'matmul_tflops', 'matmul_dtype'} the runner measured on the run's GPU (manifest "ceilings",
    `kernels.profile --measure-roofs`), malformed figures left out; {} when none were recorded."""
    c = run.context.get("ceilings") if isinstance(run.context.get("ceilings"), dict) else {}
    out: dict = {}
    for k in ("copy_gbps", "matmul_tflops"):
        v = side_number(c.get(k))
        if v:
            out[k] = v
    if out.get("matmul_tflops"):
        out["matmul_dtype"] = " ".join(str(c.get("matmul_dtype") or "").split())[:12]
    return out


def context_from_manifest(manifest: dict) -> dict:
    """The run context every run of one manifest shares (everything but the per-variant list)."""
    return {k: v for k, v in manifest.items() if k != "variants"}


def clean_entry(entry: dict, where: str = "manifest.json") -> tuple[dict, list[str]]:
    """A manifest variant entry with its malformed figures (`"median_us": "abc"`) left out, and one line per
    problem naming the file and the variant. A damaged side file costs its figures, never a page."""
    bad = entry_problems(entry)
    if not bad:
        return dict(entry), []

    out = {k: v for k, v in entry.items() if k not in ENTRY_NUMBERS or side_number(v) is not None}
    name = " ".join(str(entry.get("name", "?")).split())[:40]
    return out, [f"{where}: variant {name}: {b}; left out" for b in bad]


def attach_uploaded_manifest(manifest: dict, name: str = "manifest.json") -> int:
    """Give loaded runs whose file matches a manifest variant's trace that manifest's context. Returns how many."""
    by_trace = {str(v.get("trace")): v for v in manifest.get("variants", []) if isinstance(v, dict)}
    n = 0
    for r in _state()[keys.RUNS].values():
        v = by_trace.get(Path(r.file_name).name)
        if v is not None:
            r.context = context_from_manifest(manifest)
            r.variant, problems = clean_entry(v, name)
            add_errors(problems)
            _apply_facts(r)
            n += 1
    _state()[keys.DIFFS] = {}
    return n


def ncu_refusal(name: str, doc: object) -> str | None:
    """One line naming an Nsight Compute side file and what is malformed in it, or None."""
    why = api.ncu_problem(doc, name)
    return f"{why}; measured bytes not attached" if why else None


def attach_ncu(name: str, doc: dict) -> bool:
    """Attach <variant>.ncu.json to the run recorded from <variant>.json.gz (same stem). True when one matched.

    A malformed file (a counter that is not a number) is refused with one error line; True then too (it was
    recognised, its problem said)."""
    problem = ncu_refusal(name, doc)
    if problem:
        add_error(problem)
        return True
    stem = Path(name).name[: -len(".ncu.json")] if name.endswith(".ncu.json") else None
    for r in _state()[keys.RUNS].values():
        if stem and file_label(r.file_name) == stem or r.variant.get("ncu") == Path(name).name:
            r.measured = doc
            return True
    return False


# ---------------------------------------------------------------------------------------------------- diff
# The fusion diff is near-linear in GPU ops per step (bench/results/diff.md: ~0.1 s at 2k, ~0.4-0.9 s at 20k, 2-4 s at
# 100k on 2 cores). Up to DIFF_AUTO_MAX_OPS it runs by itself; above (a whole long training trace as one "step"),
# the Compare page asks first. Either way it runs on a worker thread, so a slow diff never freezes the other pages.
DIFF_AUTO_MAX_OPS = 250_000
DIFF_WAIT_S = 3.0  # wait this long in the page run before showing "computing…" (small diffs render at once)
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fuselens-diff")


@dataclass(frozen=True)
class DiffPending:
    """A diff is being computed on a worker thread."""

    started: float
    ops_per_step: int

    @property
    def elapsed_s(self) -> float:
        return time.time() - self.started


@dataclass(frozen=True)
class DiffDeferred:
    """The steps are too big to diff without asking: ops_per_step GPU ops in the largest representative step."""

    ops_per_step: int


def diff_size() -> int:
    """GPU ops in the largest steady-state step among the runs (what the alignment's cost grows with)."""
    sizes = []
    for r in runs():
        try:
            k = float((r.summary.per_step or {}).get("kernels") or 0)
        except (TypeError, ValueError):
            k = 0.0
        sizes.append(k if math.isfinite(k) else 0.0)  # a run with unknown counts costs nothing to align
    return int(max(sizes, default=0))


def not_comparable(run: Run) -> str | None:
    """Why `run` cannot take part in the fusion diff (no GPU kernel in the steps the diff would align), or None.

    Checked before the diff, so one empty run (a truncated trace, a CPU-only profile) costs its own line and the
    other runs are still compared. Cached on the run: its trace never changes."""
    cached = getattr(run, "_not_comparable", False)
    if cached is not False:
        return cached
    g = run.trace.gpu_ops
    steps = [int(s) for s in (run.summary.steps_used or [])]
    in_steps = g["step"].isin(steps) if steps else g["step"] >= 0
    n = int(((g["kind"] == "kernel") & in_steps).sum()) if len(g) else 0
    why = None
    if n == 0:
        recorded = len(run.trace.steps)
        why = (
            f"{run.label} ({run.file_name}) has no GPU kernel in its steady-state steps "
            f"({recorded} profiler step(s) recorded; a truncated or CPU-only trace?): left out of the comparison"
        )
    object.__setattr__(run, "_not_comparable", why)
    return why


def comparison() -> tuple[Run | None, list[Run], list[str]]:
    """(baseline, candidates, lines) of the diff that can be computed: runs without GPU kernels are left out, each
    with one line saying so; when the chosen baseline is such a run, the first usable run stands in (said too)."""
    base = baseline()
    lines = []
    usable = []
    for r in runs():
        why = not_comparable(r)
        if why:
            lines.append(why)
        else:
            usable.append(r)
    if base is not None and not_comparable(base) and usable:
        eager = [r for r in usable if r.label == "eager" or r.variant.get("name") == "eager"]
        stand_in = (eager or usable)[0]
        lines.append(
            f"the baseline {base.label} cannot be compared; {stand_in.label} stands in as the baseline "
            "(pick another one in the sidebar)"
        )
        base = stand_in
    if base is not None and not_comparable(base):
        base = None
    cands = [r for r in usable if base is None or r.key != base.key]
    return base, cands, lines


# Diffs of bundled samples only (public files, keyed by their content digests and labels), shared by the sessions
# of this server: a new tab opens on the default case and would otherwise diff it again (~0.5 s of its first run).
# Uploads' diffs stay in their own session.
_SAMPLE_DIFFS: dict = {}


def _shared_key(memo_key: tuple, base: Run, cands: list[Run]) -> tuple:
    """The session memo's key plus the runs' manifest facts (a manifest dropped on a sample changes its diff)."""
    facts = json.dumps([[r.variant, r.context] for r in (base, *cands)], sort_keys=True, default=str)
    return (memo_key, facts)


def _compute(base: Run, cands: list[Run]):
    try:
        return diff_runs(base.summary, [r.summary for r in cands], labels=[base.label] + [r.label for r in cands])
    except FuseLensError as err:
        return f"cannot compare: {err}"
    except Exception as exc:  # a diff bug must not take the other pages down
        log.exception("diff_runs failed")
        return f"cannot compare: internal error {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def diff(*, compute: bool = True, force: bool = False):
    """The fusion diff of the baseline against every other run, memoized per (runs, baseline, labels):

    a Diff; a one-line error string; None (fewer than two runs, or not computed yet with compute=False);
    DiffPending (running on a worker thread); DiffDeferred (too big to start without `force`).
    """
    base, cands, _ = comparison()
    if base is None or not cands:
        return None
    memo_key = (base.key, base.label, tuple((r.key, r.label) for r in cands))
    ss = _state()
    held = ss[keys.DIFFS].get(memo_key)
    if isinstance(held, tuple):  # (future, started, size)
        fut, started, size = held
        if not fut.done():
            return DiffPending(started, size)
        result = fut.result()
        ss[keys.DIFFS] = {memo_key: result}
        if all(r.origin == "sample" for r in (base, *cands)) and not isinstance(result, str):
            _SAMPLE_DIFFS[_shared_key(memo_key, base, cands)] = result
            while len(_SAMPLE_DIFFS) > 4:  # a few sample sets' diffs; each holds its runs' summaries
                _SAMPLE_DIFFS.pop(next(iter(_SAMPLE_DIFFS)))
        return result
    if held is not None:
        return held
    samples_only = all(r.origin == "sample" for r in (base, *cands))
    shared = _SAMPLE_DIFFS.get(_shared_key(memo_key, base, cands)) if samples_only else None
    if shared is not None:  # the bundled samples' diff, computed once per server (every new tab opens on it)
        ss[keys.DIFFS] = {memo_key: shared}
        return shared
    if not compute:
        return None
    size = diff_size()
    if size > DIFF_AUTO_MAX_OPS and not force:
        return DiffDeferred(size)
    fut = _POOL.submit(_compute, base, cands)
    ss[keys.DIFFS] = {memo_key: (fut, time.time(), size)}
    with contextlib.suppress(FuturesTimeout):
        fut.result(timeout=DIFF_WAIT_S)
    return diff(compute=False)
