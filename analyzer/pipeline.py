"""File → ``Trace`` → ``Summary``, through the columnar cache: the one way the CLI, the dashboard and ranks load.

    load_trace(src, name=None, *, max_decompressed_bytes=None, max_gzip_ratio=None, cache=None, key=None) -> Trace
    load_summary(src, name=None, *, cache=None, key=None) -> Summary
    summary_json(path, name=None) -> dict | None      what `summary --json` prints, from a cached header alone

The stages run in one direction: cache lookup (analyzer.readers.cache) → bytes, document, event batches and columns
(analyzer.readers.load.read_trace → ``schema.RawTrace``) → ``analyzer.trace.build_trace`` → cache store. The cache
stores tables and JSON values; this module holds the serialisers that turn a Trace or a Summary into those and back
(``_trace_tables`` / ``_trace_from``, ``_summary_tables`` / ``_summary_from``), so the cache knows neither.

analyzer.trace and analyzer.summary (pandas) are imported where they are used: a gzip bomb is refused before pandas
is imported (0.25 s of a fresh process idle, 2–3 s busy), and `summary` answers a cached trace from a header alone.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.readers import cache as cache_mod
from analyzer.readers.cache_format import NotCacheable
from analyzer.readers.limits import default_limits

if TYPE_CHECKING:
    from analyzer.summary import Summary
    from analyzer.trace import Trace


def load_trace(
    src: str | os.PathLike | bytes,
    name: str | None = None,
    *,
    max_decompressed_bytes: int | None = None,
    max_gzip_ratio: float | None = None,
    cache: bool | None = None,
    key: str | None = None,
) -> Trace:
    """Read a Kineto trace (path or upload bytes, plain or gzip) into a ``Trace``. Raises ``TraceError``.

    cache: reuse / write the columnar cache (analyzer.readers.cache); None = on unless $FUSELENS_NO_CACHE. A
    load with a non-default limit (argument or environment) neither reads nor writes it: a cached trace was
    accepted under the default limits, and must not slip past a stricter (or looser) one.
    key: the content key of `src` when the caller already has it (load_summary), so the bytes are not
    hashed a second time (0.1–0.35 s per GB).
    """
    is_bytes = isinstance(src, (bytes, bytearray, memoryview))
    source = name or ("upload" if is_bytes else Path(src).name)
    known, key = key, None
    if cache_mod.enabled(cache) and default_limits(max_decompressed_bytes, max_gzip_ratio):
        try:
            key = known if known is not None else cache_mod.content_key(src)
        except (OSError, ValueError):
            key = None  # a missing file, a directory …: the reader below says what is wrong
        if key is not None:
            hit = lookup_trace(key, source)
            if hit is not None:
                return hit
    from analyzer.readers.load import read_trace  # numpy: a summary answered from a cached header never needs it

    decoded = read_trace(src, source, max_decompressed_bytes=max_decompressed_bytes, max_gzip_ratio=max_gzip_ratio)
    from analyzer.trace import build_trace

    trace = build_trace(decoded, source)
    if key is not None:
        store_trace(key, trace)
    return trace


def load_summary(src, name: str | None = None, *, cache: bool | None = None, key: str | None = None) -> Summary:
    """summarize(load_trace(src, name)) through the cache: a hit reads the trace's tables and the summary's, a miss
    parses, summarises and stores both. `key`: the content key of `src` when the caller already has it (the
    dashboard hashes each upload once for its run id). Same switches as load_trace."""
    key = cache_mod.usable_key(src, cache, key)
    trace = None
    if key is not None:
        is_bytes = isinstance(src, (bytes, bytearray, memoryview))
        trace = lookup_trace(key, name or ("upload" if is_bytes else Path(src).name))
        if trace is not None:
            hit = lookup_summary(key, trace)
            if hit is not None:
                return hit
    if trace is None:
        trace = load_trace(src, name, cache=cache, key=key)
    from analyzer.summary import summarize  # after the read: a refused gzip bomb never imports pandas & co.

    summary = summarize(trace)
    if key is not None:
        store_summary(key, summary)
    return summary


def summary_json(path, name: str | None = None) -> dict | None:
    """What load_summary(path).to_json() returns, from the summary entry's header alone, or None (not cached, the
    cache off, non-default limits, an unreadable header: the caller then takes the full path). The header has its
    own hash; the data region is not read (its tables are not needed here) and is checked when it is."""
    key = cache_mod.usable_key(path)
    out = None if key is None else cache_mod.lookup_json(key, cache_mod.SUMMARY)
    if out is not None:
        out["source"] = name or Path(path).name
    return out


# ---------------------------------------------------------------------------------------------------- trace entry
def lookup_trace(key: str, source: str) -> Trace | None:
    """The cached Trace of this content (meta.source set to `source`), or None."""
    return cache_mod.lookup(key, lambda tables, values: _trace_from(tables, values, source), cache_mod.TRACE)


def store_trace(key: str, trace: Trace, *, limit: int | None = None):
    """Write the trace's tables and meta; None when not cacheable (see analyzer.readers.cache.store)."""
    return cache_mod.store(key, trace, _trace_tables, cache_mod.TRACE, limit=limit)


def _trace_tables(trace: Trace) -> tuple[dict, dict]:
    import pandas as pd

    tables = {}
    for f in dataclasses.fields(trace):
        value = getattr(trace, f.name)
        if f.name in ("meta", "gpu"):
            continue  # gpu is recomputed from meta (gpus.lookup), exactly as build_trace does
        if not isinstance(value, pd.DataFrame):
            raise NotCacheable(f"field {f.name} is a {type(value).__name__}, not a table")
        tables[f.name] = value
    return tables, {"meta": dataclasses.asdict(trace.meta)}


def _trace_from(tables: dict, values: dict, source: str) -> Trace:
    from analyzer import gpus
    from analyzer.trace import Trace, TraceMeta

    meta = TraceMeta(**values["meta"])
    meta.source = source
    trace = Trace(meta=meta, **tables)
    trace.gpu = gpus.lookup(meta.device_properties, meta.gpu_name)
    return trace


# ---------------------------------------------------------------------------------------------------- summary entry
# The summary (analyzer.summary.Summary: the KERNEL_SUMMARY and STEP_TABLE tables, per-step medians, remarks) is
# derived from the trace alone by the analyzer's code, so it is cached under the same content key and version as
# the trace, in its own entry (<key>-<version>-summary.fltc): re-summarising a 1 GiB trace costs 0.5 s idle, 5 s
# on a busy box. Its header also holds Summary.to_json() (what `summary --json` prints), so the CLI answers a
# cached trace from that header alone (summary_json), without numpy, pandas or the tables (0.4 s of imports).
def lookup_summary(key: str, trace: Trace) -> Summary | None:
    """The cached Summary of this content, around `trace` (the caller's, from lookup_trace or load_trace), or None."""
    return cache_mod.lookup(key, lambda tables, values: _summary_from(tables, values, trace), cache_mod.SUMMARY)


def store_summary(key: str, summary: Summary, *, limit: int | None = None):
    """Write the summary's tables and values (not its trace: that is the trace entry); None when not cacheable."""
    return cache_mod.store(
        key, summary, _summary_tables, cache_mod.SUMMARY, json=summary.to_json(), nonfinite=True, limit=limit
    )


def _summary_tables(summary: Summary) -> tuple[dict, dict]:
    tables, values = {}, {}
    for f in dataclasses.fields(summary):
        value = getattr(summary, f.name)
        if f.name == "trace":
            continue
        if hasattr(value, "columns") and hasattr(value, "index"):  # a DataFrame
            tables[f.name] = value
        else:
            values[f.name] = value
    return tables, values


def _summary_from(tables: dict, values: dict, trace: Trace) -> Summary:
    from analyzer.summary import Summary

    return Summary(trace=trace, **tables, **values)
