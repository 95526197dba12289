"""Helpers for the dashboard's AppTest suites (tests/app/, cli/, e2e/): a real app.py run, real traces, no mocks.

AppTest runs app.py in-process exactly as `streamlit run` would (st.navigation, session state, st.cache_data), and
uploads go through the sidebar's real st.file_uploader widget, so the tests exercise the same upload handler users
hit. Markdown-bearing elements hold backslash-escaped text (the app escapes everything from traces), so
`plain()` strips the escapes before comparing.
"""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
HF = ROOT / "sample_traces" / "hf_geglu_bf16"
TIMEOUT = 120  # seconds per script run: the first run parses the bundled traces (cached afterwards)

_UNESCAPE = re.compile(r"\\(.)")


def plain(text: str) -> str:
    """Markdown text with the app's backslash escapes removed."""
    return _UNESCAPE.sub(r"\1", str(text))


def app(page: str | None = None) -> AppTest:
    """A fresh session of the dashboard, run once (it opens on the bundled HF case); optionally switched to a page."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if page:
        goto(at, page)
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def upload(at: AppTest, *paths_or_pairs) -> AppTest:
    """Upload files through the sidebar uploader: paths, or (name, bytes) pairs for derived files."""
    files = []
    for p in paths_or_pairs:
        if isinstance(p, tuple):
            files.append((p[0], p[1], "application/octet-stream"))
        else:
            files.append((Path(p).name, Path(p).read_bytes(), "application/octet-stream"))
    at.sidebar.file_uploader[0].set_value(files)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def runs(at: AppTest) -> list:
    """The session's runs in display order (baseline first)."""
    ss = at.session_state
    all_runs = list(ss["fl_runs"].values())
    base = ss["fl_baseline"]
    return sorted(all_runs, key=lambda r: r.key != base)


def labels(at: AppTest) -> list[str]:
    return [r.label for r in runs(at)]


def texts(at: AppTest, kind: str) -> list[str]:
    """Unescaped values of every element of a kind ('error', 'info', 'markdown', 'caption', …)."""
    return [plain(e.value) for e in getattr(at, kind)]


def metric_values(at: AppTest) -> dict[str, tuple[str, str]]:
    return {plain(m.label): (plain(m.value), plain(m.delta or "")) for m in at.metric}


def strings(obj) -> list[str]:
    """Every string inside a decoded JSON document (figure specs escape '<' as \\u003c: decode before checking)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in strings(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in strings(v)]
    return []


def broken_set(folder: Path) -> dict[str, Path]:
    """Damaged files derived from the bundled HF GEGLU recordings (real GPU traces, damaged the ways users' files
    are): a trace cut before its first kernel event (gzip; no GPU op), one whose kernel durations are strings, a runner manifest with
    `"median_us": "abc"` and an eager.ncu.json with `"dram_bytes_read": "abc"`. Returns {role: path}."""
    import gzip
    import json

    folder.mkdir(parents=True, exist_ok=True)
    raw = gzip.decompress((HF / "compile.json.gz").read_bytes())
    out = {"truncated": folder / "truncated_half.json.gz"}
    first = min(
        i for i in (raw.find(f'"cat": "{c}"'.encode()) for c in ("kernel", "gpu_memset", "gpu_memcpy")) if i >= 0
    )
    cut = raw.rfind(b"{", 0, first)  # cut before the first GPU event: no GPU op kept
    out["truncated"].write_bytes(gzip.compress(raw[:cut]))
    doc = json.loads(raw)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and "dur" in e:
            e["dur"] = "fast"  # a string where a number belongs
    out["wrong_types"] = folder / "wrong_types.json"
    out["wrong_types"].write_text(json.dumps(doc))
    man = json.loads((HF / "manifest.json").read_text())
    for v in man["variants"]:
        if v.get("name") == "eager":
            v["median_us"] = "abc"
    out["manifest"] = folder / "manifest.json"
    out["manifest"].write_text(json.dumps(man))
    ncu = json.loads((HF / "eager.ncu.json").read_text())
    ncu["kernels"][0]["dram_bytes_read"] = "abc"
    out["ncu"] = folder / "eager.ncu.json"
    out["ncu"].write_text(json.dumps(ncu))
    return out


def digest_of(path) -> str:
    """The content key the dashboard gives an upload of this file (its run id and cache entry name)."""
    from analyzer.readers.cache import content_key

    return content_key(Path(path).read_bytes())
