"""Profile page (AppTest) and its job runner: real subprocesses, progress, Cancel, timeout, busy, cleanup.

On this CPU-only CI machine the GPU work cannot run, so two kinds of test: (1) the REAL runner
(`python -m kernels.profile`) started by the app's job machinery, which must come back with "no CUDA GPU" and leave
nothing behind; (2) tests/support/profile_standin.py, which speaks the runner's protocol and copies real GPU recordings, to
exercise progress, Cancel (whole process tree), timeout, busy and loading results into Compare.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app_core import profile_job as pj
from tests.support import app_support as s

STANDIN = [sys.executable, str(Path(__file__).parents[1] / "support" / "profile_standin.py")]
FAKE_GPU = [sys.executable, "-c", "print('GPU 0: Stand-in for an H100 (UUID: GPU-0000)')"]


def _wait(job: pj.Job, timeout_s: float = 60) -> pj.Job:
    deadline = time.time() + timeout_s
    while job.running and time.time() < deadline:
        time.sleep(0.05)
    assert not job.running, job.snapshot()
    time.sleep(0.1)
    return job


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def standin(monkeypatch, tmp_path):
    monkeypatch.setattr(pj, "RUNNER_ARGV", STANDIN)
    monkeypatch.setattr(pj, "GPU_PROBE_ARGV", FAKE_GPU)
    monkeypatch.setattr(pj, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setattr(pj, "_PROBE", None)
    yield tmp_path
    job = pj.current()
    if job is not None:
        job.cancel()
        _wait(job)
    monkeypatch.setattr(pj, "_PROBE", None)


def test_the_server_imports_no_torch():
    """profile_job takes its choices from the runner's torch-free modules; importing it must not pull torch in."""
    code = "import sys, app_core.profile_job; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2]).returncode == 0


def test_params_are_validated_and_become_an_argument_list():
    ok = pj.Params()
    argv = ok.argv(Path("/x/runs/profile-1"))
    assert argv[: len(pj.RUNNER_ARGV)] == pj.RUNNER_ARGV and "--out" in argv and all(isinstance(a, str) for a in argv)
    assert "; rm -rf /" not in " ".join(argv)
    bad = pj.Params(workload="geglu; rm -rf /", dtype="fp64", variants=("eager", "$(reboot)"), batch=0, hidden=10**6)
    problems = " | ".join(bad.problems())
    for word in ("workload", "dtype", "variant", "batch", "hidden"):
        assert word in problems
    with pytest.raises(ValueError):
        bad.argv(Path("/tmp/x"))
    assert "tokens" in " ".join(pj.Params(batch=65536, seq=2).problems())


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_without_a_gpu_the_button_is_disabled_and_says_why(monkeypatch):
    monkeypatch.setattr(pj, "_PROBE", None)
    at = s.app("profile")
    warnings = s.texts(at, "warning")
    assert any(w.startswith("Profiling is disabled: no NVIDIA GPU") for w in warnings), warnings
    button = at.button(key="FormSubmitter:fl_profile_form-Run profile")
    assert button.disabled
    assert "nvidia-smi" in button.help


@pytest.mark.slow
def test_the_real_runner_reports_no_gpu_and_leaves_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(pj, "RUNS_DIR", tmp_path / "runs")
    job = _wait(pj.start(pj.Params(variants=("eager",)), "test"), timeout_s=240)
    snap = job.snapshot()
    assert job.state == "failed" and job.returncode == 3, snap
    assert "no CUDA GPU" in job.message
    assert snap["events"][-1]["event"] == "done"
    assert not job.out_dir.exists()  # nothing usable: the folder is removed


def test_progress_then_results(standin):
    job = pj.start(pj.Params(variants=("eager", "compile")), "owner-a")
    with pytest.raises(pj.Busy):
        pj.start(pj.Params(), "owner-b")  # one run at a time per server
    _wait(job)
    events = [e["event"] for e in job.snapshot()["events"]]
    assert events == ["start", "variant_start", "variant_done", "variant_start", "variant_done", "done"]
    assert job.state == "done" and (job.done, job.total) == (2, 2)
    assert sorted(p.name for p in job.out_dir.iterdir()) == ["compile.json.gz", "eager.json.gz", "manifest.json"]
    assert job.out_dir.parent == standin / "runs"
    assert pj.last_for("owner-a") is job and pj.current() is None


def test_cancel_kills_the_whole_process_tree_and_cleans_up(standin, monkeypatch):
    pidfile = standin / "grandchild.pid"
    monkeypatch.setenv("STANDIN_DELAY_S", "30")
    monkeypatch.setenv("STANDIN_CHILD_PIDFILE", str(pidfile))
    job = pj.start(pj.Params(variants=("eager",)), "owner")
    deadline = time.time() + 30
    while not pidfile.exists() and time.time() < deadline:
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    assert _alive(grandchild) and _alive(job.pid)
    job.cancel()
    _wait(job, 20)
    assert job.state == "cancelled"
    assert not _alive(job.pid) and not _alive(grandchild)
    assert not job.out_dir.exists()


def test_timeout_stops_the_run(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_DELAY_S", "30")
    job = _wait(pj.start(pj.Params(variants=("eager",)), "owner", timeout_s=1.5), 30)
    assert job.state == "timeout" and "time limit" in job.message
    assert not job.out_dir.exists()


def test_partial_failure_keeps_what_was_recorded(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_EXIT", "4")
    job = _wait(pj.start(pj.Params(variants=("eager", "compile")), "owner"))
    assert job.state == "partial" and (job.out_dir / "eager.json.gz").is_file()


@pytest.mark.needs_data(s.HF / "manifest.json")
def test_page_runs_shows_busy_to_others_and_opens_compare(standin, monkeypatch):
    # long enough that the second session renders while the run is still going on a loaded 2-core machine
    monkeypatch.setenv("STANDIN_DELAY_S", "3.0")
    at = s.app("profile")
    assert any("Stand-in for an H100" in t for t in s.texts(at, "success"))
    at.multiselect[0].set_value(["eager", "compile"])  # variants: form widgets commit with the submit
    at.button(key="FormSubmitter:fl_profile_form-Run profile").click().run()
    job = pj.current()
    assert job is not None and job.running
    # another session sees "busy", and its click is refused with a message
    other = s.app("profile")
    assert any(t.startswith("Busy:") for t in s.texts(other, "info"))
    other.button(key="FormSubmitter:fl_profile_form-Run profile").click().run()
    assert any("already in progress" in t for t in s.texts(other, "warning"))
    # the owner sees progress and a Cancel button while it runs
    at.run()
    assert at.button(key="fl_cancel") is not None
    _wait(job)
    at.run()
    assert not at.exception
    assert at.title[0].value == "Compare"  # the traces loaded and Compare opened on them
    runs = s.runs(at)
    assert [r.label for r in runs] == ["eager", "compile"] and all(r.origin == "profile" for r in runs)
    assert s.metric_values(at)["Kernels per step"][0] == "5 → 4"


def test_fallback_hint_names_why_the_fused_kernel_may_not_apply():
    """The Profile page warns before a run where FuseLens's fused TMA kernel does not apply (the runner then
    measures its paths and may fall back): decode token counts, fp32, rows not 16-byte aligned. The HF shape: none."""
    from app_core.profile_job import fallback_hint

    assert fallback_hint(pj.Params(variants=("eager", "fuselens"))) is None
    assert fallback_hint(pj.Params(variants=("eager",), batch=1, seq=16)) is None  # fuselens not requested
    hint = fallback_hint(pj.Params(variants=("fuselens",), batch=1, seq=16))
    assert "16 tokens" in hint and "fall back" in hint
    hint = fallback_hint(pj.Params(variants=("fuselens-graph",), batch=1, seq=77, d_model=1001, hidden=3000))
    assert "not multiples of 8" in hint and "77 tokens" not in hint


def test_fuselens_path_notes_read_the_runner_manifest(tmp_path):
    """After a run the page says which path each fuselens variant ran, from the manifest the runner writes
    (kernels/runner/: fuselens_path, fuselens_fused, fuselens_probe_us), and warns where it fell back."""
    import json

    from app_core.profile_job import fuselens_path_notes

    manifest = {
        "variants": [
            {"name": "eager", "status": "done"},
            {"name": "fuselens", "fuselens_path": "aten", "fuselens_fused": False,
             "fuselens_probe_us": {"dual_gemm": 61.5, "gating": 48.0, "aten": 41.2}},
            {"name": "fuselens-graph", "fuselens_path": "dual_gemm", "fuselens_fused": True, "fuselens_probe_us": {}},
        ]
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    notes = fuselens_path_notes(tmp_path)
    assert notes[0].startswith("Warning: fuselens fell back to the aten path") and "dual_gemm 61.5 µs" in notes[0]
    assert notes[1] == "fuselens-graph ran the dual_gemm path"
    (tmp_path / "manifest.json").write_text("{not json")
    assert fuselens_path_notes(tmp_path) == []


def test_a_normal_exit_reaps_the_process_group(standin, monkeypatch):
    """The runner exits 0 but leaves a grandchild (a `sleep` it started): the group is reaped."""
    pidfile = standin / "grandchild.pid"
    monkeypatch.setenv("STANDIN_CHILD_PIDFILE", str(pidfile))
    job = _wait(pj.start(pj.Params(variants=("eager",)), "owner"), 30)
    assert job.state == "done"
    grandchild = int(pidfile.read_text())
    deadline = time.time() + 5
    while _alive(grandchild) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_owner_session_unknown_outside_a_server():
    """Without a Streamlit runtime nobody can tell whether a session is gone: no run is taken over."""
    job = pj.Job(params=pj.Params(), owner="t", out_dir=Path("/nonexistent"), argv=[], timeout_s=1, owner_session="x")
    assert pj.owner_gone(job) is False


@pytest.mark.parametrize("end", ["cancel", "timeout", "done"])
def test_a_setsid_grandchild_is_gone_at_every_end_of_a_run(standin, monkeypatch, end):
    """a grandchild that called setsid (its own session, outside the runner's process group)
    survived Cancel and the timeout after the run was reported finished."""
    pidfile = standin / "setsid.pid"
    monkeypatch.setenv("STANDIN_SETSID_PIDFILE", str(pidfile))
    monkeypatch.setenv("STANDIN_DELAY_S", "0.2" if end == "done" else "30")
    job = pj.start(pj.Params(variants=("eager",)), "owner", timeout_s=3 if end == "timeout" else None)
    deadline = time.time() + 30
    while not pidfile.exists() and time.time() < deadline:
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    assert os.getpgid(grandchild) != os.getpgid(job.pid)  # really outside the runner's group
    if end == "cancel":
        job.cancel()
    _wait(job, 40)
    assert job.state == {"cancel": "cancelled", "timeout": "timeout", "done": "done"}[end]
    deadline = time.time() + 5
    while _alive(grandchild) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert pj.marked_pids(job.marker) == []
