"""The broken-inputs corpus (tests/data/broken/, built by make_broken.py from a real trace): every file gets exactly
its expected outcome from EXPECTED.json — loads (with the expected warnings and kernels), or one TraceError line."""

from __future__ import annotations

import json
import re
import tracemalloc

import pytest

from analyzer import TraceError, load_trace
from tests.conftest import BROKEN

EXPECTED = json.loads((BROKEN / "EXPECTED.json").read_text())
CAP = 8 << 20  # the bomb inflates to 64 MiB; nothing legitimate here is over 100 KB


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("as_bytes", [False, True], ids=["path", "upload"])
def test_corpus_outcome(name, as_bytes):
    exp = EXPECTED[name]
    path = BROKEN / name
    src = path.read_bytes() if as_bytes else path

    def load():
        return load_trace(src, name=name, max_decompressed_bytes=CAP)

    if exp["outcome"] == "error":
        with pytest.raises(TraceError) as err:
            load()
        msg = str(err.value)
        assert "\n" not in msg
        assert msg.startswith(f"{name}: ")
        assert re.search(exp["error"], msg), msg
        return
    trace = load()
    for pattern in exp["warnings"]:
        assert any(re.search(pattern, w) for w in trace.meta.warnings), (pattern, trace.meta.warnings)
    if not exp["warnings"]:
        assert trace.meta.warnings == [], trace.meta.warnings
    assert all("\n" not in w for w in trace.meta.warnings)
    n = len(trace.kernels)
    if exp["kernels"] is None:
        assert 0 <= n <= 12
    else:
        assert n == exp["kernels"], (n, exp["kernels"])
    if exp.get("cpu_ops") is not None:
        assert len(trace.cpu_ops) == exp["cpu_ops"]


def test_truncation_points_differ():
    """The truncated files keep different numbers of kernels: the corpus really cuts at different places."""
    kept = {EXPECTED[n]["kernels"] for n in EXPECTED if n.startswith("truncated_") and EXPECTED[n]["outcome"] == "load"}
    assert len(kept) >= 4 and 12 in kept and min(kept) < 6


def test_gzip_bomb_is_refused_before_it_fills_memory():
    bomb = (BROKEN / "gzip_bomb.json.gz").read_bytes()
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match="decompresses to more than 8,388,608 bytes"):
            load_trace(bomb, name="bomb.json.gz", max_decompressed_bytes=CAP)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * CAP  # stopped at the cap (plus one 1 MiB step), not at 64 MiB


def test_syntax_error_names_line_and_column():
    with pytest.raises(TraceError) as err:
        load_trace(BROKEN / "syntax_error.json")
    text = (BROKEN / "syntax_error.json").read_text()
    m = re.search(r"line (\d+), column (\d+)", str(err.value))
    line, col = int(m.group(1)), int(m.group(2))
    assert text.splitlines()[line - 1][col - 1 :].startswith('"cat": "kernel"')


def test_corpus_is_what_make_broken_builds():
    """The committed files are exactly the script's output (so EXPECTED.json describes these bytes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_broken", BROKEN / "make_broken.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    files, expected = mod.build()
    assert expected == EXPECTED
    for name, data in files.items():
        assert (BROKEN / name).read_bytes() == data, name


_K = b'{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":1,"dur":2,"args":{"correlation":1}}'


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"traceEvents":[' + _K % b"k\xff" + b"]}", id="latin1-byte-fast-path"),
        pytest.param(b'{"traceEvents":[null, ' + _K % b"k\xff" + b"]}", id="lenient-batch"),
        pytest.param(b"[null, " + _K % b"k\xed\xa0\x80" + b"]", id="lenient-batch-array-form"),
        pytest.param(
            b'{"\x00chemaVersion":1,"deviceProperties":[{"\x80d":0}],"traceEvents":[' + _K % b"k" + b"]}",
            id="syntax-repair-path",
        ),
    ],
)
def test_invalid_utf8_is_replaced_on_every_path(data):
    """Bad UTF-8 (Latin-1 bytes in a name) is read as U+FFFD wherever msgspec meets it: typed batch, lenient
    batch, header, and inside the syntax repair (cases found by tests/analyzer/test_fuzz.py)."""
    t = load_trace(data, name="utf8.json")
    assert len(t.gpu_ops) == 1
    assert any("U+FFFD" in w for w in t.meta.warnings)


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deep_nesting_is_a_clean_error(depth):
    nested = b"[" * depth + b"]" * depth
    data = (
        b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":' + nested + b"}]}"
    )
    with pytest.raises(TraceError, match="nested too deeply"):
        load_trace(data, name="deep.json")
