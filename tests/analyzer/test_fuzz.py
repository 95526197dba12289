"""Property-based fuzzing of load → summarize → diff. Strategies: tests/analyzer/fuzz_strategies.py.

Properties, for every generated or mutated trace:
* load_trace returns a Trace whose every table keeps its column contract (analyzer/schema.py) and whose warnings
  are one line each — or raises TraceError with ONE line naming the file. Nothing else escapes.
* an undamaged trace loads, with exactly as many GPU ops and steps as it has kernel/memcpy/memset events and
  distinct ProfilerSteps (a loader that rejected everything would pass the first property).
* summarize returns a Summary whose to_json() is strict JSON (no NaN, no numpy types), or raises TraceError.
* diff_runs of two loaded traces returns a Diff with strict-JSON to_json(), or raises DiffError/TraceError.
* every case is bounded: hypothesis' deadline per example, pytest-timeout per test.

Profiles (FUSELENS_FUZZ_PROFILE): 'ci' (default) — 2,100 examples over the tests, derandomized so CI is
reproducible, ~90 s of CPU on 2 cores; 'long' — 5x that (10,500), random seeds. bench/fuzz_long.py is the long run
that collects every distinct failure instead of stopping at the first. FUSELENS_FUZZ_SCALE=0.1 for a quick look.
Bugs found and not yet fixed: fuzz_strategies.KNOWN_OPEN_BUGS (each pinned by a strict xfail below).
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer import schema
from analyzer.errors import DiffError, TraceError
from tests.analyzer.fuzz_strategies import fuzz_bytes, synthetic_doc, valid_bytes

pytestmark = pytest.mark.fuzz  # the fuzz tier: `python -m pytest -m fuzz` (.ci/run runs it)

PROFILE = os.environ.get("FUSELENS_FUZZ_PROFILE", "ci")
SCALE = float(os.environ.get("FUSELENS_FUZZ_SCALE", {"ci": 1, "long": 5}[PROFILE]))  # SCALE: quick local runs
_slow_ok = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
    HealthCheck.filter_too_much,
]
settings.register_profile(
    "fuselens-ci", derandomize=True, deadline=5000, suppress_health_check=_slow_ok, database=None, print_blob=True
)
settings.register_profile(
    "fuselens-long", derandomize=False, deadline=10000, suppress_health_check=_slow_ok, print_blob=True
)
BASE = settings.get_profile(f"fuselens-{PROFILE}")
# Example counts per test ('ci'): 1,500 + 250 + 300 + 50 = 2,100. CPU per example measured on this 2-core box:
# load 29 ms, undamaged synthetic 46 ms, load+summarize+diff 72 ms, two fuzzed runs diffed 190 ms → ~90 s in all.
# Nearly all of it is the loader's fixed cost (~40-80 ms to build a Trace even from a 1-event file), so that is the
# lever for more examples per CI minute. 'long' (x5) = 10,500.
N_LOAD, N_VALID, N_PIPE, N_DIFF = (max(1, int(n * SCALE)) for n in (1500, 250, 300, 50))
ROOT = Path(__file__).resolve().parents[2]
NAME = "fuzz<case>.json"  # a name with markup in it: messages must carry it verbatim, on one line


def check_one_line(err: BaseException, name: str = NAME) -> None:
    msg = str(err)
    assert len(msg.splitlines()) <= 1, f"multi-line message: {msg!r}"  # \n, \r, \x85, \u2028 … all count
    assert name in msg, f"message does not name the file: {msg!r}"
    assert len(msg) < 2000, f"message of {len(msg)} chars"


def check_contract(trace) -> None:
    for table in ("gpu_ops", "cpu_ops", "launches", "annotations", "steps", "step_categories"):
        df = getattr(trace, table)
        assert list(df.columns) == schema.names(table), table
        for c in schema.TABLES[table]:
            assert str(df[c.name].dtype) == c.dtype, f"{table}.{c.name}: {df[c.name].dtype} != {c.dtype}"
    for w in trace.meta.warnings:
        assert isinstance(w, str) and "\n" not in w, f"warning not one line: {w!r}"


def check_strict_json(doc) -> None:
    """What `--json` prints must be parseable by any JSON reader: no NaN/Infinity, only JSON types."""

    def walk(x):
        if isinstance(x, float):
            assert math.isfinite(x), "non-finite float in JSON output"
        elif isinstance(x, dict):
            for k, v in x.items():
                assert isinstance(k, str), f"non-string key {k!r}"
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        else:
            assert x is None or isinstance(x, (str, int, bool)), f"non-JSON value of type {type(x).__name__}"

    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    walk(doc)
    json.dumps(doc, allow_nan=False)


def load(data: bytes, name: str = NAME):
    from analyzer.pipeline import load_trace

    try:
        trace = load_trace(data, name=name)
    except TraceError as err:
        check_one_line(err, name)
        return None
    check_contract(trace)
    return trace


def summarize_or_none(trace):
    from analyzer.summary import summarize

    try:
        s = summarize(trace)
    except TraceError as err:
        check_one_line(err)
        return None
    check_strict_json(s.to_json())
    return s


@pytest.mark.timeout(int(180 * max(1.0, SCALE)))
@settings(BASE, max_examples=N_LOAD)
@given(data=fuzz_bytes())
def test_load_raises_only_one_line_trace_errors(data):
    load(data)


@pytest.mark.timeout(int(120 * max(1.0, SCALE)))
@settings(BASE, max_examples=N_VALID)
@given(doc=synthetic_doc())
def test_undamaged_synthetic_traces_load_completely(doc):
    from analyzer.pipeline import load_trace

    data = json.dumps(doc).encode()
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel"}
    n_gpu = sum(e.get("cat") in gpu_cats for e in events)
    steps = {e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    if n_gpu == 0:  # a trace with no GPU activity may be refused — cleanly
        load(data)
        return
    trace = load_trace(data, name=NAME)
    check_contract(trace)
    assert len(trace.gpu_ops) == n_gpu
    assert len(trace.steps) == max(len(steps), 1)


@functools.lru_cache(maxsize=1)
def base_summary():
    """A real, small, undamaged run to diff fuzzed runs against: the TraceLens MI300 torch.compile'd block
    (12 kernels, 4 Triton fusions) — small, so a diff costs ~0.1 s."""
    from analyzer.pipeline import load_trace
    from analyzer.summary import summarize

    return summarize(load_trace(ROOT / "tests/data/tracelens/mi300_compiled_transformer_block_triton.json.gz"))


def diff_or_none(base, cand, labels=("base<1>", "cand|2")):
    from analyzer.diff import diff_runs

    try:
        diff = diff_runs(base, [cand], labels=list(labels))
    except (DiffError, TraceError) as err:
        msg = str(err)
        assert "\n" not in msg and len(msg) < 2000, msg
        return None
    check_strict_json(diff.to_json())
    return diff


@pytest.mark.timeout(int(240 * max(1.0, SCALE)))
@settings(BASE, max_examples=N_PIPE)
@given(data=st.one_of(fuzz_bytes(), valid_bytes()), fuzzed_is_base=st.booleans())
def test_summarize_and_diff_raise_only_typed_errors(data, fuzzed_is_base):
    """load → summarize → diff against a real run (the fuzzed run as base or as candidate)."""
    trace = load(data)
    s = summarize_or_none(trace) if trace is not None else None
    if s is not None:
        base = base_summary()
        diff_or_none(*((s, base) if fuzzed_is_base else (base, s)))


@pytest.mark.timeout(int(180 * max(1.0, SCALE)))
@settings(BASE, max_examples=N_DIFF)
@given(a=fuzz_bytes(), b=fuzz_bytes())
def test_diff_of_two_fuzzed_runs_raises_only_typed_errors(a, b):
    sa = summarize_or_none(t) if (t := load(a)) is not None else None
    sb = summarize_or_none(t) if (t := load(b, "cand<b>.json")) is not None else None
    if sa is not None and sb is not None:
        diff_or_none(sa, sb)


# ---------------------------------------------------------------------------------- targeted, deterministic cases


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [500, 1_000, 100_000, 2_000_000])
def test_deep_nesting_is_bounded(depth):
    """A deeply nested args value must be a clean error (or a load), never a crash; 2 million brackets = 4 MB.
    Found by this fuzzer (RecursionError escaped load_trace from msgspec past ~1000 levels); fixed in the loader."""
    nested = b"[" * depth + b"]" * depth
    data = (
        b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":' + nested + b"}]}"
    )
    load(data)


_K = b'{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":1,"dur":2,"args":{"correlation":1}}'


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "data, must_load",
    [
        pytest.param(b'{"traceEvents":[' + _K % b"k\xff" + b"]}", True, id="latin1-byte-in-kernel-name"),
        pytest.param(b'{"traceEvents":[' + _K % b"k\xed\xa0\x80" + b"]}", True, id="raw-lone-surrogate"),
        pytest.param(
            b'{"distributedInfo":{"backend":"nc\x98l"},"traceEvents":[' + _K % b"k" + b"]}",
            True,
            id="bad-byte-in-metadata",
        ),
        # JSON-legal but not Unicode: msgspec refuses it, so the loader may refuse the file (cleanly)
        pytest.param(b'{"traceEvents":[' + _K % b"k\\ud800" + b"]}", False, id="escaped-lone-surrogate"),
        pytest.param(b'{"traceEvents":[' + _K % "名前\u202e".encode() + b"]}", True, id="valid-utf8-bidi"),
    ],
)
def test_names_that_are_not_clean_utf8(data, must_load):
    """Found by this fuzzer (UnicodeDecodeError escaped load_trace); fixed in the loader: bad bytes become U+FFFD."""
    t = load(data)
    assert (t is not None) or not must_load
    if t is not None:
        assert len(t.gpu_ops) == 1


# The invalid-UTF-8 cases this fuzzer found on the lenient-batch and syntax-repair paths (the U+FFFD repair was
# missing there; fixed) are pinned in tests/analyzer/test_broken_inputs.py::test_invalid_utf8_is_replaced_on_every_path.


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "name",
    [
        "plain.json",
        "<img src=x onerror=alert(1)>.json",
        "evil\nname.json",
        "evil\rname.json",
        "evil\u2028name.json",
    ],
)
def test_any_file_name_gives_a_one_line_message(name):
    """Found by this suite (a line break in a file name made a multi-line TraceError); fixed in errors.py."""
    from analyzer.pipeline import load_trace

    with pytest.raises(TraceError) as ei:
        load_trace(b"not a trace", name=name)
    assert len(str(ei.value).splitlines()) == 1, repr(str(ei.value))


@pytest.mark.timeout(int(60 * max(1.0, SCALE)))
@settings(BASE, max_examples=max(1, int(100 * SCALE)))
@given(name=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80))
def test_drawn_file_names_give_one_line_messages(name):
    """Any printable name: the message stays one line and names the file."""
    from analyzer.pipeline import load_trace

    with pytest.raises(TraceError) as ei:
        load_trace(b"[1, 2", name=name)
    msg = str(ei.value)
    assert len(msg.splitlines()) == 1, repr(msg)
    assert all(word in msg for word in name.split()), f"the file name is not in {msg!r}"


# --- runner side files (analyzer.runmeta) ----------------------------------------------------------------------------
N_SIDE = max(1, int(400 * SCALE))  # ~5 ms each: no trace is loaded
_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _manifest_paths(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _manifest_paths(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _manifest_paths(v, (*path, i))


@functools.cache
def _probe_manifest() -> dict:
    return json.loads((ROOT / "sample_traces" / "plain_8192tok_h8192_bf16" / "manifest.json").read_text())


@pytest.mark.timeout(int(120 * max(1.0, SCALE)))
@settings(BASE, max_examples=N_SIDE)
@given(data=st.data())
def test_side_files_are_typed_or_one_line_and_their_readers_never_raise(data):
    """Any subtree of a real runner manifest replaced by any JSON value: runmeta either refuses it with one line
    naming the file, or every reader downstream (facts, the Diff's JSON, the dashboard's titles) takes it."""
    import copy

    from analyzer import runmeta
    from analyzer.fmt import clean_json, json_text
    from analyzer.runmeta import conditions_text, manifest_doc_facts, workload_text

    doc = copy.deepcopy(_probe_manifest())
    paths = list(_manifest_paths(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        value = data.draw(_JSON)
        if not path:
            doc = value
            break
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    raw = json.dumps(doc).encode()
    try:
        checked = runmeta.load_manifest(raw, "fuzz<case>/manifest.json")
    except runmeta.SideFileError as err:
        line = str(err)
        assert "\n" not in line and line.startswith("fuzz<case>/manifest.json: "), line
        return
    from app_core.samples import case_title
    from app_core.state import clean_entry, context_from_manifest

    for v in checked.get("variants", []):
        facts = manifest_doc_facts(checked, str(v.get("trace") or "x.json.gz")) or {}
        json.loads(json_text(clean_json(facts)))  # strict JSON, 64-bit integers: what `diff --json` prints
        workload_text(facts)
        conditions_text(facts.get("conditions"))
        clean_entry(v)
    case_title(context_from_manifest(checked))
