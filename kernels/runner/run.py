"""`python -m kernels.profile`: one recording, in the order the manifest is filled: validate -> warm -> rounds ->
traces -> ncu -> manifest. The command line, its progress lines and exit codes: kernels.runner.options."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kernels.runner import conditions, control, manifest, ncu, record
from kernels.runner.options import (
    EXIT_BAD_ARGS,
    EXIT_NO_GPU,
    EXIT_OK,
    EXIT_VARIANT_FAILED,
    BadArgs,
    build_parser,
    estimate_bytes,
    validate,
)


def emit(event: str, variant: str | None, done: int, total: int, message: str, **extra) -> None:
    line = {"event": event, "variant": variant, "done": done, "total": total, "message": message, **extra}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _refuse(total: int, msg: str, code: int, prefix: str = "") -> int:
    """The one-line refusal: on stderr for people, as the last progress line for the dashboard."""
    print(f"error: {msg}", file=sys.stderr)
    emit("done", None, 0, total, prefix + msg)
    return code


def run(argv: list[str] | None = None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        variants = validate(ns)
    except BadArgs as exc:
        return _refuse(0, str(exc), EXIT_BAD_ARGS, "bad arguments: ")
    total = len(variants)
    if ns.ncu_child is None:
        emit("start", None, 0, total, f"{ns.workload} {ns.batch}x{ns.seq} d={ns.d_model} h={ns.hidden} {ns.dtype}")
    try:
        import torch
    except ImportError:
        return _refuse(total, "PyTorch is not installed; profiling needs torch with CUDA", EXIT_NO_GPU)
    if not torch.cuda.is_available():
        msg = "no CUDA GPU available (torch.cuda.is_available() is False); profiling needs an NVIDIA GPU"
        return _refuse(total, msg, EXIT_NO_GPU)
    if ns.ncu_child is not None:
        return ncu.child(ns)
    est = estimate_bytes(ns.workload, ns.batch * ns.seq, ns.d_model, ns.hidden, ns.dtype, ns.train, ns)
    _free_b, total_b = torch.cuda.mem_get_info()
    if est > 0.9 * total_b:
        msg = f"estimated GPU memory {est / 2**30:.1f} GiB exceeds 90% of this GPU's {total_b / 2**30:.1f} GiB"
        return _refuse(total, msg, EXIT_BAD_ARGS, "bad arguments: ")
    return _Recording(ns, variants).record()


class _Recording:
    """One run's manifest, rewritten after every variant so an interrupted run leaves what finished."""

    def __init__(self, ns, variants: list[str]):
        self.ns, self.variants, self.total = ns, variants, len(variants)
        self.out_dir = Path(ns.out)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.manifest = manifest.header(ns)
        self.entries = {name: {"name": name} for name in variants}
        self.finished = 0

    def write_manifest(self) -> None:
        self.manifest["variants"] = [self.entries[n] for n in self.variants if "status" in self.entries[n]]
        (self.out_dir / "manifest.json").write_text(json.dumps(self.manifest, indent=1))

    def _end(self, name: str, status: str, event: str, message: str) -> None:
        self.finished += 1
        self.entries[name].update(status=status, message=message)
        emit(event, name, self.finished, self.total, message)
        self.write_manifest()

    def progress(self, msg: str) -> None:
        emit("round", None, self.finished, self.total, msg)

    def record(self) -> int:
        import torch

        ns = self.ns
        model, x = record.make_workload(ns)
        sampler = conditions.Sampler().start()
        lock = conditions.ClockLock(ns.lock_clocks or None) if ns.lock_clocks is not None else None
        self.manifest["conditions"] = {"limits": conditions.gpu_limits()}
        try:
            if lock is not None:
                lock.__enter__()
                self.manifest["conditions"]["lock_clocks"] = lock.describe()
            live = self.warm(model, x)
            traces, probe_ok = self.rounds(live, sampler)
            sampler.stop()
            self.manifest["conditions"]["sampler"] = sampler.describe()
            recorded = self.write_traces(live, traces, model, sampler, probe_ok)
            self.measure_bytes(recorded)
        finally:
            sampler.stop()
            if lock is not None:
                lock.__exit__(None, None, None)
            torch.cuda.synchronize() if torch.cuda.is_initialized() else None
        return self.finish()

    def warm(self, model, x) -> list[record.Live]:
        """Build + warm up every variant first: compile time stays out of the rounds."""
        from kernels.models.variants import VariantUnavailable

        live: list[record.Live] = []
        for i, name in enumerate(self.variants):
            msg = f"building and warming up {name} ({i + 1}/{self.total})"
            emit("variant_start", name, self.finished, self.total, msg)
            try:
                live.append(record.warm(name, model, x, self.ns))
            except VariantUnavailable as exc:
                self._end(name, "skipped", "variant_skipped", str(exc))
            except Exception as exc:  # CUDA OOM, a compile error: the others are still recorded
                lv = record.Live(name, None, 0.0)
                record.fail(lv, exc)
                self._end(name, "failed", "variant_failed", lv.error or "failed")
        return live

    def rounds(self, live: list[record.Live], sampler) -> tuple[dict[str, dict], bool]:
        """CUDA-event timing rounds, then the profiled rounds with the control probe: ({variant: trace}, whether
        the probe's times hold)."""
        if not live:
            return {}, True
        record.time_rounds(live, self.ns.rounds, sampler, self.progress)
        ok = [lv for lv in live if not lv.error]
        if not ok:
            return {}, True
        probe = record.control_probe(self.manifest)
        traces = record.profile_rounds(ok, self.ns, self.out_dir, sampler, self.progress, probe=probe)
        if probe is not None and probe.error:
            self.manifest["control_probe"]["error"] = probe.error
            return traces, False
        return traces, True

    def write_traces(self, live, traces: dict, model, sampler, probe_ok: bool) -> list[str]:
        """Every trace and its manifest entry before any ncu measurement: a run stopped during ncu keeps them all."""
        profiled, timed = sampler.per_variant("profiled"), sampler.per_variant("timed")
        recorded = []
        for lv in live:
            if lv.error or lv.name not in traces or not lv.times_us:
                self._end(lv.name, "failed", "variant_failed", lv.error or f"{lv.name}: no profiled step recorded")
                continue
            entry = self.entries[lv.name]
            trace_name = f"{lv.name}.json.gz"
            record.gzip_json(traces.pop(lv.name), self.out_dir / trace_name)
            if getattr(model, "is_decoder_layer", False):
                entry.update(record.attention_facts(self.out_dir / trace_name))
            probe_doc = traces.pop(control.OWNER_PREFIX + lv.name, None)
            cond = {"profiled": profiled.get(lv.name), "timed": timed.get(lv.name)}
            entry.update(manifest.recorded_entry(lv, trace_name, cond, probe_doc if probe_ok else None, self.ns.train))
            recorded.append(lv.name)
            self.write_manifest()
        return recorded

    def measure_bytes(self, recorded: list[str]) -> None:
        """Nsight Compute's DRAM bytes for the variants --measure-bytes names; then each variant is done."""
        ns = self.ns
        measure = set(self.variants) if ns.measure_bytes == "all" else set((ns.measure_bytes or "").split(","))
        for name in recorded:
            entry = self.entries[name]
            if name in measure:
                # the ncu child is a new process: it runs the path this run chose instead of measuring its own
                forced = entry.get("fuselens_path") if name in ("fuselens", "fuselens-graph") else None
                if forced:
                    os.environ["FUSELENS_PATH"] = forced
                try:
                    entry.update(ncu.measure_bytes(ns, name, self.out_dir))
                finally:
                    os.environ.pop("FUSELENS_PATH", None)
                if "ncu_error" in entry:
                    entry["message"] += f"; bytes not measured: {entry['ncu_error']}"
            self.finished += 1
            emit(
                "variant_done",
                name,
                self.finished,
                self.total,
                entry["message"],
                median_us=entry["median_us"],
                trace=entry["trace"],
            )
            self.write_manifest()

    def finish(self) -> int:
        if getattr(self.ns, "measure_roofs", False):
            from kernels.runner.roofs import measured_roofs

            self.manifest["ceilings"] = measured_roofs()
        self.write_manifest()
        summary = ", ".join(f"{v['name']}: {v['status']}" for v in self.manifest["variants"])
        emit("done", None, self.total, self.total, summary)
        n_failed = sum(1 for v in self.manifest["variants"] if v["status"] == "failed")
        return EXIT_VARIANT_FAILED if n_failed else EXIT_OK


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(run())


if __name__ == "__main__":
    main()
