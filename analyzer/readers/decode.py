"""Typed, columnar decode of Kineto trace events: the events array → ``schema.RawTrace``, in one process or two.

Why not ``orjson.loads`` + one dict per event: every field of every event (call stacks, python_function args,
occupancy figures …) becomes a Python object. On the 1 GiB benchmark trace that is 8.7 GiB of RSS and 3× our
time (bench/results/load.md). Instead the stages run in one direction, each in its own module:

* ``analyzer.readers.document``: one msgspec pass validates the document, decodes the few header keys we show, and
  keeps ``traceEvents`` as a zero-copy ``msgspec.Raw`` view (``repair``: what real files need first).
* ``analyzer.readers.batches``: the events are decoded ~CHUNK_BYTES at a time into ``gc=False`` Structs
  (``analyzer.readers.events``) that list ONLY the fields we use. One batch of Structs is alive at a time, so peak
  RSS ≈ the JSON + the columns + one batch (1.56× the file on the 1 GiB benchmark).
* ``analyzer.readers.columns``: per batch, each event group's columns are pulled (``coerce``: values → arrays);
  ``finish`` joins them and parses the distinct shape texts once.
* Here: the batches are fed to one ``Accumulator``; for a big file with a core to spare, this process decodes the
  first half of the events while a forked worker decodes the second and streams its columns back
  (``_decode_parallel``).

Errors: msgspec's ``DecodeError`` (syntax, truncation) propagates to ``analyzer.readers.load``, which reads the file
again the whole way (validation pass and repairs) and turns what is left into ``TraceError``.
"""

from __future__ import annotations

import contextlib
import gc

import msgspec
import numpy as np
from msgspec import Raw

from analyzer.readers.batches import CHUNK_BYTES, batches_in, event_batches, events_span, release_pages
from analyzer.readers.columns import Accumulator
from analyzer.readers.document import EVENT_BOUNDARY
from analyzer.schema import RawTrace
from fuselens import settings


def decode_events(
    form: str, header: dict, events: Raw, buf: bytearray | None = None, workers: int | None = None
) -> RawTrace:
    """Columns of every event we use: ``accumulate_events`` then ``finish``."""
    acc = accumulate_events(events, buf, workers)
    del events, buf
    return finish(acc, form, header)


def accumulate_events(
    events: Raw, buf: bytearray | None = None, workers: int | None = None, release: bool = False
) -> Accumulator:
    """Decode every event into per-batch columns. GC is paused while millions of short-lived objects come and go.

    The result holds no reference to the input: a caller that drops its own (load.py does) frees the JSON buffer
    BEFORE ``finish`` concatenates the batches, so the buffer and the concatenated columns are never in memory
    together (1 GiB benchmark: peak 1.66 → 1.4x GiB).
    buf: the bytearray `events` views, if any (lets chunks be decoded in place, see event_batches).
    workers: processes for a big file (default: $FUSELENS_DECODE_WORKERS, else up to 2 where fork exists and the
    events are over PARALLEL_MIN_BYTES). Workers are forked, so they read the buffer without a copy.
    release: the caller owns buf and reads nothing from it afterwards: the pages of decoded batches go back to the
    system as decoding goes (the 1 GiB trace's first open peaks ~0.2× the file lower); a parallel decode whose
    worker fails after that raises BufferReleased (read the file again). A syntax error is final either way.
    """
    n_workers = _worker_count(workers, len(events))
    with _gc_paused():
        if n_workers > 1:
            try:
                return _decode_parallel(events, buf, n_workers, release)
            except _ParallelUnavailable:
                pass
        acc = Accumulator()
        for batch in event_batches(events, buf=buf, release=release):
            acc.add(batch)
            del batch
        return acc


def finish(acc: Accumulator, form: str, header: dict) -> RawTrace:
    """The accumulated batches as one ``Decoded`` (each column concatenated, its batch pieces freed at once)."""
    with _gc_paused():
        return acc.finish(form, header)


@contextlib.contextmanager
def _gc_paused():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Below ~64 MB of events, forking costs more than it saves (a worker start is ~50 ms; decode runs ~150 MB/s).
PARALLEL_MIN_BYTES = 64 << 20
ENV_WORKERS = "FUSELENS_DECODE_WORKERS"


def _worker_count(workers: int | None, n_bytes: int) -> int:
    """Decode processes. Auto (None): $FUSELENS_DECODE_WORKERS, else min(2, cores) for ≥ PARALLEL_MIN_BYTES of
    events when a core is idle — but 1 inside a process that is itself a pool worker (analyzer.ranks already runs
    one rank per core) or that runs other threads (a Streamlit server: forking a threaded process can deadlock
    the child)."""
    import multiprocessing
    import os
    import threading

    if workers is None:
        env = settings.text(ENV_WORKERS)
        if env.isdigit():
            workers = int(env)
        elif (
            n_bytes < PARALLEL_MIN_BYTES
            or threading.active_count() > 1
            or multiprocessing.parent_process()
            or not _idle_core()
        ):
            return 1
        else:
            workers = min(2, os.cpu_count() or 1)
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, workers)


def _idle_core() -> bool:
    """Is a core free for a second worker? Two processes cost more CPU in all than one (the second one's
    transfer and the merge), so on a busy box they are slower; they pay off only with a core to spare. Measured
    over 0.15 s from /proc/stat (this process sleeps meanwhile, so its own core counts as idle): the 1-minute
    load average lags a minute behind, and after any earlier minute of work it still reads ~1 on an idle box."""
    import os
    import time

    cores = os.cpu_count() or 1
    try:
        before = _cpu_times()
        time.sleep(0.15)
        after = _cpu_times()
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0] <= cores - 1.5
        except OSError:
            return False
    busy, total = after[0] - before[0], after[1] - before[1]
    return total > 0 and (total - busy) / total * cores >= 1.5


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from the first line of /proc/stat (idle and iowait are not busy)."""
    with open("/proc/stat", "rb") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


class _ParallelUnavailable(Exception):
    pass


class BufferReleased(Exception):
    """The parallel decode failed after handing back pages of the caller's buffer: decode the source again."""


def _decode_parallel(events: Raw, buf, n_workers: int, release: bool = False) -> Accumulator:
    """Split the events into n_workers byte ranges at event boundaries. This process decodes the first range
    while forked children decode the others (they read the buffer without a copy); each child streams its
    columns back through a pipe, array by array into arrays allocated here (no pickled copy of the columns on
    either side), and
    they are merged in file order. Any failure (no fork, a child killed, a split inside a nested object, a
    syntax error) falls back to decoding everything in this process, which then says what is wrong.
    release: every process drops the pages outside its own range at its start (so each page has one owner) and
    gives back its own batches' pages as it goes: the 1 GiB trace peaked at 1.45× the file without it. A failure
    after that raises BufferReleased."""
    import multiprocessing

    view, buf, pos, end = events_span(events, buf)
    ranges, start = [], pos
    for k in range(1, n_workers):
        m = EVENT_BOUNDARY.search(view, max(start, pos + (end - pos) * k // n_workers), end)
        if m is None:
            break
        ranges.append((start, m.start() + 1))  # up to just after this range's last '}'
        start = m.end() - 1  # the next range starts at its first '{'
    ranges.append((start, end))
    if len(ranges) < 2:
        raise _ParallelUnavailable
    ctx = multiprocessing.get_context("fork")
    children = []
    released = False
    try:
        for a, b in ranges[1:]:
            recv, send = ctx.Pipe(duplex=False)
            child = ctx.Process(target=_decode_child, args=(view, buf, a, b, send, release), daemon=True)
            child.start()
            send.close()
            children.append((child, recv))
        if release and buf is not None:  # the children's ranges are theirs alone from here
            release_pages(buf, ranges[0][1] + 1, len(buf))
            released = True
        acc = Accumulator()
        for batch in batches_in(view, buf, *ranges[0], CHUNK_BYTES, release):
            acc.add(batch)
            del batch
        for child, recv in children:
            acc.merge(_receive(recv))  # in file order; each part is freed once merged
            child.join()
            if child.exitcode != 0:
                raise _ParallelUnavailable(f"decode worker exited with {child.exitcode}")
        return acc
    except (_ParallelUnavailable, OSError, EOFError, msgspec.DecodeError) as err:
        if released:
            raise BufferReleased from err
        raise _ParallelUnavailable from err  # … then decode in this process: slower, same result
    finally:
        for child, recv in children:
            recv.close()
            if child.is_alive():
                child.kill()
                child.join()


def _decode_child(view, buf, a: int, b: int, conn, release: bool) -> None:
    """A forked worker: decode view[a:b], send the export, exit without running the parent's exit handlers."""
    import os

    code = 1
    try:
        gc.disable()
        if release:  # pages this worker never reads: so that the parent's own release frees them
            release_pages(buf, 0, a - 1)
            release_pages(buf, b + 1, len(buf))
        acc = Accumulator()
        for batch in batches_in(view, buf, a, b, CHUNK_BYTES, release):
            acc.add(batch)
            del batch
        _send(conn, acc.export())
        code = 0
    except BaseException as err:  # the parent falls back to decoding in one process
        with contextlib.suppress(Exception):
            conn.send(("error", repr(err)))
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        os._exit(code)


def _send(conn, part: dict) -> None:
    """A worker's export: the small things pickled, then each array as raw bytes (the receiver allocates it),
    each freed here once sent, so the columns move from this process to the parent instead of being in both."""
    layout = {}
    for table, cols in part["parts"].items():
        layout[table] = {
            key: (col.dtype.str, len(col)) if isinstance(col, np.ndarray) and col.dtype != object else col
            for key, col in cols.items()  # a list column (gpu kind) is pickled as is
        }
    conn.send(("ok", {**part, "parts": layout}))
    for table, cols in part["parts"].items():
        for key in list(cols):
            if isinstance(layout[table][key], tuple):
                arr = np.ascontiguousarray(cols.pop(key))
                conn.send_bytes(memoryview(arr).cast("B"))
                del arr


def _receive(conn) -> dict:
    status, part = conn.recv()
    if status != "ok":
        raise _ParallelUnavailable(f"decode worker failed: {part}")
    for cols in part["parts"].values():
        for key, spec in cols.items():
            if isinstance(spec, tuple):
                arr = np.empty(spec[1], dtype=np.dtype(spec[0]))
                got = conn.recv_bytes_into(memoryview(arr).cast("B")) if arr.nbytes else len(conn.recv_bytes())
                if got != arr.nbytes:
                    raise _ParallelUnavailable("a decode worker sent a column of the wrong size")
                cols[key] = arr
    return part
