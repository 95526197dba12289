"""One profiling run at a time per server: `python -m kernels.profile` as a subprocess, with live progress.

Why a module (not page code): Streamlit re-executes page files on every rerun, but an imported module lives once per
server process, so the lock and the running job here are shared by every session: a second click anywhere says
"busy" instead of starting a second job on the same GPU.

Safety: the argument list is built only from validated choices and bounded integers, never a shell
string; the child gets its own session (process group), so Cancel and the timeout kill it and everything it
started (ncu, compile workers). A descendant that leaves the group (`setsid`, a daemonising double fork) still
carries the run's marker in its environment (MARKER_ENV, a random token per run): at every end of a run (done,
Cancel, timeout) the processes of this user holding that marker are killed too. Output goes to a fresh folder under runs/ (git-ignored), removed when nothing
usable was recorded. The server itself never imports torch or touches CUDA: the GPU check is `nvidia-smi -L`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from analyzer import api
from fuselens import settings
from fuselens.paths import runs_dir
from kernels.models.variants import DEFAULT_VARIANTS, LAYER_VARIANTS, VARIANTS
from kernels.runner.options import (
    DTYPE_BYTES,
    MAX_BATCH,
    MAX_DIM,
    MAX_LAYERS,
    MAX_SEQ,
    MAX_TOKENS,
    MODEL_WORKLOADS,
    WORKLOADS,
)

ROOT = Path(__file__).resolve().parent.parent
RUNS_DIR = runs_dir()  # the clone's runs/; installed, a per-user folder (never inside site-packages)
KEEP_RUNS = 20  # finished run folders kept in runs/; older ones are pruned when a new run starts

# The runner's own choices and limits (the runner validates again; this is the first line). Both modules import no
# torch at module level, so the server stays torch-free (tests/app/test_app_profile.py checks it).
DTYPES = tuple(DTYPE_BYTES)

# What runs. Module attributes so the tests can point them at a stand-in runner on a machine without a GPU.
RUNNER_ARGV = [sys.executable, "-m", "kernels.profile"]
GPU_PROBE_ARGV = ["nvidia-smi", "-L"]
# Whoever starts the server may point these at another runner / GPU probe (a JSON argument list; the browser test
# runs the page against tests/support/profile_standin.py this way). Set only from the server's environment, never a page.
RUNNER_ARGV = settings.profile_runner_argv() or RUNNER_ARGV
GPU_PROBE_ARGV = settings.gpu_probe_argv() or GPU_PROBE_ARGV
TIMEOUT_S = settings.profile_timeout_s()
EXIT_MEANING = {0: "done", 2: "bad arguments", 3: "no CUDA GPU", 4: "some variants failed"}
MARKER_ENV = "FUSELENS_PROFILE_RUN"  # every process a run starts inherits it (unless it clears its environment)


class Busy(Exception):
    """Another profiling run is in progress on this server."""


@dataclass(frozen=True)
class Params:
    workload: str = "geglu"
    batch: int = 64
    seq: int = 128
    d_model: int = 768
    hidden: int = 3072
    dtype: str = "bf16"
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    measure_bytes: bool = False
    train: bool = False
    layers: int = 4  # whole models only (llama-model, gemma-model): decoder layers

    @property
    def whole_model(self) -> bool:
        return self.workload in MODEL_WORKLOADS

    def problems(self) -> list[str]:
        """Why these parameters are refused (empty when fine)."""
        out = []
        if self.workload not in WORKLOADS + MODEL_WORKLOADS:
            out.append(f"unknown workload {self.workload!r}")
        if self.dtype not in DTYPES:
            out.append(f"unknown dtype {self.dtype!r}")
        if not self.variants:
            out.append("pick at least one variant")
        allowed = LAYER_VARIANTS if self.whole_model else VARIANTS
        bad = [v for v in self.variants if v not in allowed]
        if bad:
            which = "whole models" if self.whole_model else "MLP workloads"
            out.append(f"variant(s) {', '.join(bad)} not for {which}: choose from {', '.join(allowed)}")
        if self.whole_model and (not isinstance(self.layers, int) or not 1 <= self.layers <= MAX_LAYERS):
            out.append(f"layers must be an integer from 1 to {MAX_LAYERS}")
        for name, v, hi in (
            ("batch", self.batch, MAX_BATCH),
            ("seq", self.seq, MAX_SEQ),
            ("d_model", self.d_model, MAX_DIM),
            ("hidden", self.hidden, MAX_DIM),
        ):
            if not isinstance(v, int) or not 1 <= v <= hi:
                out.append(f"{name} must be an integer from 1 to {hi}")
        if isinstance(self.batch, int) and isinstance(self.seq, int) and self.batch * self.seq > MAX_TOKENS:
            out.append(f"batch × seq = {self.batch * self.seq:,} tokens is above the limit of {MAX_TOKENS:,}")
        return out

    def argv(self, out_dir: Path) -> list[str]:
        if self.problems():
            raise ValueError("; ".join(self.problems()))
        argv = [
            *RUNNER_ARGV,
            "--workload", self.workload,
            "--variants", ",".join(self.variants),
            "--batch", str(int(self.batch)),
            "--seq", str(int(self.seq)),
        ]  # fmt: skip
        if self.whole_model:  # the model's own widths (kernels.models.whole_model), its depth from the form
            argv += ["--layers", str(int(self.layers))]
        else:
            argv += ["--d-model", str(int(self.d_model)), "--hidden", str(int(self.hidden))]
        argv += ["--dtype", self.dtype, "--out", str(out_dir)]
        if self.measure_bytes:
            argv.append("--measure-bytes")
        if self.train:
            argv.append("--train")
        return argv


@dataclass
class Job:
    params: Params
    owner: str  # token of the session that started it: it loads the results and may cancel
    out_dir: Path
    argv: list[str]
    timeout_s: float
    # the starting session's Streamlit id: when that session is gone (tab closed or reloaded), anyone may cancel the
    # run or open its results (owner_gone)
    owner_session: str | None = None
    started: float = field(default_factory=time.time)
    state: str = "running"  # running | done | partial | failed | cancelled | timeout
    returncode: int | None = None
    message: str = "starting"
    done: int = 0
    total: int = 0
    events: list[dict] = field(default_factory=list)
    stderr_tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=40))
    finished: float | None = None
    consumed: bool = False  # the owner loaded the results
    _proc: subprocess.Popen | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cancel_requested: bool = False
    marker: str = field(default_factory=lambda: secrets.token_hex(12))  # MARKER_ENV's value for this run

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def elapsed_s(self) -> float:
        return (self.finished or time.time()) - self.started

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "state": self.state,
                "message": self.message,
                "done": self.done,
                "total": self.total,
                "events": list(self.events),
                "stderr": list(self.stderr_tail),
                "elapsed_s": self.elapsed_s,
                "returncode": self.returncode,
            }

    def cancel(self) -> None:
        """Kill the runner and every process it started (its whole process group)."""
        with self._lock:
            if self.state != "running":
                return
            self._cancel_requested = True
        _kill_tree(self._proc)
        kill_marked(self.marker)

    # -- threads
    def _read_stdout(self) -> None:
        assert self._proc and self._proc.stdout
        for raw in iter(lambda: self._proc.stdout.readline(65536), b""):
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = None
            with self._lock:
                if isinstance(ev, dict) and "event" in ev:
                    self.events.append({k: ev.get(k) for k in ("event", "variant", "done", "total", "message")})
                    self.events = self.events[-200:]
                    self.done = int(ev.get("done") or 0) if str(ev.get("done", "")).isdigit() else self.done
                    self.total = int(ev.get("total") or 0) if str(ev.get("total", "")).isdigit() else self.total
                    self.message = str(ev.get("message") or ev.get("event"))[:500]
                else:
                    self.stderr_tail.append(line[:500])

    def _read_stderr(self) -> None:
        assert self._proc and self._proc.stderr
        for raw in iter(lambda: self._proc.stderr.readline(65536), b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                with self._lock:
                    self.stderr_tail.append(line[:500])

    def _wait(self, readers: list[threading.Thread]) -> None:
        assert self._proc
        try:
            rc = self._proc.wait(timeout=self.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_tree(self._proc)
            rc = self._proc.wait()
            timed_out = True
        # The runner exited, but what it started (an ncu, a compile worker, a stray `sleep`) may live on in its
        # process group: reap the group, so a finished run leaves no process behind either.
        _kill_group(self._proc.pid)
        kill_marked(self.marker)  # and what left the group (setsid) but still carries the run's marker
        for t in readers:
            t.join(timeout=5)
        recorded = _recorded_traces(self.out_dir)
        with self._lock:
            self.returncode = rc
            self.finished = time.time()
            if timed_out:
                self.state, self.message = "timeout", f"stopped after the {self.timeout_s:,.0f} s time limit"
            elif self._cancel_requested:
                self.state, self.message = "cancelled", "cancelled; the runner and its children were stopped"
            elif rc == 0 and recorded:
                self.state = "done"
            elif rc == 4 and recorded:
                self.state = "partial"  # some variants failed (e.g. out of GPU memory); the others are usable
            else:
                self.state = "failed"
                meaning = EXIT_MEANING.get(rc, f"exit code {rc}")
                if rc == 0 and not recorded:
                    meaning = "no variant was recorded"
                last = self.message if self.message and self.message != "starting" else ""
                self.message = f"{meaning}: {last}" if last else meaning
            if self.state in ("failed", "cancelled", "timeout"):
                shutil.rmtree(self.out_dir, ignore_errors=True)  # nothing usable: leave no half-written folder


def _kill_tree(proc: subprocess.Popen | None) -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after 5 s."""
    if proc is None or proc.poll() is not None:
        return
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        return
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + grace
        while time.time() < deadline:
            if proc.poll() is not None and not _group_alive(pgid):
                return
            time.sleep(0.05)


def _kill_group(pgid: int, grace_s: float = 2.0) -> None:
    """SIGTERM what is left of a process group whose leader has exited, SIGKILL it after `grace_s`."""
    for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.time() + grace
        while time.time() < deadline:
            if not _group_alive(pgid):
                return
            time.sleep(0.05)


def marked_pids(marker: str) -> list[int]:
    """PIDs of this user's processes whose environment holds MARKER_ENV=marker (Linux /proc; [] elsewhere).
    Another user's processes cannot be read, and are never ours to kill."""
    needle = f"{MARKER_ENV}={marker}".encode()
    me = os.getpid()
    out = []
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read(1 << 20)
        except OSError:  # gone, or not ours
            continue
        if needle in env.split(b"\0"):
            out.append(pid)
    return out


def kill_marked(marker: str, grace_s: float = 2.0) -> int:
    """SIGTERM every process holding this run's marker, SIGKILL those left after `grace_s`; how many there were."""
    pids = marked_pids(marker)
    for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.time() + grace
        while time.time() < deadline and marked_pids(marker):
            time.sleep(0.05)
        pids = marked_pids(marker)
        if not pids:
            break
    return len(pids)


def owner_gone(job: Job) -> bool:
    """True when the session that started `job` no longer exists (its tab was closed or reloaded): then any session
    may cancel the run or open its results, instead of everyone seeing "busy" until the time limit."""
    if not job.owner_session:
        return False
    try:
        from streamlit.runtime import Runtime

        return Runtime.exists() and not Runtime.instance().is_active_session(job.owner_session)
    except Exception:  # no runtime (bare mode, tests): nobody can tell, so nobody takes over
        return False


def adopt(job: Job, owner: str, owner_session: str | None) -> None:
    """Make `owner` the job's owner (its tab was closed or reloaded): it gets the Cancel button, the progress and
    the results, exactly as the session that started it would have."""
    with _SLOT:
        job.owner, job.owner_session = owner, owner_session
        _LAST_BY_OWNER[owner] = job


def orphan() -> Job | None:
    """The latest job whose owner session is gone and whose results nobody opened yet (running or finished)."""
    with _SLOT:
        jobs = list(_LAST_BY_OWNER.values())
    for job in sorted(jobs, key=lambda j: j.started, reverse=True):
        if not job.consumed and owner_gone(job):
            return job
    return None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _recorded_traces(out_dir: Path) -> list[Path]:
    return sorted(out_dir.glob("*.json.gz")) if out_dir.is_dir() else []


# ---------------------------------------------------------------------------------------------------- fuselens paths
FUSELENS_VARIANTS = ("fuselens", "fuselens-graph")


def fuselens_path_notes(out_dir) -> list[str]:
    """One line per fuselens variant of a finished run: which path its measurement chose (the runner's manifest,
    kernels.models.dispatch), and a warning where it fell back from the fused kernel."""
    try:
        manifest = api.read_manifest(Path(out_dir) / "manifest.json") or {}
    except api.SideFileError:
        return []
    variants = [v for v in manifest.get("variants", []) if isinstance(v, dict)]
    notes = []
    for v in variants:
        if v.get("name") not in FUSELENS_VARIANTS or "fuselens_path" not in v:
            continue
        path, probe = v["fuselens_path"], v.get("fuselens_probe_us") or {}
        times = ", ".join(f"{p} {us:.1f} µs" for p, us in probe.items() if isinstance(us, (int, float)))
        if v.get("fuselens_fused") is False:
            notes.append(
                f"Warning: {v['name']} fell back to the {path} path at this size: its fused kernel measured slower"
                + (f" (first-call probe: {times})" if times else "")
            )
        else:
            notes.append(f"{v['name']} ran the {path} path" + (f" (first-call probe: {times})" if times else ""))
    return notes


def fallback_hint(params: Params) -> str | None:
    """Why FuseLens may not use its fused TMA kernel at these sizes (facts about where the kernel applies; the
    runner measures the paths and picks): None where the fused TMA kernel applies."""
    if not any(v in FUSELENS_VARIANTS for v in params.variants):
        return None
    reasons = []
    tokens = params.batch * params.seq
    if tokens <= 64:
        reasons.append(f"{tokens} tokens: decode-sized, FuseLens uses its pointer kernel")
    if params.dtype == "fp32":
        reasons.append("fp32: no TMA kernel (tensor-core paths are fp16/bf16)")
    elif params.d_model % 8 or params.hidden % 8:
        reasons.append("d_model and hidden not multiples of 8: rows are not 16-byte aligned for TMA")
    if not reasons:
        return None
    return (
        "FuseLens may fall back at this size ("
        + "; ".join(reasons)
        + "). The runner measures its fused kernel against cuBLAS + gating and cuBLAS + ATen on the first call and"
        " runs the fastest; the result names the path."
    )


# ---------------------------------------------------------------------------------------------------- the slot
_SLOT = threading.Lock()  # guards _CURRENT: at most one running job per server process
_CURRENT: Job | None = None
_LAST_BY_OWNER: dict[str, Job] = {}


def current() -> Job | None:
    """The running job, if any (any session's)."""
    with _SLOT:
        return _CURRENT if (_CURRENT is not None and _CURRENT.running) else None


def last_for(owner: str) -> Job | None:
    """The latest job this session started (running or finished)."""
    with _SLOT:
        return _LAST_BY_OWNER.get(owner)


def _prune_runs() -> None:
    if not RUNS_DIR.is_dir():
        return
    olds = sorted((p for p in RUNS_DIR.iterdir() if p.is_dir() and p.name.startswith("profile-")), key=lambda p: p.name)
    for p in olds[:-KEEP_RUNS]:
        shutil.rmtree(p, ignore_errors=True)


def start(params: Params, owner: str, *, timeout_s: float | None = None, owner_session: str | None = None) -> Job:
    """Start a run, or raise Busy (another is running) / ValueError (bad parameters)."""
    global _CURRENT
    problems = params.problems()
    if problems:
        raise ValueError("; ".join(problems))
    with _SLOT:
        if _CURRENT is not None and _CURRENT.running:
            raise Busy(f"a profiling run is already in progress ({_CURRENT.done}/{_CURRENT.total} variants, "
                       f"{_CURRENT.elapsed_s:,.0f} s); one run at a time on this server")  # fmt: skip
        RUNS_DIR.mkdir(exist_ok=True)
        _prune_runs()
        out_dir = RUNS_DIR / f"profile-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        out_dir.mkdir(mode=0o700)
        argv = params.argv(out_dir)
        job = Job(
            params=params,
            owner=owner,
            owner_session=owner_session,
            out_dir=out_dir,
            argv=argv,
            timeout_s=timeout_s or TIMEOUT_S,
        )
        job.total = len(params.variants)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{MARKER_ENV: job.marker})
        try:
            job._proc = subprocess.Popen(  # noqa: S603 - argv list from validated Params, no shell
                argv,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # own process group: Cancel/timeout kill the whole tree
            )
        except OSError as exc:
            shutil.rmtree(out_dir, ignore_errors=True)
            raise ValueError(f"could not start the runner: {exc}") from exc
        readers = [
            threading.Thread(target=job._read_stdout, daemon=True, name="fuselens-profile-stdout"),
            threading.Thread(target=job._read_stderr, daemon=True, name="fuselens-profile-stderr"),
        ]
        for t in readers:
            t.start()
        threading.Thread(target=job._wait, args=(readers,), daemon=True, name="fuselens-profile-wait").start()
        _CURRENT = job
        _LAST_BY_OWNER[owner] = job
        return job


# ---------------------------------------------------------------------------------------------------- GPU check
_PROBE: tuple[float, bool, str] | None = None
_PROBE_TTL_S = 30.0


def gpu_available(refresh: bool = False) -> tuple[bool, str]:
    """(True, 'GPU 0: NVIDIA H100 80GB HBM3') or (False, why not). `nvidia-smi -L`: no CUDA context in this process."""
    global _PROBE
    now = time.time()
    if not refresh and _PROBE is not None and now - _PROBE[0] < _PROBE_TTL_S:
        return _PROBE[1], _PROBE[2]
    if not (ROOT / "kernels" / "profile.py").is_file():
        result = (False, "the profiling runner (kernels/profile.py) is not in this checkout")
    else:
        try:
            res = subprocess.run(GPU_PROBE_ARGV, capture_output=True, text=True, timeout=10, check=False)
            gpus = [ln.split(" (UUID")[0].strip() for ln in res.stdout.splitlines() if ln.startswith("GPU ")]
            if res.returncode == 0 and gpus:
                result = (True, "; ".join(gpus))
            else:
                why = (res.stderr or res.stdout).strip().splitlines()
                result = (
                    False,
                    f"nvidia-smi -L found no NVIDIA GPU ({why[0][:160] if why else f'exit {res.returncode}'})",
                )
        except FileNotFoundError:
            result = (False, "no NVIDIA GPU on this server: nvidia-smi is not installed")
        except (OSError, subprocess.SubprocessError) as exc:
            result = (False, f"could not query the GPU with nvidia-smi -L: {type(exc).__name__}")
    _PROBE = (now, *result)
    return result
