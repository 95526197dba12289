"""Shared test fixtures: paths to the real traces in tests/data/ (see tests/data/ATTRIBUTION.md) and a cached loader.

Use the path constants directly (``from tests.conftest import TRACES``) or the fixtures below.
``loaded(path)`` returns a Trace loaded once per session: treat it as read-only (copy before mutating).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
BROKEN = DATA / "broken"
SAMPLE_TRACES = ROOT / "sample_traces"  # GPU recordings of the HF GEGLU MLP case (manifest.json), when present

# Every public real trace we ship (tests/data/{hta,kineto,tracelens}), by a short name.
TRACES: dict[str, Path] = {
    # TraceLens (AMD-AGI/TraceLens, MIT): new schema, Input Dims/type/Strides
    "h100_bert": DATA / "tracelens" / "h100_bert-small_eager.json.gz",
    "h100_qwen": DATA / "tracelens" / "h100_qwen1.5-0.5b_eager.json.gz",
    "h100_vit": DATA / "tracelens" / "h100_falconsai-vit_eager.json.gz",
    "mi300_bert": DATA / "tracelens" / "mi300_bert-small_eager.json.gz",
    "mi300_qwen": DATA / "tracelens" / "mi300_qwen1.5-0.5b_eager.json.gz",
    "mi300_triton": DATA / "tracelens" / "mi300_compiled_transformer_block_triton.json.gz",
    "mi300_norm": DATA / "tracelens" / "mi300_normalization_fwd_bwd.json.gz",
    "b200_vllm": DATA / "tracelens" / "b200_vllm_eager.json.gz",
    # pytorch/kineto tb_plugin (BSD): legacy PyTorch 1.x schema
    "legacy_resnet": DATA / "kineto" / "resnet50_num_workers_0.worker0.1623143089861.pt.trace.json.gz",
    "legacy_resnet_w4": DATA / "kineto" / "resnet50_num_workers_4.worker0.1623212756351.pt.trace.json.gz",
    "legacy_gpu_metrics": DATA / "kineto" / "gpu_metrics_input.json",
    "legacy_gpu_metrics_expected": DATA / "kineto" / "gpu_metrics_expected.json",
    # HolisticTraceAnalysis (MIT)
    "hta_amd": DATA / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta_alexnet": DATA / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz",
    "hta_df_index": DATA / "hta" / "df_index_resolver" / "df_index_resolver.json.gz",
    "hta_nccl": DATA / "hta" / "nccl_parser_config" / "nccl_data.json.gz",
    "hta_cuda_graph": DATA / "hta" / "negative_queue_length_values_check" / "rank0.json.gz",
    "hta_ns": DATA / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta_diff_control": DATA / "hta" / "trace_diff" / "control" / "control.json.gz",
    "hta_diff_test": DATA / "hta" / "trace_diff" / "test" / "test.json.gz",
    "hta_filter_rank0": DATA / "hta" / "trace_filter" / "sampled_rank-0.json.gz",
    "hta_filter_rank1": DATA / "hta" / "trace_filter" / "sampled_rank-1.json.gz",
    "hta_triton": DATA / "hta" / "triton_example" / "triton_example.json.gz",
}


def pytest_configure(config):
    """The columnar trace cache (analyzer.readers.cache) goes to a fresh folder per test session: tests never read
    or fill the user's ~/.cache/fuselens, and child processes (CLI, Streamlit server) inherit the setting."""
    import os
    import tempfile

    os.environ["FUSELENS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fuselens-test-cache-")


def pytest_unconfigure(config):
    import os
    import shutil

    d = os.environ.get("FUSELENS_CACHE_DIR", "")
    if "fuselens-test-cache-" in d:
        shutil.rmtree(d, ignore_errors=True)


@functools.cache
def _load(path: str):
    from analyzer.pipeline import load_trace

    return load_trace(path)


def loaded_trace(path: Path | str):
    """Trace for path, loaded once per test session. Read-only: copy a table before changing it."""
    return _load(str(path))


@pytest.fixture(scope="session")
def traces() -> dict[str, Path]:
    return TRACES


@pytest.fixture(scope="session")
def loaded():
    return loaded_trace


def sample_trace_paths() -> list[Path]:
    """GPU recordings in sample_traces/ (empty until the runner has written them)."""
    if not SAMPLE_TRACES.is_dir():
        return []
    return sorted(
        p for p in SAMPLE_TRACES.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.name != "manifest.json"
    )


@functools.lru_cache(maxsize=8)
def reference_events(path: Path | str) -> tuple[dict, list[dict]]:
    """(top-level dict without traceEvents, event dicts) by a plain orjson parse: the independent reference that
    tests compare the fast decoder against. Small traces only."""
    import gzip

    import orjson

    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    if isinstance(doc, list):
        return {}, doc
    events = doc.pop("traceEvents")
    return doc, events
