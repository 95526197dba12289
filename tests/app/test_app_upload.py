"""Uploads through the sidebar's real st.file_uploader (AppTest): several at once, a bad file, duplicates,
labels, switching the baseline, side files (manifest, ncu), and hostile names staying inert."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.conftest import TRACES, require_data
from tests.support import app_support as s

BERT = TRACES["h100_bert"]
QWEN = TRACES["h100_qwen"]


def test_upload_two_real_traces_replaces_the_demo_and_compares_them():
    at = s.upload(s.app(), BERT, QWEN)
    assert s.labels(at) == ["h100_bert-small_eager", "h100_qwen1.5-0.5b_eager"]
    assert all(r.origin == "upload" for r in s.runs(at))
    # said once as a toast, not as a page message that stays on every page (and every screenshot)
    assert any("samples set aside" in s.plain(t.value) for t in at.toast)
    assert not any("samples set aside" in t for t in s.texts(at, "info"))
    assert not any("Bundled demo data" in t for t in s.texts(at, "info"))
    assert not at.error
    # the uploader was emptied: its bytes are not kept once parsed
    assert at.sidebar.file_uploader[0].value in (None, [])
    s.goto(at, "compare")
    assert not at.error, s.texts(at, "error")
    assert "Kernels per step" in s.metric_values(at)


def test_bad_file_is_one_inline_line_naming_it_and_the_others_stay():
    at = s.app()
    before = s.labels(at)
    at = s.upload(
        at,
        BERT,
        ("broken.json.gz", gzip.compress(b'{"traceEvents": [{"ph": "X", "name": ')[:-9]),
        ("notes.json", b"hello"),
    )
    errors = s.texts(at, "error")
    assert len(errors) == 2, errors
    assert any(e.startswith("broken.json.gz: ") for e in errors), errors
    assert any(e.startswith("notes.json: ") for e in errors), errors
    assert all("\n" not in e and "Traceback" not in e for e in errors)
    assert "h100_bert-small_eager" in s.labels(at)
    assert not at.exception
    # the errors stay visible across page switches until dismissed
    s.goto(at, "kernels")
    assert len(at.error) == 2
    at.button(key="fl_dismiss").click().run()
    assert not at.error
    assert before  # the demo was loaded before the upload


def test_same_content_twice_is_kept_once():
    at = s.upload(s.app(), BERT)
    at = s.upload(at, ("copy-of-bert.json.gz", BERT.read_bytes()))
    assert s.labels(at).count("h100_bert-small_eager") == 1
    assert len(s.runs(at)) == 1
    assert any("same content" in t for t in s.texts(at, "info"))


def test_switching_the_baseline_recomputes_the_diff():
    at = s.app()
    assert s.metric_values(at)["Kernels per step"][0] == "5 → 4"  # eager → compile
    keys = {r.label: r.key for r in s.runs(at)}
    at.sidebar.selectbox(key="fl_baseline_pick").set_value(keys["compile"]).run()
    assert s.labels(at)[0] == "compile"
    m = s.metric_values(at)
    assert m["Kernels per step"][0] == "4 → 5"  # compile → eager: the fusion undone
    s.goto(at, "compare")
    assert at.selectbox(key="fl_compare_candidate").options == ["eager", "liger", "fuselens"]


def test_relabel_and_remove():
    at = s.app()
    key = {r.label: r.key for r in s.runs(at)}["liger"]
    at.sidebar.text_input(key=f"fl_label_{key}").set_value("Liger 0.8").run()
    assert "Liger 0.8" in s.labels(at)
    at.sidebar.text_input(key=f"fl_label_{key}").set_value("compile").run()  # labels stay unique
    assert s.labels(at).count("compile") == 1 and "compile (2)" in s.labels(at)
    at.sidebar.button(key=f"fl_rm_{key}").click().run()
    assert s.labels(at) == ["eager", "compile", "fuselens"]


@pytest.mark.slow  # the slow tier (README): an app run (26 s loaded); fast: uploads, cli/test_side_files
def test_manifest_and_ncu_uploaded_with_traces_attach_to_them():
    files = [s.HF / "eager.json.gz", s.HF / "compile.json.gz", s.HF / "manifest.json", s.HF / "compile.ncu.json"]
    require_data(*files)
    at = s.app()
    for r in list(s.runs(at)):  # start empty, so these are user uploads, not the bundled samples
        at.sidebar.button(key=f"fl_rm_{r.key}").click().run()
    at = s.upload(at, *files)
    assert not at.error, s.texts(at, "error")
    runs = {r.label: r for r in s.runs(at)}
    assert runs["eager"].variant.get("median_us") and runs["eager"].context.get("workload") == "geglu"
    assert runs["compile"].measured and runs["compile"].measured["kernels"]
    s.goto(at, "compare")
    assert any("measured" in str(c.value) for c in at.caption)


def _hostile_trace() -> bytes:
    """The real BERT trace with kernel and op names replaced by HTML, Markdown and spreadsheet-formula payloads."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    payloads = [
        "<img src=x onerror=alert(1)>",
        "<script>alert('k')</script>",
        "[click](javascript:alert(1))",
        "=cmd|' /C calc'!A0",
    ]
    i = 0
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel":
            ev["name"] = payloads[i % len(payloads)] + ev["name"][:20]
            i += 1
    return gzip.compress(json.dumps(doc).encode())


@pytest.mark.slow  # the slow tier (README): a sweep or a heavy check, several seconds
def test_hostile_names_stay_inert_text():
    at = s.upload(s.app(), ("<b>x</b>[y](javascript:z).json.gz", _hostile_trace()), BERT)
    assert not at.exception
    names = " ".join(s.runs(at)[0].summary.kernels["name"])
    assert "<img src=x onerror=alert(1)>" in names  # the analyzer keeps names as they are…
    for page in ("overview", "timeline", "compare", "kernels", "roofline"):
        s.goto(at, page)
        for el in list(at.markdown) + list(at.caption) + list(at.error) + list(at.info):
            raw = str(el.value)
            # …and every Markdown-rendered string that carries one has it escaped: no live tag, no live link
            assert "<img" not in raw and "<script" not in raw and "](javascript" not in raw, (page, raw)
        for chart in at.get("plotly_chart"):
            text = " ".join(s.strings(json.loads(chart.proto.spec)))
            assert "<img src=x" not in text and "<script>" not in text, page


def test_server_defaults_are_safe():
    import tomllib

    cfg = tomllib.loads((s.ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["maxUploadSize"] == 1024  # 1 GB per file, in MB
    assert cfg["server"]["enableXsrfProtection"] is True
    assert cfg["server"]["address"] == "127.0.0.1"  # the Profile page runs code on this machine
    assert cfg["client"]["disableDataExport"] is True  # the only CSV export is the formula-safe one
    assert cfg["client"]["showErrorDetails"] in ("type", "none")  # never a traceback in the browser
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg["runner"]["magicEnabled"] is False
