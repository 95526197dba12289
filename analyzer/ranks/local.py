"""Local engine: a process pool on this machine, one rank per task.

Why processes, not threads: decoding and pandas work hold the GIL. Why 'forkserver': a forked child of a process
that already holds loaded traces (or a Streamlit server's threads) inherits its memory and its locks; forkserver
children start from a clean, small server process and still start ~10x faster than 'spawn' on Linux.
Large traces get a fresh process per rank (max_tasks_per_child=1): glibc keeps a freed 2-3 GB heap mapped, and
reusing that process would make every worker's RSS the maximum over all ranks it ever saw.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from analyzer.ranks.worker import run_job

# Recycling costs a fork from the preloaded forkserver (~20 ms) but re-runs the import-time work of nothing; below
# 64 MB of JSON (< ~3 s of analysis, < ~400 MB of heap) reusing a process is harmless, above it we recycle.
RECYCLE_ABOVE_JSON_BYTES = 64 << 20


class LocalEngine:
    name = "local"

    def __init__(self, workers: int, max_json_bytes: int = 0):
        self.workers = max(1, int(workers))
        self._max_json_bytes = max_json_bytes
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        return False

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            method = "forkserver" if sys.platform.startswith("linux") else "spawn"
            ctx = mp.get_context(method)
            if method == "forkserver":
                # The server imports numpy/pandas/the analyzer once (~1.2 s here); every worker forked from it then
                # starts in ~20 ms instead of paying the imports again — which also makes recycling cheap.
                ctx.set_forkserver_preload(
                    ["analyzer.ranks.worker", "analyzer.pipeline", "analyzer.summary", "analyzer.diff"]
                )
            kwargs = {"max_workers": self.workers, "mp_context": ctx}
            if self._max_json_bytes > RECYCLE_ABOVE_JSON_BYTES:
                kwargs["max_tasks_per_child"] = 1
            self._pool = ProcessPoolExecutor(**kwargs)
        return self._pool

    def map(self, jobs: list, on_done: Callable[[int, int], None] | None = None) -> list[dict]:
        """Results in job order.

        A worker killed by the OS (out of memory) breaks the whole pool and we cannot tell which rank did it, so the
        unfinished ranks are retried with half the workers; a rank that breaks a one-worker pool fails alone."""
        if not jobs:
            return []
        results: list[dict | None] = [None] * len(jobs)
        done = 0
        if self.workers == 1 and self._max_json_bytes <= RECYCLE_ABOVE_JSON_BYTES:
            for i, job in enumerate(jobs):  # in-process: no start-up cost for one small worker
                results[i] = run_job(job)
                done += 1
                if on_done:
                    on_done(done, len(jobs))
            return results  # type: ignore[return-value]
        pending = list(range(len(jobs)))
        while pending:
            pool = self._executor()
            one_at_a_time = self.workers == 1
            futures = {}
            broken: list[int] = []
            for i in pending:
                futures[pool.submit(run_job, jobs[i])] = i
                if one_at_a_time:  # find the culprit: one job in flight at a time
                    break
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except BrokenProcessPool:
                    broken.append(i)
                    continue
                done += 1
                if on_done:
                    on_done(done, len(jobs))
            if broken:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
                if one_at_a_time:
                    i = broken[0]
                    results[i] = {"ok": False, "error": f"{_label(jobs[i])}: the worker was killed (out of memory?)"}
                    done += 1
                    if on_done:
                        on_done(done, len(jobs))
                self.workers = max(1, self.workers // 2)
            pending = [i for i in pending if results[i] is None]
        return results  # type: ignore[return-value]


def _label(job) -> str:
    inp = getattr(job, "input", None)
    return inp.display if inp is not None else f"rank {job.rank}"
