"""The GPU's conditions while the runner records: SM clock, power and temperature per variant, and --lock-clocks.

A Sampler thread reads NVML every INTERVAL_S (through torch.cuda.clock_rate / power_draw / temperature, which use
pynvml; else an `nvidia-smi --query-gpu=... -lms` subprocess) while the runner notes when each variant's steps ran
(`mark(variant, phase, t0, t1)`, time.monotonic()). `per_variant()` then gives each variant the samples taken while
its steps ran, or — for blocks shorter than the interval (a 0.3 ms HF forward) — the sample nearest each block.

--lock-clocks pins the SM clock with `nvidia-smi -lgc MHZ,MHZ` and restores it with `nvidia-smi -rgc`. It needs root
(or the admin's permission) and changes the machine for everyone on it: never on shared or lent GPUs (FuseLens's own
recordings on lent GPUs run without it; the interleaved order is what keeps those runs comparable).
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import statistics
import subprocess
import threading
import time

INTERVAL_S = 0.02  # 50 Hz: each variant block of a few ms gets a sample near it; NVML reads take ~0.1 ms
SMI_INTERVAL_MS = 50  # nvidia-smi's loop is slower to start; 50 ms is its useful floor
QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu"


def _device_id() -> str:
    """What nvidia-smi -i takes for the GPU torch calls device 0: the first CUDA_VISIBLE_DEVICES entry, else 0."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return vis or "0"


def _nvml_reader():
    """A function returning (sm_mhz, power_w, temp_c) through torch.cuda's NVML helpers, or None if unavailable."""
    try:
        import torch

        def read():
            return (
                float(torch.cuda.clock_rate()),
                float(torch.cuda.power_draw()) / 1000.0,  # mW
                float(torch.cuda.temperature()),
            )

        read()
        return read
    except Exception:
        return None


class Sampler:
    """Background sampling of SM clock (MHz), power (W) and temperature (°C); see the module doc."""

    def __init__(self, interval_s: float = INTERVAL_S):
        self.interval_s = interval_s
        self.samples: list[tuple[float, float, float, float]] = []  # (monotonic t, sm_mhz, power_w, temp_c)
        self.marks: list[tuple[str, str, float, float]] = []  # (variant, phase, t0, t1)
        self.source = "none"
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None

    def start(self) -> Sampler:
        read = _nvml_reader()
        if read is not None:
            self.source = "nvml (torch.cuda.clock_rate/power_draw/temperature)"
            self._thread = threading.Thread(target=self._loop_nvml, args=(read,), daemon=True)
            self._thread.start()
            return self
        smi = shutil.which("nvidia-smi")
        if smi is None:
            self.error = "no NVML (pynvml) and no nvidia-smi: clocks, power and temperature not recorded"
            return self
        try:
            self._proc = subprocess.Popen(
                [
                    smi,
                    "-i",
                    _device_id(),
                    f"--query-gpu={QUERY}",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    str(SMI_INTERVAL_MS),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError as exc:
            self.error = f"nvidia-smi did not start: {exc}"
            return self
        self.source = f"nvidia-smi --query-gpu={QUERY} -lms {SMI_INTERVAL_MS}"
        self.interval_s = SMI_INTERVAL_MS / 1000.0
        self._thread = threading.Thread(target=self._loop_smi, daemon=True)
        self._thread.start()
        return self

    def _loop_nvml(self, read) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                sm, pw, tc = read()
            except Exception as exc:  # a driver hiccup ends sampling, never the recording
                self.error = f"NVML read failed: {type(exc).__name__}: {exc}"
                return
            self.samples.append((t, sm, pw, tc))
            self._stop.wait(self.interval_s)

    def _loop_smi(self) -> None:
        # nvidia-smi stamps each line with local wall time: map it onto time.monotonic() once
        offset = time.monotonic() - time.time()
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 4:
                continue
            try:
                wall = _dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((wall + offset, float(parts[1]), float(parts[2]), float(parts[3])))
            except ValueError:
                continue  # '[N/A]' fields, a header
            if self._stop.is_set():
                break

    def mark(self, variant: str, phase: str, t0: float, t1: float) -> None:
        self.marks.append((variant, phase, t0, t1))

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def per_variant(self, phase: str) -> dict[str, dict]:
        """{variant: {'sm_clock_mhz': {median, min, max}, 'power_w': …, 'temperature_c': …, 'n_samples', 'how'}}
        over the samples taken while that variant's `phase` blocks ran (nearest sample for shorter blocks)."""
        out: dict[str, dict] = {}
        if not self.samples:
            return out
        ts = [s[0] for s in self.samples]
        by: dict[str, list] = {}
        nearest_only: dict[str, bool] = {}
        for v, ph, t0, t1 in self.marks:
            if ph != phase:
                continue
            inside = [s for s in self.samples if t0 <= s[0] <= t1]
            if not inside:
                mid = (t0 + t1) / 2
                i = min(range(len(ts)), key=lambda j: abs(ts[j] - mid))
                if abs(ts[i] - mid) <= 2 * self.interval_s + (t1 - t0) / 2:
                    inside = [self.samples[i]]
                    nearest_only.setdefault(v, True)
            else:
                nearest_only[v] = False
            by.setdefault(v, []).extend(inside)
        for v, ss in by.items():
            if not ss:
                continue
            out[v] = {
                "sm_clock_mhz": _stats([s[1] for s in ss]),
                "power_w": _stats([s[2] for s in ss]),
                "temperature_c": _stats([s[3] for s in ss]),
                "n_samples": len(ss),
                "how": "nearest sample to each block (blocks shorter than the sampling interval)"
                if nearest_only.get(v)
                else "samples taken while its steps ran",
            }
        return out

    def describe(self) -> dict:
        return {
            "source": self.source,
            "interval_ms": round(self.interval_s * 1000),
            "n_samples": len(self.samples),
            **({"error": self.error} if self.error else {}),
        }


def _stats(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 1), "min": round(min(xs), 1), "max": round(max(xs), 1)}


def gpu_limits() -> dict:
    """Max and default application SM clocks and the power limit (nvidia-smi), best effort: {} when unknown."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    q = "clocks.max.sm,clocks.default_applications.graphics,power.limit"
    try:
        out = subprocess.run(
            [smi, "-i", _device_id(), f"--query-gpu={q}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    vals = [p.strip() for p in out.stdout.strip().split(",")]
    if out.returncode != 0 or len(vals) != 3:
        return {}
    res = {}
    for k, v in zip(("max_sm_clock_mhz", "default_app_sm_clock_mhz", "power_limit_w"), vals, strict=True):
        try:
            res[k] = float(v)
        except ValueError:
            continue  # [N/A]
    return res


class ClockLock:
    """`nvidia-smi -lgc MHZ,MHZ` for the run, `nvidia-smi -rgc` after (also when the run fails)."""

    def __init__(self, mhz: int | None):
        self.requested = mhz
        self.locked_mhz: int | None = None
        self.error: str | None = None

    def __enter__(self) -> ClockLock:
        smi = shutil.which("nvidia-smi")
        mhz = self.requested or int(gpu_limits().get("default_app_sm_clock_mhz") or 0)
        if smi is None or not mhz:
            self.error = "nvidia-smi not found or no clock to lock to"
            return self
        r = subprocess.run(
            [smi, "-i", _device_id(), "-lgc", f"{mhz},{mhz}"], capture_output=True, text=True, timeout=30
        )
        if r.returncode != 0:
            last = (r.stdout + r.stderr).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
            self.error = f"nvidia-smi -lgc failed (the run goes on unlocked): {last[0][:200]}"
            return self
        self.locked_mhz = mhz
        return self

    def __exit__(self, *exc) -> None:
        if self.locked_mhz is not None:
            smi = shutil.which("nvidia-smi")
            if smi:
                subprocess.run([smi, "-i", _device_id(), "-rgc"], capture_output=True, text=True, timeout=30)

    def describe(self) -> dict:
        return {
            "requested_mhz": self.requested,
            "locked_mhz": self.locked_mhz,
            **({"error": self.error} if self.error else {}),
        }
