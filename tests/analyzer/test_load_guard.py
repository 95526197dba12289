"""The gzip bomb and padding guard, lying gzip trailers, and whitespace at memory speed (analyzer.readers.load).

The files are generated here: gzip members of whitespace around a real trace's events (h100_bert), so a
4 MB-class bomb is built in milliseconds by repeating one compressed member (gzip allows many members)."""

from __future__ import annotations

import gzip
import os
import tracemalloc

import orjson
import pytest

from analyzer import TraceError, load_trace
from analyzer.readers.document import skip_ws, skip_ws_back
from analyzer.readers.load import DEFAULT_MAX_GZIP_RATIO, ENV_MAX_GZIP_RATIO, GzipGuard, gzip_ratio_limit
from tests.conftest import TRACES, loaded_trace, reference_events

SPACES_16M = gzip.compress(b" " * (16 << 20), 9)  # ~16 KB: ~1,000:1


def _real_doc() -> tuple[bytes, bytes]:
    """(document head up to and including the first event, the rest) of a real trace, as JSON bytes."""
    top, events = reference_events(TRACES["h100_bert"])
    top = dict(top)
    top.pop("traceEvents", None)
    head = orjson.dumps(top)[:-1] + b',"traceEvents":[' + orjson.dumps(events[0])
    rest = b"".join(b"," + orjson.dumps(e) for e in events[1:]) + b"]}"
    return head, rest


def _padded_gzip(mib_of_spaces: int) -> bytes:
    """A valid trace: the real events, then mib_of_spaces MiB of spaces before the closing ']'."""
    head, rest = _real_doc()
    members = [gzip.compress(head + rest[:-2])] + [SPACES_16M] * (mib_of_spaces // 16) + [gzip.compress(b"]}")]
    return b"".join(members)


@pytest.fixture(scope="module")
def bomb_300m() -> bytes:
    data = _padded_gzip(304)
    assert len(data) < 500_000
    return data


@pytest.mark.slow  # inflates 256+ MiB
def test_bomb_is_refused_early_with_its_ratio(bomb_300m, tmp_path):
    path = tmp_path / "padded.json.gz"
    path.write_bytes(bomb_300m)
    for src, name in ((path, "padded.json.gz"), (bomb_300m, "upload.json.gz")):
        tracemalloc.start()
        try:
            with pytest.raises(
                TraceError, match=r"refused as a decompression bomb: .* \(\d[\d,]*:1, over the 50:1"
            ) as err:
                load_trace(src, name=name if isinstance(src, bytes) else None)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        msg = str(err.value)
        assert msg.startswith(f"{name}: ") and "\n" not in msg
        assert ENV_MAX_GZIP_RATIO in msg
        assert peak < GzipGuard.FLOOR + GzipGuard.WINDOW + (16 << 20)  # stopped at the floor, not 304 MiB


@pytest.mark.slow  # inflates 256+ MiB
def test_padding_is_refused_when_the_ratio_limit_is_raised(bomb_300m):
    # ~1,000:1 passes a 5,000:1 limit; the padding rule still sees ≥ 95% spaces
    with pytest.raises(TraceError, match=r"refused as padding: \d+% of the first .* \(\d[\d,]*:1\) are whitespace"):
        load_trace(bomb_300m, name="pad.json.gz", max_gzip_ratio=5000)


@pytest.mark.slow  # inflates 256+ MiB
def test_guard_off_loads_the_padded_trace_like_the_original(bomb_300m, monkeypatch):
    ref = loaded_trace(TRACES["h100_bert"])
    trace = load_trace(bomb_300m, name="pad.json.gz", max_gzip_ratio=0)
    assert len(trace.gpu_ops) == len(ref.gpu_ops) and len(trace.cpu_ops) == len(ref.cpu_ops)
    assert trace.gpu_ops["dur_us"].sum() == ref.gpu_ops["dur_us"].sum()
    monkeypatch.setenv(ENV_MAX_GZIP_RATIO, "0")
    assert gzip_ratio_limit() == 0
    assert len(load_trace(bomb_300m, name="pad.json.gz").gpu_ops) == len(ref.gpu_ops)
    monkeypatch.setenv(ENV_MAX_GZIP_RATIO, "lots")
    with pytest.raises(TraceError, match="FUSELENS_MAX_GZIP_RATIO: not a ratio"):
        load_trace(bomb_300m)
    monkeypatch.delenv(ENV_MAX_GZIP_RATIO)
    assert gzip_ratio_limit() == DEFAULT_MAX_GZIP_RATIO == 50


@pytest.mark.slow  # inflates 256+ MiB
def test_real_head_then_padding_is_caught_by_the_window_check():
    # a real head plus 16 MiB of hex text (2:1) then spaces: at the 256 MiB check the whole output is 30:1 and
    # 94% spaces, under both limits; the last 64 MiB alone is ~1,000:1
    head, rest = _real_doc()
    blob = b',{"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{"name":"' + os.urandom(8 << 20).hex().encode()
    members = [gzip.compress(head + rest[:-2] + blob + b'"}}', 1)] + [SPACES_16M] * 20 + [gzip.compress(b"]}")]
    with pytest.raises(TraceError, match=r"the last 67,\d+,\d+ bytes inflated"):
        load_trace(b"".join(members), name="tail.json.gz")


def test_a_lying_gzip_trailer_costs_nothing(tmp_path):
    data = bytearray(TRACES["h100_bert"].read_bytes())
    data[-4:] = (0xFFFFFFF0).to_bytes(4, "little")  # claims ~4 GiB of JSON
    path = tmp_path / "liar.json.gz"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        trace = load_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(trace.gpu_ops) == len(loaded_trace(TRACES["h100_bert"]).gpu_ops)
    assert any("checksum mismatch" in w for w in trace.meta.warnings)
    assert peak < 64 << 20  # the 1 MB trace, not a 4 GiB buffer


def test_whitespace_is_skipped_in_blocks(tmp_path):
    head, rest = _real_doc()
    pad = b" \n\t\r" * (5 << 20)  # 20 MB before the closing ']' and after the opening '['
    doc = head.replace(b'"traceEvents":[', b'"traceEvents":[' + pad) + rest[:-2] + pad + b"]}"
    path = tmp_path / "ws.json"
    path.write_bytes(pad + doc + pad)
    trace = load_trace(path)
    assert len(trace.gpu_ops) == len(loaded_trace(TRACES["h100_bert"]).gpu_ops)
    view = memoryview(b"  \n" * 700_000 + b"x" + b"\t" * 900_000)
    assert skip_ws(view, 0, len(view)) == 2_100_000
    assert skip_ws_back(view, 0, len(view)) == 2_100_001
    assert skip_ws(view, 2_100_001, len(view)) == len(view)
    assert skip_ws_back(view, 0, 2_100_000) == 0
    with pytest.raises(TraceError, match="empty file"):
        load_trace(b" " * (3 << 20), name="blank.json")


def test_the_cli_refuses_a_bomb_before_importing_the_analysis(tmp_path):
    """`python -m analyzer summary BOMB` reaches the guard with only the reader imported: no pandas, no analysis
    module (their imports were ~4 s of a 10 s refusal on a busy box). The floor and window are lowered in the
    child so that a 40 MiB bomb is enough; the rule is the same."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    path = tmp_path / "bomb.json.gz"
    path.write_bytes(_padded_gzip(48))
    code = (
        "import sys; from analyzer.readers.load import GzipGuard; from analyzer.cli import main\n"
        "GzipGuard.FLOOR = GzipGuard.WINDOW = 8 << 20\n"
        "rc = main(['summary', sys.argv[1]])\n"
        "print(rc, sorted(m for m in ('pandas', 'analyzer.summary', 'analyzer.trace') if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.stdout.strip() == "2 []", out.stderr
    assert out.stderr.startswith("error: bomb.json.gz: refused as a decompression bomb")


@pytest.mark.parametrize("damage", ["none", "bad_crc", "truncated", "corrupt"])
def test_zlib_ng_and_the_standard_zlib_read_alike(damage, monkeypatch):
    """zlib-ng inflates when installed (requirements.txt), the standard library's zlib where it is not (a bare GPU
    box, a Ray node): the same trace and the same warnings from either, intact or damaged."""
    import zlib as std_zlib

    from analyzer.readers import load

    data = bytearray(TRACES["h100_bert"].read_bytes())
    if damage == "bad_crc":
        data[-8] ^= 0xFF
    elif damage == "truncated":
        data = data[: len(data) * 2 // 3]
    elif damage == "corrupt":
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    results = []
    assert load.zlib.__name__ == "zlib_ng.zlib_ng"  # installed here, as requirements.txt says
    for module in (load.zlib, std_zlib):
        monkeypatch.setattr(load, "zlib", module)
        try:
            trace = load_trace(bytes(data), name="t.json.gz", cache=False)
            results.append((len(trace.gpu_ops), float(trace.gpu_ops["dur_us"].sum()), trace.meta.warnings))
        except TraceError as err:
            results.append(str(err))
    assert results[0] == results[1]
