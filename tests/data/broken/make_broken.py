"""Build the broken-inputs corpus in this folder from ONE real small trace, and the table of expected outcomes.

    python tests/data/broken/make_broken.py      # rewrites every file here (deterministic) + EXPECTED.json/.md

Base: ../tracelens/mi300_compiled_transformer_block_triton.json.gz (TraceLens, MIT; 64,557 bytes of JSON, 12 kernels,
41 cpu_ops, Kineto's own pretty-printed layout). Each broken file is that trace damaged the way real files get
damaged (a killed run, a cut download, a flipped byte …) or another tool's trace of the kind users upload by
mistake. Expected kernel counts for truncated files are computed here independently of the analyzer: the
standard-library json module walks the original array and records where each event ends; an event survives a
cut iff it ends before the cut.

EXPECTED.json (read by tests/analyzer/test_broken_inputs.py): {file: {outcome: 'load'|'error', error: regex,
warnings: [regex], kernels: int|None, note: why}}. EXPECTED.md is the same table for people.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = HERE.parent / "tracelens" / "mi300_compiled_transformer_block_triton.json.gz"
MTIME = 1_700_000_000  # fixed gzip header time: byte-identical outputs on every run


def gz(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=MTIME, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()


def event_ends(text: str) -> list[tuple[int, dict]]:
    """(offset just past each event, event) for the traceEvents array, by the stdlib decoder."""
    dec = json.JSONDecoder()
    i = text.index("[", text.index('"traceEvents"'))
    out = []
    i += 1
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        obj, j = dec.raw_decode(text, i)
        out.append((j, obj))
        i = j


def kernels_before(ends, cut: int, cat: str = "kernel") -> int:
    return sum(1 for end, e in ends if end <= cut and e.get("cat") == cat and e.get("ph") == "X")


def build() -> dict:
    raw = gzip.decompress(BASE.read_bytes())
    text = raw.decode()
    ends = event_ends(text)
    n_kernels = kernels_before(ends, len(raw))
    assert n_kernels == 12
    doc = json.loads(text)
    files: dict[str, bytes] = {}
    expected: dict[str, dict] = {}

    def add(name, data, outcome, note, error=None, warnings=(), kernels=None, cut=None):
        files[name] = data
        cpu_ops = kernels_before(ends, cut, "cpu_op") if cut is not None else None
        expected[name] = {"outcome": outcome, "error": error, "warnings": list(warnings), "kernels": kernels,
                          "cpu_ops": cpu_ops, "note": note}  # fmt: skip

    # --- truncation (a killed run, a cut copy) --------------------------------------------------------------
    events_start = text.index("[", text.index('"traceEvents"'))
    events_end = text.rindex("]")
    for pct in (25, 50, 90):
        cut = events_start + (events_end - events_start) * pct // 100
        add(
            f"truncated_{pct}pct.json",
            raw[:cut],
            "load",
            f"plain JSON cut at {pct}% of the events array; every complete event is kept",
            warnings=["truncated"],
            kernels=kernels_before(ends, cut),
            cut=cut,
        )
    # Kineto writes CPU events first, GPU events last: cut inside the 6th and the 10th kernel event too
    kernel_ends = [end for end, e in ends if e.get("cat") == "kernel"]
    for nth in (6, 10):
        cut = kernel_ends[nth - 1] - 40
        add(f"truncated_in_kernel_{nth}.json", raw[:cut], "load", f"cut inside the {nth}th kernel event",
            warnings=["truncated"], kernels=kernels_before(ends, cut), cut=cut)  # fmt: skip
    k = text.index('"triton_', text.index('"cat": "kernel"'))
    add(
        "truncated_mid_string.json",
        raw[: k + 12],
        "load",
        "cut inside a kernel's name string",
        warnings=["truncated"],
        kernels=kernels_before(ends, k),
        cut=k,
    )
    tail = text.index('"traceName"')
    add(
        "truncated_in_trailer.json",
        raw[: tail + 20],
        "load",
        "events array closed, cut inside the keys after it: all 12 kernels kept",
        warnings=["truncated"],
        kernels=12,
    )
    only_header = text.index('"traceEvents"') + 20
    add("truncated_before_events.json", raw[:only_header], "error", "cut before the first event: nothing to keep",
        error="truncated JSON with no complete event")  # fmt: skip
    whole_gz = gz(raw)
    for pct in (50, 96):
        cut_gz = len(whole_gz) * pct // 100
        inflated = zlib.decompressobj(wbits=31).decompress(whole_gz[:cut_gz])
        add(
            f"truncated_{pct}pct.json.gz",
            whole_gz[:cut_gz],
            "load",
            f"gzip stream cut at {pct}% of its bytes: what inflated is read, then the JSON cut is repaired",
            warnings=["gzip stream is truncated", "truncated"],
            kernels=kernels_before(ends, len(inflated)),
            cut=len(inflated),
        )
    add("truncated_gzip_trailer.json.gz", whole_gz[:-4], "load", "gzip's 8-byte trailer cut: all data inflated",
        warnings=["trailer is missing"], kernels=12)  # fmt: skip
    add("gzip_header_only.json.gz", whole_gz[:8], "error", "a gzip header cut short", error="gzip stream is cut")

    # --- gzip damage ----------------------------------------------------------------------------------------
    bad = bytearray(whole_gz)
    bad[-8] ^= 0xFF  # CRC32 field
    add("bad_crc.json.gz", bytes(bad), "load", "CRC32 in the trailer wrong; inflate succeeded, so the data loads",
        warnings=["checksum mismatch"], kernels=12)  # fmt: skip
    add("not_gzip.json.gz", b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4, "error", "gzip magic, then garbage",
        error="not a valid gzip stream")  # fmt: skip
    corrupt = bytearray(whole_gz)
    for i in range(len(corrupt) // 2, len(corrupt) // 2 + 64):
        corrupt[i] ^= 0x5A
    add("corrupt_deflate.json.gz", bytes(corrupt), "load",
        "64 bytes of deflate data damaged mid-stream: inflate yields garbage there, the CRC disagrees; the events"
        " before the garbage are kept",
        warnings=["checksum mismatch", "corrupt"], kernels=None)  # fmt: skip
    add("two_members.json.gz", gz(raw[: len(raw) // 2]) + gz(raw[len(raw) // 2 :]), "load",
        "two concatenated gzip members (cat a.gz b.gz) are one stream", kernels=12)  # fmt: skip

    # --- not a trace ----------------------------------------------------------------------------------------
    add("empty.json", b"", "error", "zero bytes", error="empty file")
    add("whitespace.json", b"  \n\t\n  ", "error", "only whitespace", error="empty file")
    add("empty.json.gz", gz(b""), "error", "a valid gzip of nothing", error="empty file")
    add("not_json.txt", b"Traceback (most recent call last):\n  File \"train.py\"\n", "error", "a log file",
        error="not JSON")  # fmt: skip
    add("html.json", b"<!DOCTYPE html><html><body>404 Not Found</body></html>", "error",
        "an HTML error page saved as .json", error="not JSON")  # fmt: skip
    add("other_shape.json", json.dumps({"name": "fuselens", "version": "0.1.0", "dependencies": {}}).encode(), "error",
        "valid JSON of another shape (a package manifest)", error="without a 'traceEvents' key")  # fmt: skip
    add("trace_events_not_list.json", b'{"traceEvents": {"ph": "X"}}', "error", "traceEvents is an object",
        error="'traceEvents' is not a list")  # fmt: skip
    add("list_of_numbers.json", b"[1, 2, 3]", "error", "a JSON array of numbers", error="no events")
    add("no_events.json", json.dumps({"schemaVersion": 1, "traceEvents": []}).encode(), "error", "an empty trace",
        error="no events")  # fmt: skip
    meta_only = {k: v for k, v in doc.items() if k != "traceEvents"}
    meta_only["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    add("metadata_only.json", json.dumps(meta_only).encode(), "error",
        "the real trace's header and process/thread-name events only (a profiler that captured nothing)",
        error="only metadata")  # fmt: skip
    add("chrome_browser_trace.json", json.dumps(CHROME).encode(), "error",
        "Chrome DevTools performance trace (devtools.timeline, v8): no GPU, not PyTorch", error="Chrome")  # fmt: skip
    add("jax_tensorflow_trace.json.gz", gz(json.dumps(TF_JAX).encode()), "error",
        "TensorFlow/JAX profiler trace viewer JSON (/device:GPU:0 …): GPU ops, but not Kineto",
        error="TensorFlow/JAX")  # fmt: skip
    cpu_only = dict(doc)
    cpu_only["traceEvents"] = [
        e for e in doc["traceEvents"] if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    add("cpu_only.json", json.dumps(cpu_only).encode(), "load", "the real trace without its GPU activity",
        warnings=["no GPU kernels"], kernels=0)  # fmt: skip

    # --- JSON that orjson/msgspec reject but real traces contain ------------------------------------------
    k_obj = text.index('"registers per thread"') if '"registers per thread"' in text else None
    nan_text = text.replace('"dur": ', '"dur": NaN, "x": ', 1)
    occ = text.index('"ts": ', text.index('"cat": "kernel"'))
    nan_text2 = text[:occ] + '"q": Infinity, "r": -Infinity, ' + text[occ:]
    add("nan_infinity.json", (nan_text2.replace('"dur": ', '"dur": NaN, "y": ', 1)).encode(), "load",
        "NaN / Infinity literals (Python's json.dumps writes them)", warnings=["NaN/Infinity/N/A"], kernels=12)  # fmt: skip
    del k_obj, nan_text
    na = text.replace('"Record function id": 0', '"Record function id": N/A', 3)
    add("bare_na.json", na.encode(), "load", "bare N/A values", warnings=["NaN/Infinity/N/A"], kernels=12)
    ctrl = text.replace('"name": "TorchDynamo Cache Lookup"', '"name": "TorchDynamo\x01Cache\x1fLookup"', 1)
    add("control_chars.json", ctrl.encode(), "load", "raw control characters inside a string",
        warnings=["control characters"], kernels=12)  # fmt: skip
    nl = text.replace('"name": "Pregraph bytecode"', '"name": "Pregraph\nbytecode\tx"', 1)
    add("raw_newline_in_string.json", nl.encode(), "load", "a raw newline and tab inside a name",
        warnings=["newlines/tabs"], kernels=12)  # fmt: skip
    trailing = text.replace('"Ev Idx": 0\n    }', '"Ev Idx": 0,\n    }', 1).replace("\n  ],\n", "\n  ,],\n", 1)
    add("trailing_commas.json", trailing.encode(), "load", "trailing commas before } and ]",
        warnings=["trailing commas"], kernels=12)  # fmt: skip
    add("bom.json", b"\xef\xbb\xbf" + raw, "load", "a UTF-8 byte-order mark (Windows editors add one)", kernels=12)
    broken = text.replace('"ph": "X", "cat": "kernel"', '"ph": "X" "cat": "kernel"', 1)
    line = broken[: broken.index('"ph": "X" "cat": "kernel"')].count("\n") + 1
    add("syntax_error.json", broken.encode(), "error", "a missing comma: the message gives line and column",
        error=rf"invalid JSON at line {line}, column \d+")  # fmt: skip
    wrong = text.replace('"dur": ', '"dur": "slow", "z": ', 1)
    add("wrong_types.json", wrong.encode(), "load", "a string where a number belongs: that value is unknown",
        warnings=["unexpected types"], kernels=12)  # fmt: skip

    # --- size -----------------------------------------------------------------------------------------------
    bomb = gz(b'{"traceEvents": [' + b" " * (64 << 20) + b"]}")
    add("gzip_bomb.json.gz", bomb, "error", f"{len(bomb):,} bytes inflating to 64 MiB; the test caps at 8 MiB",
        error="decompresses to more than")  # fmt: skip
    return files, expected


# A Chrome DevTools "Performance" recording, trimmed: its real shape (metadata, TracingStartedInBrowser,
# devtools.timeline / v8 / blink events, a 'metadata' object).
CHROME = {
    "metadata": {"source": "DevTools", "startTime": "2024-05-01T10:00:00.000Z", "cpuThrottling": 1},
    "traceEvents": [
        {"args": {"name": "Browser"}, "cat": "__metadata", "name": "process_name", "ph": "M", "pid": 7801, "tid": 7801, "ts": 0},
        {"args": {"name": "CrBrowserMain"}, "cat": "__metadata", "name": "thread_name", "ph": "M", "pid": 7801, "tid": 7801, "ts": 0},
        {"args": {"data": {"frameTreeNodeId": 1, "persistentIds": True}}, "cat": "disabled-by-default-devtools.timeline",
         "name": "TracingStartedInBrowser", "ph": "I", "pid": 7801, "s": "t", "tid": 7801, "ts": 3481001711},
        {"args": {}, "cat": "disabled-by-default-devtools.timeline", "dur": 1520, "name": "RunTask", "ph": "X", "pid": 7830, "tdur": 1411, "tid": 1, "ts": 3481002000, "tts": 90012},
        {"args": {"data": {"functionName": "onload", "url": "https://example.com/app.js"}}, "cat": "devtools.timeline",
         "dur": 903, "name": "FunctionCall", "ph": "X", "pid": 7830, "tid": 1, "ts": 3481002100},
        {"args": {}, "cat": "v8", "dur": 311, "name": "V8.GC_SCAVENGER", "ph": "X", "pid": 7830, "tid": 1, "ts": 3481002600},
        {"args": {"data": {"frame": "A1B2", "layerTreeId": 1}}, "cat": "devtools.timeline,rail", "dur": 120, "name": "Paint", "ph": "X", "pid": 7830, "tid": 1, "ts": 3481003300},
    ],
}  # fmt: skip

# TensorFlow / JAX profiler "trace viewer" JSON (what TensorBoard's trace_viewer tool exports): processes named
# after devices, XLA ops as X events without categories, ns display unit.
TF_JAX = {
    "displayTimeUnit": "ns",
    "metadata": {"highres-ticks": True},
    "traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "Stream #14(Compute)"}},
        {"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 1712345.123, "dur": 57.9, "name": "fusion.3",
         "args": {"long_name": "%fusion.3 = bf16[8192,3072]{1,0} fusion(...)", "tf_op": "jit(mlp)/gelu"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 1712403.5, "dur": 61.2, "name": "cutlass_80_tensorop_bf16_s16816gemm",
         "args": {"tf_op": "jit(mlp)/dot_general"}},
        {"ph": "X", "pid": 701, "tid": 5, "ts": 1712300.0, "dur": 12.0, "name": "ThunkExecutor::Execute"},
    ],
}  # fmt: skip


def markdown(expected: dict) -> str:
    lines = [
        "# Broken-inputs corpus: expected outcomes",
        "",
        "Generated by `python tests/data/broken/make_broken.py` (with EXPECTED.json, which the test reads).",
        "`load`: the trace loads and `meta.warnings` has a line matching each pattern; `error`: `TraceError` whose",
        "one-line message matches the pattern. Base trace: `../tracelens/mi300_compiled_transformer_block_triton.json.gz`.",
        "",
        "| file | outcome | message / warnings (regex) | kernels kept | what it is |",
        "|---|---|---|---|---|",
    ]
    for name, e in expected.items():
        msg = e["error"] if e["outcome"] == "error" else "; ".join(e["warnings"]) or "(none)"
        k = "" if e["kernels"] is None else str(e["kernels"])
        lines.append(f"| `{name}` | {e['outcome']} | `{msg}` | {k} | {e['note']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    files, expected = build()
    for name, data in files.items():
        (HERE / name).write_bytes(data)
    (HERE / "EXPECTED.json").write_text(json.dumps(expected, indent=1) + "\n")
    (HERE / "EXPECTED.md").write_text(markdown(expected))
    print(f"wrote {len(files)} files to {HERE}")


if __name__ == "__main__":
    main()
