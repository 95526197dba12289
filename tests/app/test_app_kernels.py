"""Kernels page (AppTest) and its table module: sort order, filters, and a formula-safe CSV export."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from analyzer.figures import kernels_table as kt
from tests.conftest import TRACES, loaded_trace
from tests.support import app_support as s


@pytest.mark.needs_data(s.HF / "manifest.json")
def test_table_filters_and_estimate_labels():
    at = s.app("kernels")
    df = at.dataframe[0].value
    assert set(df["run"]) == {"eager", "compile", "liger", "fuselens"}
    assert "bytes/call (est.)" in df.columns and "TFLOP/s (est.)" in df.columns and "% peak BW" in df.columns
    # the names are shown with template arguments collapsed; the recorded name is one click away
    assert df["full name"].str.len().max() > df["kernel"].str.len().max()
    times = df["time/step (µs)"].str.replace(",", "").astype(float)
    assert times.is_monotonic_decreasing  # where the time goes, first (shown as text: "—" when unknown, never None)
    assert not df.isin(["None", "nan"]).any().any()
    assert (df.loc[df["kernel"].str.startswith("Memset"), "TFLOP/s (est.)"] == "—").all()  # no FLOPs: a dash
    at.selectbox(key="fl_kernels_sort").set_value("GB/s (est.)").run()  # sorting happens on the numbers
    gbps = at.dataframe[0].value["GB/s (est.)"].str.replace(",", "").astype(float)
    assert gbps.is_monotonic_decreasing
    at.multiselect[1].set_value(["pointwise"]).run()  # category
    df = at.dataframe[0].value
    assert set(df["category"]) == {"pointwise"} and len(df) >= 4  # gelu, mul, and the fused gating kernels
    at.text_input[0].set_value("GELU_MUL").run()  # case-insensitive substring, not a regex
    df = at.dataframe[0].value
    assert list(df["kernel"]) == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    at.text_input[0].set_value("(*[").run()  # would be an invalid regex: must simply match nothing
    assert len(at.dataframe[0].value) == 0 and not at.exception
    assert any(b.label == "Download CSV" for b in at.download_button)


def test_csv_export_neutralises_formulas_from_a_real_trace():
    k = loaded_trace(TRACES["h100_bert"])
    from analyzer import summarize

    kernels = summarize(k).kernels.copy()
    payloads = ["=cmd|' /C calc'!A0", "+SUM(1,2)", "-2+3", '@HYPERLINK("http://x")', "\t=1", "＝1"]
    for i, p in enumerate(payloads):
        kernels.loc[kernels.index[i], "name"] = p
    kernels.loc[kernels.index[0], "op_name"] = "=IMPORTXML(1)"
    view = kt.kernels_view([("=bad label", kernels)])
    rows = list(csv.DictReader(io.StringIO(kt.csv_bytes(view).decode("utf-8-sig"))))
    cells = [v for r in rows for v in r.values() if isinstance(v, str)]
    for bad in ("=", "+", "-", "@", "\t", "＝"):
        assert not any(c.startswith(bad) for c in cells if not _is_number(c)), bad
    names = {r["kernel"] for r in rows}
    assert "'=cmd|' /C calc'!A0" in names and "'-2+3" in names
    assert all(r["run"] == "'=bad label" for r in rows)
    # numbers stay numbers (a negative number is not a formula)
    assert float(rows[0]["time/step (µs)"]) > 0


def _is_number(c: str) -> bool:
    try:
        float(c)
        return True
    except ValueError:
        return c == ""


def test_filter_view_is_literal_and_combines_filters():
    df = pd.DataFrame(
        {
            "run": ["a", "a", "b"],
            "name": ["gemm_x", "gelu(.*)", "gemm_y"],
            "category": ["gemm", "pointwise", "gemm"],
            "library": ["cuBLAS", "ATen", "cuBLAS"],
            "ops": ["mm", "gelu", "mm"],
            "op_name": ["aten::mm", "aten::gelu", "aten::mm"],
            "shapes": ["[[8192, 768]]", "[[8192, 3072]]", "[[1, 768]]"],
        }
    )
    assert list(kt.filter_view(df, text="(.*)")["name"]) == ["gelu(.*)"]
    assert list(kt.filter_view(df, runs=["a"], categories=["gemm"])["name"]) == ["gemm_x"]
    assert list(kt.filter_view(df, text="8192")["name"]) == ["gemm_x", "gelu(.*)"]


def test_a_rate_above_the_hbm_peak_is_marked_where_it_is_shown():
    """HTA's A100 control sample has pointwise kernels whose estimate reads above the 1,555 GB/s peak (mul: 2,621 GB/s,
    169%: small tensors the L2 kept). The GB/s cell carries ⚠ there, not only the hidden 'flags' column."""
    at = s.app()
    s.upload(at, TRACES["hta_diff_control"])
    s.goto(at, "kernels")
    at.selectbox(key="fl_kernels_sort").set_value("GB/s (est.)").run()
    df = at.dataframe[0].value
    marked = df["GB/s (est.)"].str.endswith(" ⚠")
    assert marked.iloc[0] and marked.sum() >= 10
    rates = df.loc[df["GB/s (est.)"] != "—", "GB/s (est.)"].str.removesuffix(" ⚠").str.replace(",", "").astype(float)
    assert (rates[marked] > 1555).all() and (rates[~marked & (df["GB/s (est.)"] != "—")] <= 1555).all()
