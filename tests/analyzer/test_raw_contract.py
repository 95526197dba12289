"""The raw-table contract (analyzer.schema.RAW_TABLES / RawTrace): the Kineto decoder honours it, and a second,
independent reader that produces it plugs into build_trace unchanged and gets the same Trace."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analyzer import schema
from analyzer.readers import decode
from analyzer.readers.load import read_path
from analyzer.readers.repair import parse_document
from analyzer.trace import build_trace
from tests.conftest import TRACES, loaded_trace, reference_events

GROUP = {"kernel": "gpu", "gpu_memcpy": "gpu", "gpu_memset": "gpu", "cpu_op": "cpu", "cuda_runtime": "launches",
         "cuda_driver": "launches", "user_annotation": "annotations", "gpu_user_annotation": "annotations"}  # fmt: skip


def _dict_reader(top: dict, events: list[dict]) -> schema.RawTrace:
    """A deliberately plain reader: orjson dicts → the raw tables (per-event Python; a test, not a hot path)."""
    rows: dict[str, list[dict]] = {t: [] for t in schema.RAW_TABLES}
    x = 0
    for e in events:
        if e.get("ph") != "X":
            continue
        t = GROUP.get(e.get("cat"))
        a = e.get("args") or {}
        row = {"event_index": x, "name": e.get("name", ""), "pid": e.get("pid", -1), "tid": e.get("tid", -1),
               "ts": float(e.get("ts", math.nan)), "dur": float(e.get("dur", math.nan))}  # fmt: skip
        x += 1
        if t is None:
            continue
        if t == "gpu":
            row.update(kind={"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}[e["cat"]],
                       correlation=a.get("correlation", -1), external_id=a.get("External id", -1),
                       device=a.get("device", -1), stream=a.get("stream", -1),
                       grid=",".join(map(str, a["grid"])) if "grid" in a else "",
                       block=",".join(map(str, a["block"])) if "block" in a else "",
                       registers=float(a.get("registers per thread", math.nan)),
                       shared_memory=float(a.get("shared memory", math.nan)), bytes=float(a.get("bytes", math.nan)))  # fmt: skip
        elif t == "cpu":
            row.update(external_id=a.get("External id", -1), sequence_number=a.get("Sequence number", -1),
                       input_dims=a.get("Input Dims"), input_types=a.get("Input type"),
                       input_strides=a.get("Input Strides"), concrete_inputs=a.get("Concrete Inputs"))  # fmt: skip
        elif t == "launches":
            row.update(correlation=a.get("correlation", -1), external_id=a.get("External id", -1))
        else:
            row.update(on_gpu=e["cat"] == "gpu_user_annotation", external_id=a.get("External id", -1))
        rows[t].append(row)
    tables = {}
    for t, cols in schema.RAW_TABLES.items():
        if not rows[t]:
            tables[t] = {}
            continue
        tables[t] = {
            c.name: ([r[c.name] for r in rows[t]] if c.dtype == "object" else np.array([r[c.name] for r in rows[t]], dtype=c.dtype))
            for c in cols
        }  # fmt: skip
    starts = [e["ts"] for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    return schema.RawTrace(
        header={k: v for k, v in top.items() if k != "traceEvents"}, form="object", n_events=len(events),
        trace_start_raw=float(min(starts)), categories={}, process_labels=[], legacy=False,
        **tables,
    )  # fmt: skip


def test_the_decoder_produces_the_raw_contract():
    path = TRACES["h100_bert"]
    data, _ = read_path(path, path.name, 1 << 30)
    form, header, events, _ = parse_document(data, path.name)
    raw = decode.decode_events(form, header, events)
    assert isinstance(raw, schema.RawTrace)
    schema.check_raw(raw)
    for table, cols in schema.RAW_TABLES.items():
        data = getattr(raw, table)
        assert data, table
        for c in cols:
            v = data[c.name]
            if c.dtype != "object":
                assert str(np.asarray(v).dtype) == c.dtype, (table, c.name)


def test_a_second_reader_plugs_into_build_trace():
    path = TRACES["h100_bert"]
    top, events = reference_events(path)
    raw = _dict_reader(top, events)
    raw.categories = {"kernel": 1, "cpu_op": 1}
    other = build_trace(raw, "other-reader")
    ref = loaded_trace(path)
    cols = ["kind", "name", "ts_us", "dur_us", "correlation", "op_name", "input_dims", "bytes", "flops", "step"]
    pd.testing.assert_frame_equal(other.gpu_ops[cols], ref.gpu_ops[cols], check_exact=True)
    assert len(other.cpu_ops) == len(ref.cpu_ops) and len(other.launches) == len(ref.launches)
    pd.testing.assert_frame_equal(other.steps, ref.steps)


def test_a_reader_that_breaks_the_contract_is_named():
    path = TRACES["h100_bert"]
    raw = _dict_reader(*reference_events(path))
    raw.gpu.pop("stream")
    with pytest.raises(ValueError, match=r"raw table 'gpu': missing columns \['stream'\]"):
        schema.check_raw(raw)
