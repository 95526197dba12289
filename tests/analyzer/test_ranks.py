"""Multi-rank sets: discovery of folders / zips / uploads, zip safety, rank assignment, the local
process-pool engine end to end on a REAL 2-rank set (HTA trace_filter, tests/data/ranks/), spread, comparison."""

from __future__ import annotations

import io
import json
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from analyzer.errors import TraceError
from analyzer.ranks import analyze_ranks, assign_ranks, plan_workers
from analyzer.ranks import inputs as ranks_inputs
from analyzer.ranks.inputs import RankInput, discover, rank_from_name
from analyzer.ranks.worker import step_series, union_us

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "tests" / "data" / "ranks" / "hta_trace_filter"
FILES = ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz")
JSON_BYTES = {"sampled_rank-0.json.gz": 1_759_570, "sampled_rank-1.json.gz": 1_690_403}  # HTA SOURCE.md


def _zip_of(tmp_path: Path, members: dict[str, bytes], name: str = "set.zip") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def _one_line(err: BaseException, *must_name: str) -> str:
    msg = str(err)
    assert "\n" not in msg and len(msg) < 500, msg
    for part in must_name:
        assert part in msg, msg
    return msg


# ------------------------------------------------------------------------------------------------------ discovery


@pytest.mark.parametrize(
    "name, rank",
    [
        ("sampled_rank-1.json.gz", 1),
        ("rank3_trace.json", 3),
        ("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0),
        ("run/rank_12.json", 12),
        ("RANK.7.json", 7),
        ("trace_rank15.pt.trace.json", 15),
        ("worker0.1623143089861.pt.trace.json.gz", None),  # a host/pid name, not a rank
        ("frank1.json", None),  # 'rank' inside a word is not a rank
        ("rank.json", None),
    ],
)
def test_rank_from_name(name, rank):
    assert rank_from_name(name) == rank


def test_discover_folder_reads_sizes_from_gzip_trailer():
    inputs = discover(SET)
    assert [i.name for i in inputs] == list(FILES)
    assert [i.name_rank for i in inputs] == [0, 1]
    assert all(i.data is None and i.path for i in inputs)  # paths, not bytes, go to workers
    assert {i.name: i.est_json_bytes for i in inputs} == JSON_BYTES
    assert inputs[0].set_label == "hta_trace_filter" and inputs[0].display == "hta_trace_filter/sampled_rank-0.json.gz"


def test_discover_zip_reads_in_memory_and_never_extracts(tmp_path):
    members = {f"wrapped/{f}": (SET / f).read_bytes() for f in FILES}
    members["wrapped/README.txt"] = b"not a trace"
    members["__MACOSX/wrapped/._sampled_rank-0.json.gz"] = b"resource fork"
    z = _zip_of(tmp_path, members)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    inputs = discover(z)
    assert [i.name for i in inputs] == [f"wrapped/{f}" for f in FILES]
    assert [i.name_rank for i in inputs] == [0, 1]
    assert all(i.path == str(z) and i.member for i in inputs)
    data, name = ranks_inputs.read_input(inputs[1])
    assert data == (SET / FILES[1]).read_bytes() and name == "set/wrapped/sampled_rank-1.json.gz"
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written next to the zip


@pytest.mark.parametrize(
    "evil", ["../evil_rank0.json", "/etc/rank0.json", "C:\\x\\rank0.json", "a/../../rank0.json", "a\x01b.json"]
)
def test_zip_slip_names_are_refused(tmp_path, evil):
    # zipfile sanitises names when writing, so write a same-length placeholder and patch the raw name bytes in
    # both headers — what a hostile tool writes.
    enc = evil.encode()
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("p" * len(enc), b"{}")
    path.write_bytes(path.read_bytes().replace(b"p" * len(enc), enc))
    with pytest.raises(TraceError) as ei:
        discover(path)
    _one_line(ei.value, "evil.zip", "unsafe member name")


def test_zip_member_over_cap_is_refused_before_reading(tmp_path, monkeypatch):
    z = _zip_of(tmp_path, {"rank0.json": b"{" + b" " * 5000 + b"}"})
    monkeypatch.setattr(ranks_inputs, "MAX_MEMBER_BYTES", 1000)
    with pytest.raises(TraceError) as ei:
        discover(z)
    _one_line(ei.value, "set.zip", "over the 1,000-byte cap")


def test_zip_member_lying_about_its_size_is_refused(tmp_path, monkeypatch):
    """A bomb whose headers claim 500 bytes but whose data inflates to 1 MB: never more than the claim is read,
    and the CRC check then fails — a TraceError, not 1 MB (or 1 TB) in memory."""
    z = _zip_of(tmp_path, {"rank0.json": b"[" + b" " * 1_000_000 + b"]"})
    raw = bytearray(z.read_bytes())
    true_size = struct.pack("<I", 1_000_002)
    for i in range(len(raw) - 4):  # uncompressed-size fields, in the local header and the central directory
        if raw[i : i + 4] == true_size:
            raw[i : i + 4] = struct.pack("<I", 500)
    z.write_bytes(bytes(raw))
    monkeypatch.setattr(ranks_inputs, "MAX_MEMBER_BYTES", 1000)
    inp = discover(z)[0]
    assert inp.size_bytes == 500
    with pytest.raises(TraceError) as ei:
        ranks_inputs.read_input(inp)
    _one_line(ei.value, "set.zip", "rank0.json")


def test_zip_bytes_and_uploads_are_read_in_memory():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in FILES:
            zf.writestr(f, (SET / f).read_bytes())
    inputs = discover(buf.getvalue(), label="upload")
    assert [i.name for i in inputs] == list(FILES) and all(i.data for i in inputs) and not any(i.path for i in inputs)
    ups = discover([(f, (SET / f).read_bytes()) for f in reversed(FILES)], label="up")
    assert [i.name for i in ups] == list(FILES) and ups[0].est_json_bytes == JSON_BYTES[FILES[0]]


@pytest.mark.parametrize("what", ["missing", "empty_dir", "not_zip", "empty_zip"])
def test_bad_sets_raise_one_line_trace_errors(tmp_path, what):
    if what == "missing":
        target = tmp_path / "nope"
    elif what == "empty_dir":
        target = tmp_path / "empty"
        target.mkdir()
        (target / "notes.txt").write_text("x")
    elif what == "not_zip":
        target = tmp_path / "x.zip"
        target.write_bytes(b"PK\x03\x04 not really")
    else:
        target = _zip_of(tmp_path, {"readme.md": b"x"}, "empty.zip")
    with pytest.raises(TraceError) as ei:
        discover(target)
    _one_line(ei.value, target.name)


# ---------------------------------------------------------------------------------------------------- rank numbers


def _inp(name: str) -> RankInput:
    return RankInput(set_label="s", name=name, path=name, name_rank=rank_from_name(name))


def _res(rank=None, ok=True) -> dict:
    return {"ok": ok, "distributed": {} if rank is None else {"rank": rank}}


def test_ranks_from_distributed_info_then_name_then_natural_order():
    inputs = [_inp(n) for n in ("a10.json", "a2.json", "rank5.json", "x.json")]
    ranks, src, notes = assign_ranks("s", inputs, [_res(), _res(), _res(), _res(0)])
    # x.json says rank 0 (distributedInfo); rank5 from its name; a2 < a10 in natural order take 1 and 2
    assert ranks == [2, 1, 5, 0] and src == ["order", "order", "file name", "distributedInfo"] and notes == []


def test_colliding_distributed_info_falls_back_to_distinct_file_names():
    inputs = [_inp("rank0.json"), _inp("rank1.json")]
    ranks, src, notes = assign_ranks("s", inputs, [_res(0), _res(0)])
    assert ranks == [0, 1] and src == ["file name"] * 2 and "collide" in notes[0]


def test_unresolvable_collision_names_both_files():
    inputs = [_inp("a.json"), _inp("b.json")]
    with pytest.raises(TraceError) as ei:
        assign_ranks("s", inputs, [_res(3), _res(3)])
    _one_line(ei.value, "s:", "rank 3", "a.json", "b.json")


def test_disagreeing_name_and_distributed_info_is_noted():
    ranks, _, notes = assign_ranks("s", [_inp("rank1.json")], [_res(4)])
    assert ranks == [4] and "says rank 1" in notes[0]


def test_plan_workers_is_bounded_by_memory_jobs_and_cores():
    assert plan_workers(8, 3, 1) == 3
    assert plan_workers(8, 100, 1 << 50) == 1  # one petabyte per task: only one at a time
    assert 1 <= plan_workers(0, 100, 1) <= 128


def test_union_us_merges_overlaps():
    import numpy as np

    s = np.array([0.0, 5.0, 1.0, 20.0, 20.0])
    e = np.array([4.0, 10.0, 6.0, 25.0, 21.0])
    assert union_us(s, e) == 15.0  # [0,10) + [20,25)
    assert union_us(np.array([]), np.array([])) == 0.0


# ------------------------------------------------------------------------------------------------- end to end (real)


@pytest.fixture(scope="module")
def report():
    return analyze_ranks(SET, engine="local", workers=2)


def test_real_set_per_rank_summaries_match_single_trace_summaries(report):
    from analyzer.fmt import clean_json
    from analyzer.pipeline import load_trace
    from analyzer.summary import summarize

    (s,) = report.sets
    assert [e["rank"] for e in s["ranks"]] == [0, 1] and s["failed"] == []
    assert [e["rank_from"] for e in s["ranks"]] == ["distributedInfo"] * 2
    assert s["world_size"] == 128 and any("2 of 128 ranks" in n for n in s["notes"])
    for e in s["ranks"]:
        summary = summarize(load_trace(SET / e["file"]))
        assert e["per_step"] == clean_json(
            summary.per_step
        )  # what the pool returned is the summary, not an approximation
        assert e["steps_used"] == [int(x) for x in summary.steps_used]
        series = step_series(summary.trace.gpu_ops, summary.trace.steps, e["steps_used"])
        assert e["series"] == series
        for row in series:
            total = row["compute_us"] + row["communication_us"] + row["memory_us"]
            assert row["gpu_time_us"] == pytest.approx(total)
            assert 0.0 <= row["exposed_communication_us"] <= row["communication_us"] + 1e-6


def test_real_set_spread_names_ranks_and_categories(report):
    sp = report.sets[0]["spread"]
    gpu = {e["rank"]: e["per_step"]["gpu_time_us"] for e in report.sets[0]["ranks"]}
    assert sp["slowest_rank"]["rank"] == max(gpu, key=gpu.get)
    assert sp["gpu_time_us"]["max"] == max(gpu.values()) and sp["gpu_time_us"]["min"] == min(gpu.values())
    assert sp["straggler_rank"]["rank"] in gpu
    assert "communication" in sp["by_category"]  # the set has ncclKernel_SendRecv kernels
    for st in sp["by_category"].values():
        assert st["min"] <= st["median"] <= st["max"]


def test_worker_results_are_compact(report):
    """Parent memory stays bounded: what a worker sends back is small whatever the trace size."""
    for e in report.sets[0]["ranks"]:
        assert len(pickle.dumps(e)) < 100_000


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_folder_zip_and_uploads_give_identical_results(tmp_path, report):
    z = _zip_of(tmp_path, {f: (SET / f).read_bytes() for f in FILES})
    from_zip = analyze_ranks(z, labels=["hta_trace_filter"], workers=1).to_json()
    ups = [(f, (SET / f).read_bytes()) for f in FILES]
    from_up = analyze_ranks(ups, labels=["hta_trace_filter"], workers=1).to_json()
    assert from_zip == report.to_json() == from_up


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_one_broken_rank_fails_alone(tmp_path):
    d = tmp_path / "set"
    d.mkdir()
    shutil.copy(SET / FILES[0], d / FILES[0])
    (d / "sampled_rank-1.json.gz").write_bytes(b"\x1f\x8b\x08\x00 this is not gzip at all")
    rep = analyze_ranks(d, workers=2)
    (s,) = rep.sets
    assert [e["rank"] for e in s["ranks"]] == [0]
    (f,) = s["failed"]
    assert f["rank"] == 1 and f["file"] == "sampled_rank-1.json.gz" and not f["internal"]
    _one_line(TraceError("x", f["error"]), "set/sampled_rank-1.json.gz")


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_all_ranks_broken_is_a_trace_error(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "rank0.json").write_bytes(b"")
    (d / "rank1.json").write_bytes(b"not json")
    with pytest.raises(TraceError) as ei:
        analyze_ranks(d, workers=1)
    _one_line(ei.value, "bad:", "no rank could be analysed")


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_comparing_a_set_with_itself_changes_nothing(tmp_path, report):
    z = _zip_of(tmp_path, {f: (SET / f).read_bytes() for f in FILES}, "again.zip")
    rep = analyze_ranks([SET, z], labels=["base", "again"], workers=2, diff_rank="slowest")
    cmp_ = rep.compare
    assert cmp_["labels"] == ["base", "again"] and [r["rank"] for r in cmp_["ranks"]] == [0, 1]
    for row in cmp_["ranks"]:
        assert row["vs_base"]["again"]["delta_us"] == 0.0
        assert all(v == 0.0 for v in row["vs_base"]["again"]["by_category_delta_us"].values())
    (d,) = rep.diffs
    assert d["rank"] == report.sets[0]["spread"]["straggler_rank"]["rank"]
    assert ("result" in d) != ("error" in d)


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_cli_json_is_valid_sorted_and_deterministic():
    cmd = [sys.executable, "-m", "analyzer", "ranks", str(SET), "--json", "--workers", "2"]
    a = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert a.returncode == 0, a.stderr
    doc = json.loads(a.stdout)
    assert doc["format"] == "fuselens-ranks/1" and list(doc) == sorted(doc)
    b = subprocess.run(cmd[:-2] + ["--workers", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert b.stdout == a.stdout  # worker count does not change a byte
    assert "pid" not in a.stdout and "hostname" not in a.stdout


def test_cli_text_and_missing_set_exit_codes(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "analyzer", "ranks", str(SET)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0 and "slowest rank" in ok.stdout and "straggler" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "analyzer", "ranks", str(tmp_path / "nope")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_cli_in_process_compare_text_and_json(capsys):
    from analyzer.ranks import cli as ranks_cli

    args = [str(SET), "--against", str(SET), "--labels", "eager,again", "--diff-rank", "all", "--workers", "1"]
    assert ranks_cli.main(args) == 0
    text = capsys.readouterr().out
    assert "GPU ms per step by rank: eager vs again" in text and "fusion diff on rank 0" in text
    assert ranks_cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["rank"] for d in doc["diffs"]] == [0, 1] and all("result" in d for d in doc["diffs"])
    assert ranks_cli.main([*args[:-4], "--diff-rank", "7"]) == 2  # rank 7 is not in the sets: one-line error
    err = capsys.readouterr().err
    assert err.startswith("error: --diff-rank: rank 7") and err.count("\n") == 1


def test_a_rank_diff_without_a_set_to_diff_against_says_so(capsys):
    """--diff-rank all (or N) on one set has nothing to diff a rank with: one line naming --against, exit 2, instead
    of a report whose diffs are silently empty."""
    from analyzer.ranks import cli as ranks_cli

    assert ranks_cli.main([str(SET), "--diff-rank", "all", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --diff-rank all:") and "--against" in err and err.count("\n") == 1


def test_report_frames_for_tables_and_figures(report):
    per_rank = report.per_rank_frame()
    assert list(per_rank["rank"]) == [0, 1] and {"compute_us", "exposed_communication_us"} <= set(per_rank.columns)
    cats = report.category_frame()
    assert set(cats["rank"]) == {0, 1} and "communication" in set(cats["category"])
    assert cats.groupby("rank")["time_us"].sum().gt(0).all()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_worker_killed_mid_rank_is_retried(tmp_path):
    """The OS killing a worker (what the OOM killer does) breaks the pool; every rank must still be analysed."""
    import threading
    import time

    import psutil

    out = tmp_path / "set"
    made = subprocess.run(
        [sys.executable, "bench/make_rank_set.py", "--ranks", "3", "--mb", "12", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(rep=analyze_ranks(out, workers=2)))
    t.start()
    me, killed, deadline = psutil.Process(), False, time.time() + 60
    while not killed and time.time() < deadline and t.is_alive():
        try:
            servers = [c for c in me.children() if "forkserver" in " ".join(c.cmdline())]
            workers = [w for srv in servers for w in srv.children() if time.time() - w.create_time() > 0.5]
        except psutil.Error:
            workers = []
        if workers:
            workers[0].kill()  # a pool worker half a second into a rank
            killed = True
        time.sleep(0.05)
    t.join(240)
    assert killed, "no worker was caught mid-rank"
    rep = result["rep"]
    assert [e["rank"] for e in rep.sets[0]["ranks"]] == [0, 1, 2] and rep.failed() == []


def test_files_that_do_not_say_they_are_ranks_are_noted(tmp_path):
    """A folder of unrelated traces (Kineto's tb_plugin samples: two GPU-metrics fixtures and two ResNet-50 runs)
    has no rank in any file: the ranks are file order, and the set's notes say nothing shows one job. HTA's two
    sampled ranks say their rank (distributedInfo) and get no such note."""
    for name in ("gpu_metrics_input.json", "gpu_metrics_expected.json"):
        shutil.copy(ROOT / "tests" / "data" / "kineto" / name, tmp_path / name)
    unrelated = analyze_ranks(str(tmp_path), workers=1, diff_rank=None).to_json()["sets"][0]
    assert [e["rank_from"] for e in unrelated["ranks"]] == ["order", "order"]
    assert any(n.startswith("no trace records its rank") for n in unrelated["notes"])
    job = analyze_ranks(str(SET), workers=1, diff_rank=None).to_json()["sets"][0]
    assert not any("no trace records its rank" in n or "different GPUs" in n for n in job["notes"])
