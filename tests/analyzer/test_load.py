"""analyzer.readers.load on every real public trace: counts and sums checked against a plain orjson parse of the same file."""

from __future__ import annotations

import gzip
import math
import re

import numpy as np
import pandas as pd
import pytest

from analyzer import TraceError, load_trace, schema
from analyzer.readers.load import DEFAULT_MAX_DECOMPRESSED_BYTES, ENV_MAX_DECOMPRESSED, decompression_cap
from tests.conftest import TRACES, loaded_trace, reference_events

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}


def _x(events, cats):
    return [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in cats]


@pytest.mark.parametrize("key", sorted(TRACES))
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_every_public_trace_loads_with_reference_counts(key):
    path = TRACES[key]
    trace = loaded_trace(path)
    top, events = reference_events(path)

    gpu_ref = _x(events, GPU_CATS)
    cpu_ref = [e for e in _x(events, {"cpu_op", "operator"}) if not e["name"].startswith("ProfilerStep#")]
    rt_ref = _x(events, RUNTIME_CATS)
    assert trace.meta.n_events == len(events)
    assert len(trace.gpu_ops) == len(gpu_ref) > 0
    assert len(trace.cpu_ops) == len(cpu_ref)
    assert len(trace.launches) == len(rt_ref)
    assert (trace.gpu_ops["kind"].value_counts().to_dict()) == pd.Series(
        [GPU_CATS[e["cat"].lower()] for e in gpu_ref]
    ).value_counts().to_dict()
    # durations survive exactly (sum over all kernels, µs)
    assert math.isclose(trace.gpu_ops["dur_us"].sum(), sum(e["dur"] for e in gpu_ref), rel_tol=1e-12)
    assert math.isclose(trace.cpu_ops["dur_us"].sum(), sum(e["dur"] for e in cpu_ref), rel_tol=1e-12)
    # ts relative to the first non-metadata event
    t0 = min(e["ts"] for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float)))
    assert trace.meta.trace_start_us == pytest.approx(t0)
    first_kernel = min(e["ts"] for e in gpu_ref)
    assert trace.gpu_ops["ts_us"].min() == pytest.approx(first_kernel - t0, abs=0.3)  # float64 ulp at 1.7e15 µs is 0.25
    assert trace.gpu_ops["ts_us"].min() >= 0
    # tables honour the column contract exactly
    for table in ("gpu_ops", "cpu_ops", "launches", "annotations", "steps", "step_categories"):
        df = getattr(trace, table)
        assert list(df.columns) == schema.names(table), table
        for c in schema.TABLES[table]:
            assert str(df[c.name].dtype) == c.dtype, (table, c.name, df[c.name].dtype)
    # device name from deviceProperties (legacy computeProperties)
    props = top.get("deviceProperties") or top.get("computeProperties") or []
    assert trace.meta.gpu_name == (props[0]["name"] if props else None)
    assert trace.meta.distributed == top.get("distributedInfo")
    assert trace.meta.base_time_ns == top.get("baseTimeNanoseconds")
    # a clean real trace needs no repair and has no unreadable values
    assert not any(re.search("repaired|unexpected types|truncated|gzip", w) for w in trace.meta.warnings), (
        trace.meta.warnings
    )


def test_legacy_schema_is_recognised():
    trace = loaded_trace(TRACES["legacy_resnet"])
    assert trace.meta.schema == "legacy"
    assert loaded_trace(TRACES["h100_bert"]).meta.schema == "kineto"
    # legacy string tids on GPU rows ("stream 7") become the stream number; CPU tids ("25738") become ints
    assert set(trace.gpu_ops["stream"]) == {7}
    assert set(trace.cpu_ops["tid"]) >= {25738}
    # legacy kernels carry a lowercase 'external id': it must be read
    assert (trace.kernels["external_id"] >= 0).all()
    # epoch-µs integers: relative times start at 0 and the profiler window is ~1.07 s long
    assert trace.cpu_ops["ts_us"].min() >= 0
    assert 1.0e6 < trace.gpu_ops["end_us"].max() < 1.2e6


def test_legacy_compute_properties_get_modern_keys():
    trace = loaded_trace(TRACES["legacy_gpu_metrics"])
    props = trace.meta.device_properties[0]
    assert props["name"] == "Tesla V100-DGXS-32GB"
    assert (props["computeMajor"], props["computeMinor"], props["numSms"]) == (7, 0, 80)


def test_ns_resolution_trace_keeps_fractional_microseconds():
    trace = loaded_trace(TRACES["hta_ns"])
    _, events = reference_events(TRACES["hta_ns"])
    durs = sorted(e["dur"] for e in events if e.get("cat") == "kernel")
    assert np.allclose(np.sort(trace.kernels["dur_us"].to_numpy()), durs)
    assert (trace.kernels["dur_us"] % 1 != 0).any()  # fractions kept, not truncated to integer µs


def test_bytes_upload_equals_path_and_gzip_is_detected_by_magic(tmp_path):
    path = TRACES["h100_bert"]
    from_path = loaded_trace(path)
    data = path.read_bytes()
    from_bytes = load_trace(data, name="upload.bin")
    assert from_bytes.meta.source == "upload.bin"
    pd.testing.assert_frame_equal(from_bytes.gpu_ops, from_path.gpu_ops)
    # a gzip file named .json, and a plain file named .json.gz: content decides
    misnamed = tmp_path / "really_gzip.json"
    misnamed.write_bytes(data)
    plain_named_gz = tmp_path / "really_plain.json.gz"
    plain_named_gz.write_bytes(gzip.decompress(data))
    for p in (misnamed, plain_named_gz):
        t = load_trace(p)
        assert len(t.gpu_ops) == len(from_path.gpu_ops)
        assert t.meta.warnings == from_path.meta.warnings


def test_bare_array_form(tmp_path):
    import orjson

    _, events = reference_events(TRACES["h100_bert"])
    p = tmp_path / "bare.json"
    p.write_bytes(orjson.dumps(events))
    trace = load_trace(p)
    assert len(trace.gpu_ops) == len(loaded_trace(TRACES["h100_bert"]).gpu_ops)
    assert trace.meta.gpu_name is None  # the array form has no deviceProperties


def test_decompression_cap_argument_and_env(monkeypatch):
    path = TRACES["h100_bert"]  # 71 KB gzip → 1,078,563 bytes of JSON
    with pytest.raises(TraceError, match=r"decompresses to more than 500,000 bytes") as err:
        load_trace(path, max_decompressed_bytes=500_000)
    assert str(err.value).startswith("h100_bert-small_eager.json.gz: ")
    monkeypatch.setenv(ENV_MAX_DECOMPRESSED, "500000")
    assert decompression_cap() == 500_000
    with pytest.raises(TraceError, match="decompresses to more than"):
        load_trace(path)
    assert len(load_trace(path, max_decompressed_bytes=2_000_000).gpu_ops) == 61  # the argument wins over env
    monkeypatch.delenv(ENV_MAX_DECOMPRESSED)
    assert decompression_cap() == DEFAULT_MAX_DECOMPRESSED_BYTES == 8 * 1024**3


def test_uncompressed_file_over_cap_is_refused():
    with pytest.raises(TraceError, match="over the 1,000-byte limit"):
        load_trace(TRACES["legacy_gpu_metrics"], max_decompressed_bytes=1000)


def test_missing_file_and_directory():
    with pytest.raises(TraceError, match="nope.json: no such file"):
        load_trace("/nonexistent/nope.json")
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(TRACES["h100_bert"].parent)


def test_meta_extra_keeps_small_scalars_only():
    trace = loaded_trace(TRACES["h100_qwen"])
    extra = trace.meta.extra
    assert extra["cuda_runtime_version"] == 12040
    # the TraceLens 'metadata' block (with an environment dump) is not carried along
    assert all(isinstance(v, (str, int, float, bool)) for v in extra.values())
    assert "metadata" not in extra


@pytest.mark.parametrize("workers", ["1", "2"])
def test_big_file_read_into_a_private_map_loads_the_same(tmp_path, monkeypatch, workers):
    """Files over _BIG_READ_BYTES are read into an anonymous private map (no zero-fill pass): the same trace,
    decoded in place, in one process or two; a broken one takes the same repairs."""
    from analyzer.readers import decode
    from analyzer.readers import load as load_mod

    path = tmp_path / "qwen.json"
    path.write_bytes(gzip.decompress(TRACES["h100_qwen"].read_bytes()))
    want = load_trace(path, cache=False)
    monkeypatch.setattr(load_mod, "_BIG_READ_BYTES", 0)
    monkeypatch.setenv(decode.ENV_WORKERS, workers)
    assert not isinstance(load_mod.read_path(path, "q", 1 << 30)[0], bytearray)
    got = load_trace(path, cache=False)
    pd.testing.assert_frame_equal(got.gpu_ops, want.gpu_ops)
    pd.testing.assert_frame_equal(got.cpu_ops, want.cpu_ops)
    cut = tmp_path / "cut.json"
    cut.write_bytes(path.read_bytes()[:-5000])  # truncated: the recovery keeps every complete event
    assert any("truncated" in w for w in load_trace(cut, cache=False).meta.warnings)
