"""analyzer.readers.decode: typed columnar decode, checked field by field against a plain orjson parse of real traces."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest

from analyzer import load_trace
from analyzer.readers import batches as batch_mod
from analyzer.readers import decode
from analyzer.readers.coerce import floats, ints
from analyzer.readers.document import EVENT_BOUNDARY, split_document, split_events_unchecked
from analyzer.readers.events import Event
from tests.conftest import TRACES, loaded_trace, reference_events


def test_ints_handle_legacy_strings_and_unknowns():
    values = [7, "stream 7", "25738", "", None, "Spans", 2**70, 3.0, 2.5, True, [1]]
    assert ints(values).tolist() == [7, 7, 25738, -1, -1, -1, -1, 3, -1, -1, -1]
    assert ints([1, 2, 3]).dtype == np.int64


def test_floats_unknown_is_nan_never_zero():
    out = floats([1, 2.5, "N/A", None, "3", [1], True])
    assert out[:2].tolist() == [1.0, 2.5]
    assert np.isnan(out[2]) and np.isnan(out[3]) and np.isnan(out[5]) and np.isnan(out[6])
    assert out[4] == 3.0


@pytest.mark.parametrize("key", ["h100_qwen", "legacy_resnet", "mi300_bert", "hta_ns"])
def test_cpu_op_shapes_equal_orjson(key):
    """Input Dims / Input type / Input Strides are kept as Raw, factorized, decoded once: same objects as orjson."""
    trace = loaded_trace(TRACES[key])
    _, events = reference_events(TRACES[key])
    ops = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat", "").lower() in ("cpu_op", "operator")
        and not e["name"].startswith("ProfilerStep#")
    ]
    ops.sort(key=lambda e: (e["ts"], e["name"]))
    cpu = trace.cpu_ops.sort_values(["ts_us", "name"], kind="stable")
    assert cpu["name"].tolist() == [e["name"] for e in ops]
    for col, arg in (("input_dims", "Input Dims"), ("input_types", "Input type"), ("input_strides", "Input Strides")):
        assert cpu[col].tolist() == [e.get("args", {}).get(arg) for e in ops], col
    assert cpu["external_id"].tolist() == [e["args"].get("External id", -1) for e in ops]


@pytest.mark.parametrize("key", ["h100_bert", "legacy_resnet", "mi300_bert", "b200_vllm"])
def test_kernel_args_equal_orjson(key):
    trace = loaded_trace(TRACES[key])
    _, events = reference_events(TRACES[key])
    ks = sorted((e for e in events if e.get("cat", "").lower() == "kernel"), key=lambda e: (e["ts"], e["name"]))
    k = trace.kernels.sort_values(["ts_us", "name"], kind="stable")
    a = [e["args"] for e in ks]
    assert k["correlation"].tolist() == [x["correlation"] for x in a]
    assert k["device"].tolist() == [x["device"] for x in a]
    assert k["stream"].tolist() == [x["stream"] for x in a]
    assert k["grid"].tolist() == [",".join(map(str, x["grid"])) for x in a]
    assert k["block"].tolist() == [",".join(map(str, x["block"])) for x in a]
    regs = [x.get("registers per thread", np.nan) for x in a]
    np.testing.assert_array_equal(k["registers_per_thread"].to_numpy(), np.array(regs, dtype=float))
    smem = [x.get("shared memory", np.nan) for x in a]
    np.testing.assert_array_equal(k["shared_memory_bytes"].to_numpy(), np.array(smem, dtype=float))
    if key == "mi300_bert":  # ROCm kernels record no registers / shared memory: unknown, never 0
        assert k["registers_per_thread"].isna().all() and k["shared_memory_bytes"].isna().all()


def test_memop_bytes_and_rocm_string_bytes():
    trace = loaded_trace(TRACES["legacy_resnet"])
    _, events = reference_events(TRACES["legacy_resnet"])
    ref = sorted(e["args"]["bytes"] for e in events if e.get("cat") in ("Memcpy", "Memset"))
    assert sorted(trace.memops["memop_bytes"].astype(int)) == ref
    assert trace.kernels["memop_bytes"].isna().all()
    # MI300: a hipMemcpyWithStream runtime event carries "bytes": "1" (a string). The typed decoder accepts it
    # without falling back to the slow lenient path (which would add a warning).
    mi = loaded_trace(TRACES["mi300_bert"])
    assert not any("unexpected types" in w for w in mi.meta.warnings)


def test_small_chunks_give_identical_tables(monkeypatch):
    """Chunked decode (cut at '},{' boundaries, factorized args across chunks) equals one-chunk decode."""
    path = TRACES["h100_qwen"]
    monkeypatch.setenv(decode.ENV_WORKERS, "1")  # one process: every batch goes through event_batches
    whole = load_trace(path, cache=False)
    original = decode.event_batches
    calls = []

    def small(events, chunk_bytes=None, buf=None, release=False):
        calls.append(1)
        return original(events, 50_000, buf, release)  # 8.6 MB of JSON → ~170 chunks

    monkeypatch.setattr(decode, "event_batches", small)
    chunked = load_trace(path, cache=False)
    assert calls  # the small chunks were used (a cache hit would read neither)
    for table in ("gpu_ops", "cpu_ops", "launches", "annotations", "steps", "step_categories"):
        pd.testing.assert_frame_equal(getattr(chunked, table), getattr(whole, table), obj=table)


def test_chunk_cut_inside_a_string_moves_to_the_next_boundary():
    """A '},{' inside a kernel name is a false boundary: the decoder must notice and cut elsewhere."""
    _, events = reference_events(TRACES["h100_bert"])
    events = [dict(e) for e in events]
    k = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    events[k] = {**events[k], "name": "evil},{name" + "x" * 10}
    blob = orjson.dumps({"traceEvents": events})
    form, header, raw = split_document(blob)
    cut_at = blob.index(b"evil},{") - blob.index(b"[")  # first chunk boundary search starts right on the fake one
    batches = list(batch_mod.event_batches(raw, chunk_bytes=max(1, cut_at - 2)))
    assert sum(len(b) for b in batches) == len(events)
    names = [e.name for b in batches for e in b if isinstance(e, Event)]
    assert "evil},{name" + "x" * 10 in names


def test_lenient_batch_reads_odd_types_as_unknown():
    """Wrong-typed values in a real trace: the batch is re-read leniently; only those values become unknown."""
    raw = gzip.decompress(TRACES["h100_bert"].read_bytes())
    doc = orjson.loads(raw)
    ks = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    ks[0]["dur"] = "N/A"
    ks[1]["args"]["correlation"] = None
    ks[2]["args"]["stream"] = [1, 2]
    ks[3]["args"]["grid"] = "big"
    ks[4]["args"] = "not an object"
    trace = load_trace(orjson.dumps(doc), name="odd.json")
    assert any("unexpected types" in w for w in trace.meta.warnings)
    k = trace.kernels
    assert len(k) == 60
    by_name_ts = {(r.name, round(r.ts_us, 3)): r for r in k.itertuples()}
    t0 = trace.meta.trace_start_us

    def row(e):
        return by_name_ts[(e["name"], round(e["ts"] - t0, 3))]

    assert np.isnan(row(ks[0]).dur_us)
    assert row(ks[1]).correlation == -1
    assert row(ks[2]).stream == -1
    assert row(ks[3]).grid == ""
    assert row(ks[4]).correlation == -1 and row(ks[4]).external_id == -1
    assert row(ks[5]).correlation == ks[5]["args"]["correlation"]  # the rest is intact


def test_names_are_interned():
    k = loaded_trace(TRACES["legacy_resnet"]).kernels
    names = k["name"].tolist()
    first = {}
    for n in names:
        first.setdefault(n, n)
    assert all(first[n] is n for n in names)  # equal names are one object: memory scales with distinct names


def test_process_labels_and_categories_recorded():
    tr = loaded_trace(TRACES["h100_bert"])
    assert tr.meta.n_events == len(reference_events(TRACES["h100_bert"])[1])
    form, header, raw = split_document(gzip.decompress(TRACES["h100_bert"].read_bytes()))
    d = decode.decode_events(form, header, raw)
    assert d.categories["kernel"] == 60 and d.categories["python_function"] == 1385
    assert any(re.match(r"python", x) for x in d.process_labels)


@pytest.mark.parametrize("key", ["h100_qwen", "legacy_resnet"])
def test_parallel_decode_equals_sequential(key):
    """Forked workers (each a byte range of the events) merge into exactly the sequential result."""
    raw = TRACES[key].read_bytes()
    buf = bytearray(gzip.decompress(raw))
    form, header, events = split_document(buf)
    seq = decode.decode_events(form, header, events, buf, workers=1)
    par = decode.decode_events(form, header, events, buf, workers=2)
    assert par.n_events == seq.n_events and par.categories == seq.categories
    assert par.trace_start_raw == seq.trace_start_raw
    for table in ("gpu", "cpu", "launches", "annotations"):
        a, b = getattr(seq, table), getattr(par, table)
        assert a.keys() == b.keys()
        if not a:
            continue
        oa, ob = np.argsort(a["event_index"], kind="stable"), np.argsort(b["event_index"], kind="stable")
        for col in a:  # row order within Decoded follows batches; build_trace sorts by (ts, event_index)
            left, right = [a[col][i] for i in oa], [b[col][i] for i in ob]
            assert len(left) == len(right), (table, col)
            assert all(x == y or (x != x and y != y) for x, y in zip(left, right, strict=True)), (table, col)
    # names stay interned through the merge
    names = list(par.gpu["name"])
    first = {}
    assert all(first.setdefault(n, n) is n for n in names)
    assert bytes(buf) == gzip.decompress(raw)  # in-place bracketing restored every byte


def _events_doc(n: int, nested_at: int) -> bytearray:
    events = []
    for i in range(n):
        args = {"External id": i, "Input Dims": [[i % 7, 3]], "Input type": ["float"]}
        if i == nested_at:  # '},{"' inside an event's args: a byte range must not start there
            args["list"] = [{"a": 1}, {"b": 2}] * 2000
        events.append(
            orjson.dumps(
                {"ph": "X", "cat": "cpu_op", "name": f"op{i % 11}", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": args}
            )  # fmt: skip
        )
    return bytearray(b'{"traceEvents":[' + b",".join(events) + b"]}")


def test_parallel_decode_falls_back_where_the_split_lands_inside_an_event():
    """The worker's byte range would start inside a nested list of objects: it cannot be read alone, so the
    events are decoded in one process: the same columns, never a partial result."""
    buf = _events_doc(2000, nested_at=1000)
    form, header, events = split_document(buf)
    view, _, pos, end = batch_mod.events_span(events, buf)
    cut = EVENT_BOUNDARY.search(view, pos + (end - pos) // 2, end)
    assert b'"b"' in bytes(view[cut.start() - 20 : cut.end() + 10])  # the split is inside the nested list
    seq = decode.decode_events(form, header, events, buf, workers=1)
    par = decode.decode_events(form, header, events, buf, workers=2)
    assert par.cpu["event_index"].tolist() == seq.cpu["event_index"].tolist() == list(range(2000))
    assert par.cpu["input_dims"].tolist() == seq.cpu["input_dims"].tolist()
    assert par.cpu["name"] == seq.cpu["name"]


def test_worker_count_policy(monkeypatch):
    import threading

    monkeypatch.delenv(decode.ENV_WORKERS, raising=False)
    assert decode._worker_count(None, decode.PARALLEL_MIN_BYTES - 1) == 1  # small: never worth a fork
    monkeypatch.setenv(decode.ENV_WORKERS, "1")
    assert decode._worker_count(None, 10**10) == 1
    monkeypatch.delenv(decode.ENV_WORKERS)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:  # another thread alive (as in the Streamlit server): no fork
        assert decode._worker_count(None, 10**10) == 1
    finally:
        stop.set()
        t.join()


def test_a_string_orjson_refuses_leaves_only_its_own_snippet_unknown():
    """A surrogate encoded as UTF-8 bytes inside one op's 'Concrete Inputs' (found by tests/analyzer/test_fuzz.py): that op's
    value is unknown (None), every other op keeps its own, and loading never raises anything but a TraceError."""
    from analyzer import load_trace

    op = (
        b'{"ph":"X","cat":"cpu_op","name":"aten::%s","pid":1,"tid":1,"ts":%d,"dur":10,"args":{"External id":%d,'
        b'"Input Dims":[[2,2],[2,2]],"Input type":["float","float"],"Concrete Inputs":[%s]}}'
    )
    raw = (
        b'{"traceEvents": ['
        + b",".join([op % (b"mm", 0, 1, b'"\xed\xa0\x80",""'), op % (b"add", 20, 2, b'"","1"')])
        + b"]}"
    )
    t = load_trace(raw, name="surrogate.json")
    assert t.cpu_ops["concrete_inputs"].tolist() == [None, ["", "1"]]


def test_a_worker_failing_after_pages_were_given_back_reads_the_file_again(tmp_path, monkeypatch):
    """With two processes the parent hands back the pages it decoded; if the worker then dies, the file is read
    and decoded again in one process: the same trace as a one-process load."""
    path = tmp_path / "qwen.json"
    path.write_bytes(gzip.decompress(TRACES["h100_qwen"].read_bytes()))
    monkeypatch.setenv(decode.ENV_WORKERS, "1")
    want = load_trace(path, cache=False)
    calls = {"released": 0}
    release = decode.release_pages

    def counting_release(buf, a, b):
        calls["released"] += 1
        release(buf, a, b)

    def dying_worker(view, buf, a, b, conn, release):
        import os

        os._exit(3)

    monkeypatch.setattr(decode, "release_pages", counting_release)
    monkeypatch.setattr(decode, "_decode_child", dying_worker)
    monkeypatch.setenv(decode.ENV_WORKERS, "2")
    got = load_trace(path, cache=False)
    assert calls["released"] > 0  # pages were given back before the worker was seen to fail
    pd.testing.assert_frame_equal(got.gpu_ops, want.gpu_ops)
    pd.testing.assert_frame_equal(got.cpu_ops, want.cpu_ops)


@pytest.mark.parametrize("key", sorted(TRACES))
def test_unchecked_split_finds_what_the_validating_split_finds_or_declines(key):
    data = gzip.decompress(TRACES[key].read_bytes()) if TRACES[key].suffix == ".gz" else TRACES[key].read_bytes()
    quick = split_events_unchecked(data)
    if quick is None:  # e.g. deviceProperties written after the events: split_document's case
        return
    full = split_document(data)
    assert quick[:2] == full[:2] and bytes(quick[2]) == bytes(full[2])


def test_unchecked_split_takes_the_benchmark_layout():
    data = gzip.decompress((Path(__file__).parents[1] / "data/hta/trace_diff/control/control.json.gz").read_bytes())
    quick, full = split_events_unchecked(data), split_document(data)
    assert quick is not None and quick[:2] == full[:2] and bytes(quick[2]) == bytes(full[2])


@pytest.mark.parametrize(
    "doc",
    [
        b'[{"ph":"X"}]',  # array form
        b'{"x":1}',  # no traceEvents
        b'{"traceEvents":{"a":[1]}}',  # not a list
        b'{"meta":{"traceEvents":[1]},"traceEvents":[{"ph":"X"}]}',  # the first one is nested
        b'{"traceEvents":[{"ph":"X"}],"traceEvents":[{"ph":"M"}]}',  # a second top-level one
        b'{"traceEvents":[{"ph":"X"}',  # cut short
    ],
)
def test_unchecked_split_declines_what_it_cannot_vouch_for(doc):
    assert split_events_unchecked(doc) is None


def test_a_syntax_error_the_unchecked_split_let_through_reads_the_file_the_whole_way(tmp_path):
    """NaN inside an event: the quick split does not see it; the batch decode objects, and the load repeats with
    the validating split and its repairs: the same trace and warning as before the quick split existed."""
    ev = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":%s,"args":{"correlation":%d}}'
    events = [ev % (i, b"NaN" if i == 500 else b"2", i) for i in range(1000)]
    path = tmp_path / "nan.json"
    path.write_bytes(b'{"schemaVersion":1,"traceEvents":[' + b",".join(events) + b'],"traceName":"t"}')
    assert split_events_unchecked(path.read_bytes()) is not None
    t = load_trace(path, cache=False)
    assert len(t.gpu_ops) == 1000 and t.gpu_ops["dur_us"].isna().sum() == 1
    assert any("NaN" in w for w in t.meta.warnings)
