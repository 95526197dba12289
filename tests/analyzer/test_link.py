"""analyzer.link on real traces: kernel → launch (correlation) → innermost CPU op (External id or interval search)."""

from __future__ import annotations

import collections
import gzip

import numpy as np
import orjson
import pytest

from analyzer import load_trace
from analyzer.link import innermost_enclosing
from tests.conftest import SAMPLE_TRACES, TRACES, loaded_trace, reference_events, require_data

GPU = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
RUNTIME = ("cuda_runtime", "cuda_driver", "runtime")


def _reference_links(events):
    """Per GPU op (sorted by ts, name): (launch name, op name) by plain dict joins and a brute-force interval walk —
    the independent reference for analyzer.link."""
    import bisect

    launch = {e["args"]["correlation"]: e for e in events if e.get("ph") == "X" and e.get("cat", "").lower() in RUNTIME}
    ops_by_ext = collections.defaultdict(list)
    ops_by_thread = collections.defaultdict(list)
    annotation_ext = set()
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "").lower()
        if cat in ("cpu_op", "operator") and not e["name"].startswith("ProfilerStep#"):
            ops_by_ext[e["args"].get("External id")].append(e)
            ops_by_thread[(e["pid"], e["tid"])].append(e)
        elif cat == "user_annotation" or e["name"].startswith("ProfilerStep#"):
            annotation_ext.add(e.get("args", {}).get("External id"))
    for ops in ops_by_thread.values():
        ops.sort(key=lambda e: (e["ts"], -e["dur"]))
    starts = {t: [e["ts"] for e in ops] for t, ops in ops_by_thread.items()}

    def enclosing(ln):
        ops = ops_by_thread.get((ln["pid"], ln["tid"]), [])
        i = bisect.bisect_right(starts.get((ln["pid"], ln["tid"]), []), ln["ts"]) - 1
        while i >= 0:  # walk back to the latest-starting op that still encloses the launch
            if ops[i]["ts"] + ops[i]["dur"] >= ln["ts"]:
                return ops[i]["name"]
            i -= 1
        return ""

    out = []
    gpu = sorted(
        (e for e in events if e.get("ph") == "X" and e.get("cat", "").lower() in GPU),
        key=lambda e: (e["ts"], e["name"]),
    )
    for k in gpu:
        a = k["args"]
        ln = launch.get(a.get("correlation"))
        ext = a.get("External id", a.get("external id"))
        if ext is None and ln is not None:
            ext = ln["args"].get("External id", ln["args"].get("external id"))
        ops = ops_by_ext.get(ext, [])
        if len(ops) == 1:
            name = ops[0]["name"]
        elif ext in annotation_ext or ln is None:
            name = ""  # innermost range is a record_function, or no launch to search from
        else:
            name = enclosing(ln)  # no External id, or one naming no op (2022 traces stamp the correlation id)
        out.append((ln["name"] if ln else "", name))
    return out


@pytest.mark.parametrize(
    "key", ["h100_bert", "h100_qwen", "mi300_bert", "legacy_resnet", "hta_diff_control", "hta_amd", "b200_vllm"]
)
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_links_equal_a_plain_dict_join(key):
    trace = loaded_trace(TRACES[key])
    _, events = reference_events(TRACES[key])
    g = trace.gpu_ops.sort_values(["ts_us", "name"], kind="stable")
    got = list(zip(g["launch_name"], g["op_name"], strict=True))
    ref = _reference_links(events)
    # b200: 2 Triton kernels launched by cuLaunchKernelEx under python_function only: no cpu_op in either
    assert got == ref


def test_link_rates_on_real_traces():
    def rate(key):
        k = loaded_trace(TRACES[key]).kernels
        return (k["op_index"] >= 0).mean()

    assert rate("h100_bert") == 1.0
    assert rate("legacy_resnet") == 1.0
    assert rate("mi300_norm") == 1.0
    assert rate("hta_diff_control") > 0.99


def test_qwen_kernels_without_external_id_have_no_launch_in_the_trace():
    """The Qwen H100 trace's 436 kernels without External id were launched before the CPU side was recorded:
    their correlation ids match no runtime event, so they cannot be linked — and must not be guessed."""
    trace = loaded_trace(TRACES["h100_qwen"])
    _, events = reference_events(TRACES["h100_qwen"])
    runtime = {e["args"]["correlation"] for e in events if e.get("cat") in RUNTIME}
    no_ext = [e for e in events if e.get("cat") == "kernel" and "External id" not in e["args"]]
    assert len(no_ext) == 436 and not any(e["args"]["correlation"] in runtime for e in no_ext)
    k = trace.kernels
    orphan = k["launch_name"] == ""
    assert orphan.sum() == 436
    assert (k.loc[orphan, "op_index"] == -1).all() and (~k.loc[orphan, "shapes_known"]).all()
    assert (k.loc[~orphan, "op_index"] >= 0).all()  # every kernel whose launch is there is linked


@pytest.mark.parametrize("key", ["h100_bert", "h100_vit", "legacy_resnet", "mi300_norm"])
def test_interval_search_recovers_the_external_id_link(key):
    """Strip every External id from kernels and launches of a real trace: the innermost-enclosing-op search on
    the launching thread must find exactly the op the External id named."""
    top, events = reference_events(TRACES[key])
    stripped = []
    for e in events:
        if e.get("cat", "").lower() in GPU + RUNTIME and "args" in e:
            e = {**e, "args": {k: v for k, v in e["args"].items() if k.lower() != "external id"}}
        stripped.append(e)
    with_ids = loaded_trace(TRACES[key])
    without = load_trace(orjson.dumps({**top, "traceEvents": stripped}), name="stripped.json")
    assert (without.gpu_ops["external_id"] == -1).all()
    np.testing.assert_array_equal(without.gpu_ops["op_index"].to_numpy(), with_ids.gpu_ops["op_index"].to_numpy())
    assert (without.gpu_ops["op_index"] >= 0).mean() == (with_ids.gpu_ops["op_index"] >= 0).mean() == 1.0


def test_innermost_enclosing_nested_and_siblings():
    # thread (1, 1): A [0, 100] ⊃ B [10, 50] ⊃ C [20, 30];  D [60, 90] sibling of B;  thread (1, 2): E [0, 100]
    pid = np.array([1, 1, 1, 1, 1])
    tid = np.array([1, 1, 1, 1, 2])
    start = np.array([0.0, 10, 20, 60, 0])
    end = np.array([100.0, 50, 30, 90, 100])
    q_t = np.array([25.0, 40, 55, 70, 5, 25, 150, 25])
    q_tid = np.array([1, 1, 1, 1, 1, 2, 1, 3])
    got = innermost_enclosing(pid, tid, start, end, np.ones(8, int), q_tid, q_t)
    assert got.tolist() == [2, 1, 0, 3, 0, 4, -1, -1]


@pytest.mark.parametrize("seed", range(4))
def test_innermost_enclosing_matches_a_plain_scan(seed):
    """Deep nesting (a step-long op, answers 10^3–10^4 positions back) and siblings, several threads, against
    the definition: the latest-starting op of the thread with start ≤ t ≤ end."""
    rng = np.random.default_rng(seed)
    starts, ends, tids = [], [], []
    for tid in range(3):
        t = 0.0
        for _ in range(int(rng.integers(1, 4))):  # outer ops, each holding thousands of nested children
            outer_start, outer_len = t, float(rng.integers(5_000, 40_000))
            starts.append(outer_start)
            ends.append(outer_start + outer_len)
            tids.append(tid)
            s = outer_start + 1
            while s < outer_start + outer_len - 10:
                length = float(rng.integers(1, 8))
                starts += [s, s + 0.25]  # a child and its own child, then a gap
                ends += [s + length, s + length / 2]
                tids += [tid, tid]
                s += length + float(rng.integers(0, 3))
            t = outer_start + outer_len + 5
    start, end, tid = np.array(starts), np.array(ends), np.array(tids)
    nq = 3_000
    q_tid = rng.integers(0, 4, nq)  # thread 3 has no op
    q_t = rng.random(nq) * (end.max() + 10)
    got = innermost_enclosing(np.zeros(len(start), int), tid, start, end, np.zeros(nq, int), q_tid, q_t)
    want = []
    for qt, qtid in zip(q_t, q_tid, strict=True):
        hits = np.flatnonzero((tid == qtid) & (start <= qt) & (end >= qt))
        want.append(int(hits[np.lexsort((-end[hits], start[hits]))[-1]]) if len(hits) else -1)
    assert got.tolist() == want
    assert (got >= 0).sum() > nq // 5
    assert (end[got[got >= 0]] - start[got[got >= 0]] >= 5_000).sum() > 10  # answers far back: the outer op


def test_cuda_graph_replay_keeps_every_kernel_with_shapes_unknown():
    """HTA trace_diff/test: one cudaGraphLaunch (correlation 1941222) replays 339 GPU ops."""
    trace = loaded_trace(TRACES["hta_diff_test"])
    g = trace.gpu_ops
    replay = g[g["correlation"] == 1941222]
    assert len(replay) == 339
    assert (replay["launch_name"] == "cudaGraphLaunch").all()
    assert not replay["shapes_known"].any()
    assert replay["input_dims"].isna().all()
    _, events = reference_events(TRACES["hta_diff_test"])
    graph_corr = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    n_ref = sum(1 for e in events if e.get("cat") in GPU and e["args"].get("correlation") in graph_corr)
    assert (g["launch_name"] == "cudaGraphLaunch").sum() == n_ref == 5046


@pytest.mark.slow  # the slow tier (README): a sweep or a heavy check, several seconds
def test_launch_latency_and_driver_launches():
    trace = loaded_trace(TRACES["b200_vllm"])
    k = trace.kernels
    ex = k[k["launch_name"] == "cuLaunchKernelEx"]
    _, events = reference_events(TRACES["b200_vllm"])
    n_ex = sum(
        1
        for e in events
        if e.get("cat") == "kernel"
        and e["args"]["correlation"]
        in {x["args"]["correlation"] for x in events if x.get("name") == "cuLaunchKernelEx"}
    )
    assert len(ex) == n_ex > 0
    lat = k["launch_latency_us"].to_numpy()
    assert np.allclose(lat, k["ts_us"] - k["launch_ts_us"], equal_nan=True)
    assert np.nanmin(lat) > 0  # a kernel never starts before its launch call


def _hf(variant):
    p = SAMPLE_TRACES / "hf_geglu_bf16" / f"{variant}.json.gz"
    require_data(p)
    return loaded_trace(p)


def test_hf_eager_kernels_carry_their_ops_shapes():
    """The HF GEGLU MLP (M=8192 tokens, d 768, h 3072, bf16), eager, recorded on an H100 by our runner."""
    trace = _hf("eager")
    last = trace.steps["step"].max()
    k = trace.kernels[trace.kernels["step"] == last]
    assert k["op_name"].tolist() == ["aten::mm", "aten::gelu", "aten::mm", "aten::mul", "aten::mm"]
    assert k["shapes_known"].all()
    assert k["input_dims"].tolist()[0] == [[8192, 768], [768, 3072]]
    assert k["input_dims"].tolist()[1][0] == [64, 128, 3072]
    assert k["input_dims"].tolist()[4] == [[8192, 3072], [3072, 768]]
    assert all(t[0] == "c10::BFloat16" for t in k["input_types"])


def test_hf_compile_fused_kernel_links_to_its_inductor_op():
    trace = _hf("compile")
    last = trace.steps["step"].max()
    k = trace.kernels[trace.kernels["step"] == last]
    fused = k[k["name"].str.startswith("triton_poi_fused")]
    assert len(k) == 4 and len(fused) == 1
    assert fused["op_name"].iloc[0] == fused["name"].iloc[0]  # Inductor records a cpu_op named after the kernel
    assert fused["input_dims"].iloc[0][0] == [64, 128, 3072]


def test_gzip_roundtrip_of_reference_helper():
    # guard for the reference helper itself: it reads what gzip reads
    raw = gzip.decompress(TRACES["hta_triton"].read_bytes())
    assert len(reference_events(TRACES["hta_triton"])[1]) == len(orjson.loads(raw)["traceEvents"])
