"""analyzer.fmt: the one formatting module (bytes, µs, names, labels, signed changes, JSON, terminal-safe text)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analyzer import fmt

ESC_SAMPLES = {
    "csi colour": "\x1b[31mred\x1b[0m",
    "csi cursor": "a\x1b[2J\x1b[Hb",
    "osc 8 link": "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07",
    "osc 8 st": "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "osc title": "\x1b]0;pwned\x07x",
    "bel": "ding\x07dong",
    "c1 csi": "\x9b31mred",
    "c1 osc": "\x9d0;pwned\x9cx",
    "dcs": "\x1bPq#0;2;0;0;0\x1b\\x",
    "rlo": "gemm\u202etxt.exe",
    "isolates": "a\u2066b\u2069c\u200f",
    "nul del": "a\x00b\x7fc",
    "charset": "\x1b(Bplain",
    "unterminated csi": "tail\x1b[",
}
FORBIDDEN = set(map(chr, [*range(0x00, 0x20), *range(0x7F, 0xA0)])) | set(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
)


@pytest.mark.parametrize("raw", list(ESC_SAMPLES.values()), ids=list(ESC_SAMPLES))
def test_safe_text_leaves_no_control_or_sequence_residue(raw):
    out = fmt.safe_text(raw)
    assert not (set(out) & FORBIDDEN), repr(out)
    for residue in ("[31m", "]8;;", "evil.example", "pwned", "[2J", "#0;2"):
        assert residue not in out, (raw, out)


def test_safe_text_keeps_visible_text():
    assert fmt.safe_text(ESC_SAMPLES["csi colour"]) == "red"
    assert fmt.safe_text(ESC_SAMPLES["osc 8 link"]) == "click"
    assert fmt.safe_text(ESC_SAMPLES["rlo"]) == "gemmtxt.exe"
    assert fmt.safe_text("gelu µs 形状 ✓  a\nb\tc") == "gelu µs 形状 ✓ a b c"
    assert fmt.safe_text("x" * 10, max_chars=5) == "xxxx…"
    assert fmt.safe_text(None) == ""


def test_safe_block_keeps_lines():
    out = fmt.safe_block("line one \x1b[31mred\x1b[0m\r\nline\u202e two\x07\n")
    assert out == "line one red\nline two\n"


def test_json_text_escapes_what_a_terminal_acts_on_and_round_trips():
    names = list(ESC_SAMPLES.values())
    text = fmt.json_text({"names": names, "nan": float("nan"), "np": np.float32(1.5)})
    assert not (set(text) & FORBIDDEN)
    doc = json.loads(text)
    assert doc["names"] == names  # data kept verbatim
    assert doc["nan"] is None and doc["np"] == 1.5


def test_clean_json():
    got = fmt.clean_json(
        {1: (np.int64(3), np.float64("inf"), np.bool_(True)), "a": np.array([1.0, np.nan]), "s": "x", "n": None}
    )
    assert got == {"1": [3, None, True], "a": [1.0, None], "s": "x", "n": None}
    assert type(got["1"][0]) is int
    import pandas as pd

    assert fmt.clean_json(pd.NA) is None and fmt.clean_json(pd.NaT) is None


def test_bytes_and_us():
    assert fmt.fmt_bytes(100_663_296) == "100.7 MB"
    assert fmt.fmt_bytes(1_234) == "1.2 kB"
    assert fmt.fmt_bytes(12) == "12 B"
    assert fmt.fmt_bytes(2.5e12) == "2.5 TB"
    assert fmt.fmt_bytes(float("nan")) == "unknown"
    assert fmt.fmt_bytes(None, missing="—") == "—"
    assert fmt.fmt_bytes(-0.01) == "0 B"
    assert fmt.fmt_us(254.34) == "254.3 µs"
    assert fmt.fmt_us(12_345.0) == "12.3 ms"
    assert fmt.fmt_us(-0.04) == "0.0 µs"
    assert fmt.fmt_us(math.inf) == "unknown"


def test_signed_numbers_never_print_minus_zero():
    assert fmt.fmt_signed(1.234) == "+1.2"
    assert fmt.fmt_signed(-4.0) == "-4.0"
    assert fmt.fmt_signed(-0.04) == "0.0"
    assert fmt.fmt_signed(0.0) == "0.0"
    assert fmt.fmt_signed(-0.0, ".0f") == "0"
    assert fmt.fmt_pct(-9.46) == "-9.5%"
    assert fmt.fmt_pct(None) == "—"
    assert fmt.fmt_num(-0.0001) == "0.0"
    assert fmt.fmt_num(1234.5, ",.0f", " µs") == "1,234 µs"  # banker's rounding of .5 is format()'s
    assert fmt.fmt_num(float("nan")) == "—"


def test_short_name():
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl<float>>(int, float*)"
    assert fmt.short_name(name, 60) == "at::native::vectorized_elementwise_kernel<…>"
    assert fmt.short_name("Memset (Device)") == "Memset (Device)"
    assert fmt.short_name("\x1b[31mtriton_poi_fused_gelu_0\x1b[0m") == "triton_poi_fused_gelu_0"
    assert len(fmt.short_name("x" * 200, 48)) == 48


def test_labels():
    assert fmt.unique_labels(["eager", "eager", "eager", "compile"]) == ["eager", "eager (2)", "eager (3)", "compile"]
    assert fmt.unique_label("a", {"a", "a (2)"}) == "a (3)"
    assert fmt.file_label("/x/y/rank0.pt.trace.json.gz") == "rank0"
    assert fmt.file_label("C:\\runs\\eager.json") == "eager"
    assert fmt.file_label("\x1b[31meager\u202e.json.gz") == "eager"


def test_a_spread_is_shown_in_its_medians_unit():
    """'100.6 ms (100.5–100.7)', never a range in µs beside a median in ms ('(100,527.0–100,650.0)'), which read as
    100 seconds; below 10 ms both stay in µs."""
    from analyzer.fmt import fmt_us_spread

    assert fmt_us_spread(100_600.0, [100_527.0, 100_650.0]) == "100.6 ms (100.5–100.7)"
    assert fmt_us_spread(226.7, [226.5, 226.9]) == "226.7 µs (226.5–226.9)"
    assert fmt_us_spread(20_000.0, [9_000.0, 31_000.0], what="p10–p90") == "20.0 ms (p10–p90 9.0–31.0)"
    assert fmt_us_spread(float("nan"), [1.0, 2.0]) == "unknown"
