"""Shared test fixtures: paths to the real traces in tests/data/ (see tests/data/ATTRIBUTION.md) and a cached loader.

Use the path constants directly (``from tests.conftest import TRACES``) or the fixtures below.
``loaded(path)`` returns a Trace loaded once per session: treat it as read-only (copy before mutating).

A test that needs recorded data says so through ONE helper, so that CI can refuse to pass with it missing:
``@pytest.mark.needs_data(path, ...)`` (or ``pytestmark = ...``) before the test runs, ``require_data(path, ...)`` inside
it, ``data_params(params, what)`` for a parametrize list built from files on disk. Missing data skips the test,
naming it; under ``FUSELENS_TEST_REQUIRE_DATA=1`` (set by ``.ci/run``) it fails instead.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
BROKEN = DATA / "broken"
SAMPLE_TRACES = ROOT / "sample_traces"  # GPU recordings of the HF GEGLU MLP case (manifest.json), when present

# CI (.ci/run) sets it: the clone carries sample_traces/ and tests/data/, so a missing file there is a broken checkout
# (a partial copy, an LFS pointer left unfetched), and a suite that skipped those tests would pass on half its checks.
REQUIRE_DATA = os.environ.get("FUSELENS_TEST_REQUIRE_DATA", "") == "1"

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


def data_missing(what: str) -> None:
    """Skip the calling test saying what recorded data is missing; under FUSELENS_TEST_REQUIRE_DATA=1 fail it."""
    if REQUIRE_DATA:
        pytest.fail(f"test data missing: {what} (FUSELENS_TEST_REQUIRE_DATA=1: CI runs on a full checkout)", False)
    pytest.skip(f"test data missing: {what}")


def require_data(*paths: Path | str) -> None:
    """data_missing(the missing ones) when any of paths does not exist, else nothing."""
    missing = [_rel(Path(p)) for p in paths if not Path(p).exists()]
    if missing:
        data_missing(", ".join(missing))


def data_params(params: list, what: str, n_args: int = 1) -> list:
    """A parametrize list found on disk or, when it came out empty, one placeholder case that calls
    data_missing(what) at setup, instead of pytest's silent "got empty parameter set" skip."""
    if params:
        return params
    return [pytest.param(*["-"] * n_args, marks=pytest.mark.needs_data(missing=what), id="no-data")]


def _rel(p: Path) -> str:
    try:
        return p.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(p)


def pytest_runtest_setup(item):
    """The needs_data marker: needs_data(*paths) is require_data(*paths) before the test; needs_data(missing=what)
    is data_missing(what)."""
    for mark in item.iter_markers("needs_data"):
        if "missing" in mark.kwargs:
            data_missing(mark.kwargs["missing"])
        require_data(*mark.args)


# The unit tier (`python -m pytest -m unit`, README): in-process checks of one analyzer module on the small public
# traces in tests/data: no subprocess, no app session, no process pool, no sweep over every recording. It ran in under
# 60 s on the 2-core machine (README). A module joins by its name here; a test of it marked slow, fuzz or browser
# stays out (a later -m replaces addopts' one, so the tier deselects those itself).
UNIT_MODULES = frozenset(
    {
        "test_attention",
        "test_broken_inputs",
        "test_codes",
        "test_cost",
        "test_decode",
        "test_diff",
        "test_diff_align",
        "test_diff_layer",
        "test_diff_ops",
        "test_diff_same_program",
        "test_fmt",
        "test_gpus",
        "test_graph_replay",
        "test_link",
        "test_load",
        "test_load_guard",
        "test_perfetto",
        "test_raw_contract",
        "test_steps",
        "test_summary",
        "test_templates",
        "test_tiles",
        "test_truncated_steps",
    }
)
_NOT_UNIT = ("slow", "fuzz", "browser")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by markers
def pytest_collection_modifyitems(config, items):
    flat = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    if flat:
        raise pytest.UsageError(
            f"tests/{flat[0]}: a test file goes in tests/{{analyzer,app,kernels,cli,e2e}}/ (all: {flat})"
        )
    gone = sorted(m for m in UNIT_MODULES if not (ROOT / "tests" / "analyzer" / f"{m}.py").is_file())
    if gone:
        raise pytest.UsageError(f"tests/conftest.py UNIT_MODULES names files not in tests/analyzer/: {gone}")
    for item in items:
        path = Path(str(item.fspath))
        in_unit_module = path.parent.name == "analyzer" and path.stem in UNIT_MODULES
        if in_unit_module and not any(item.get_closest_marker(m) for m in _NOT_UNIT):
            item.add_marker(pytest.mark.unit)


def pytest_configure(config):
    """The columnar trace cache (analyzer.readers.cache) goes to a fresh folder per test session: tests never read
    or fill the user's ~/.cache/fuselens, and child processes (CLI, Streamlit server) inherit the setting."""
    import tempfile

    os.environ["FUSELENS_CACHE_DIR"] = tempfile.mkdtemp(prefix="fuselens-test-cache-")


def pytest_unconfigure(config):
    import shutil

    d = os.environ.get("FUSELENS_CACHE_DIR", "")
    if "fuselens-test-cache-" in d:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test starts from the session's environment. `analyzer.cli.main([..., "--no-cache"])` run in-process sets
    FUSELENS_NO_CACHE=1 in os.environ (for the rank workers it starts), and a test that sets FUSELENS_CACHE_DIR for a
    moment deletes the session's; left there, every later test and the CLI subprocesses it starts would inherit that
    (a cache test then found 0 entries where it expects 2, depending only on which file ran first)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


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
    """GPU recordings in sample_traces/ (empty until the runner has written them; under FUSELENS_TEST_REQUIRE_DATA=1
    an empty list fails the collection instead)."""
    found = sorted(
        p for p in SAMPLE_TRACES.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.name != "manifest.json"
    )
    if not found and REQUIRE_DATA:
        data_missing(f"no recording under {_rel(SAMPLE_TRACES)}/")
    return found


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
