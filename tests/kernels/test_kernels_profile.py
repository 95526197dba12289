"""The profiling runner's contract (kernels.profile): argument validation, exit codes, JSON progress lines, the
ncu CSV parser on a real Nsight Compute CSV, and the bundled sample_traces index."""

import gzip
import json
from pathlib import Path

import pytest

from kernels.runner import ncu, options, run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
KEYS = {"event", "variant", "done", "total", "message"}


def _run(argv, capsys):
    rc = run.run(argv)
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    for ln in lines:
        assert set(ln) >= KEYS, ln
    return rc, lines


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--workload", "moe"], "unknown workload"),
        (["--variants", "eager,turbo"], "unknown variant"),
        (["--variants", "eager,eager"], "twice"),
        (["--dtype", "fp8"], "unknown dtype"),
        (["--batch", "0"], "--batch must be between"),
        (["--batch", "512", "--seq", "512"], "exceeds the limit of 65536"),
        (["--hidden", "40000"], "--hidden must be between"),
        (["--batch", "64", "--seq", "1024", "--d-model", "32768", "--hidden", "32768", "--train"], "estimated GPU"),
        (["--batch", "ten"], "invalid int value"),
        (["--bogus"], "unrecognized"),
        (["--rounds", "0"], "--rounds must be between 1 and 50"),
        (["--steps-per-turn", "99"], "--steps-per-turn must be between 1 and 20"),
        (["--lock-clocks", "99999"], "--lock-clocks must be a clock in MHz"),
        (["--input-grad"], "--input-grad applies to a training step"),
        (["--workload", "llama-model", "--train", "--input-grad"], "a whole model's input is token ids"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, needle, capsys, tmp_path):
    rc, lines = _run([*argv, "--out", str(tmp_path / "o")], capsys)
    assert rc == options.EXIT_BAD_ARGS
    assert lines[-1]["event"] == "done" and needle in lines[-1]["message"]
    assert not (tmp_path / "o").exists()


def test_out_must_be_a_folder(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    rc, lines = _run(["--out", str(f)], capsys)
    assert rc == options.EXIT_BAD_ARGS and "not a folder" in lines[-1]["message"]


def test_no_gpu_exits_3(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc, lines = _run(["--out", str(tmp_path / "o"), "--variants", "eager"], capsys)
    assert rc == options.EXIT_NO_GPU
    assert [ln["event"] for ln in lines] == ["start", "done"] and "no CUDA GPU" in lines[-1]["message"]


def test_workloads_list_matches_module():
    pytest.importorskip("torch")
    from kernels.models.workloads import WORKLOADS

    assert options.WORKLOADS == WORKLOADS


def test_ncu_csv_parser_on_real_output():
    text = (SAMPLES / "hf_geglu_bf16" / "eager.ncu.csv").read_text()
    kernels = ncu.parse_csv(text)
    assert len(kernels) == 5  # eager HF GEGLU forward: 3 GEMMs, GELU, mul
    # the first data row, read independently of the parser: ID 0, dram__bytes_read.sum, "25,906,432"-style value
    row = next(ln for ln in text.splitlines() if ln.startswith('"0"') and "dram__bytes_read.sum" in ln)
    assert row.split('","')[-2] == "byte"
    first_read = int(row.rsplit('","', 1)[1].strip('"').replace(",", ""))
    assert kernels[0]["kernel"].startswith("nvjet") and kernels[0]["dram_bytes_read"] == first_read > 10_000_000
    assert all(k["dram_bytes_read"] > 0 and k["dram_bytes_write"] > 0 for k in kernels)
    assert ncu.parse_csv("==PROF== nothing profiled\n") == []
    assert ncu._to_bytes("1.5", "Kbyte") == 1500


def test_sample_traces_index_is_consistent():
    index = json.loads((SAMPLES / "manifest.json").read_text())
    ids = [c["id"] for c in index["cases"]]
    assert index["default_case"] == "hf_geglu_bf16" and index["default_case"] in ids
    hf = next(c for c in index["cases"] if c["id"] == "hf_geglu_bf16")
    assert {"eager", "compile", "liger", "fuselens"} <= {v["name"] for v in hf["variants"]}
    total = 0
    for case in index["cases"]:
        m = json.loads((SAMPLES / case["manifest"]).read_text())
        assert m["gpu"]["name"] and m["torch"] and m["workload"] == case["workload"]
        for v in case["variants"]:
            path = SAMPLES / case["folder"] / v["trace"]
            size = path.stat().st_size
            # an MLP or a layer set stays under 2 MiB a trace; a whole model's eager training step (805 GPU ops x 16
            # steps) is 2.7 MiB
            assert size < 3 * 2**20, f"{path} is {size} bytes"
            total += size
            with gzip.open(path) as fh:
                head = fh.read(4096)
            assert b"deviceProperties" in head or b"traceEvents" in head
            if "ncu" in v:
                assert json.loads((SAMPLES / case["folder"] / v["ncu"]).read_text())["kernels"]
    # what the wheel ships and a device call carries (64 MiB for the whole tree): the whole-model sets are ~28 MiB
    assert total < 40 * 2**20


@pytest.mark.parametrize("input_grad", [False, True])
def test_the_runner_training_step_fills_and_clears_the_gradients(input_grad, tmp_path):
    """The manifest's train_step says what record.step_fn runs for an MLP: the loss's backward fills every weight's
    gradient and clears it after the step; x gets a gradient (dX computed, then cleared) only with --input-grad, as
    record.make_workload sets it up."""
    from kernels.runner import manifest, record

    argv = ["--workload", "swiglu", "--dtype", "fp32", "--batch", "1", "--seq", "8", "--d-model", "16"]
    argv += ["--hidden", "40", "--train", "--out", str(tmp_path / "o"), *(["--input-grad"] if input_grad else [])]
    ns = options.build_parser().parse_args(argv)
    options.validate(ns)
    model, x = record.make_workload(ns, device="cpu")
    seen = []
    watched = [*model.parameters(), *([x] if input_grad else [])]
    hooks = [t.register_hook(lambda g, seen=seen: seen.append(tuple(g.shape)) or g) for t in watched]
    record.step_fn(model, x, model.train(), train=True)()
    for hk in hooks:
        hk.remove()
    assert x.requires_grad is input_grad and x.grad is None
    assert len(seen) == len(watched) and (tuple(x.shape) in seen) is input_grad
    assert all(p.grad is None for p in model.parameters())
    assert ("x needs its gradient" in manifest.header(ns)["train_step"]) is input_grad
