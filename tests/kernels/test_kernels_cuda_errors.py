"""A dead CUDA context is named where it first shows, not skipped like a config that does not fit
(kernels.ops.triton_util.reraise_if_fatal, called first in every except that skips a kernel candidate)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kernels._kernels_env import ON_GPU

# isort: split
from kernels.ops.triton_util import CudaContextLost, reraise_if_fatal  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_a_skippable_error_is_left_to_the_caller_and_a_named_loss_passes_through():
    """Without a dead context the caller skips its candidate as before (no raise); a CudaContextLost raised deeper
    (a Gluon config's first launch) keeps its message through the outer excepts (dispatch's path probe)."""
    if not ON_GPU:  # here (CPU / interpreter) no context can be lost
        assert reraise_if_fatal(RuntimeError("out of resource: shared memory"), "a config") is None
    first = CudaContextLost("CUDA context lost at the Gluon dH kernel (64, 5, 16)'s first launch: ...")
    with pytest.raises(CudaContextLost) as got:
        reraise_if_fatal(first, "the train_dual path's first calls")
    assert got.value is first


# A Triton kernel that stores 2^40 floats past its tensor: an illegal address, which leaves the context unusable.
_FAULT = """
import torch, triton, triton.language as tl
from kernels.ops.triton_util import CudaContextLost, reraise_if_fatal

@triton.jit
def store_far_away(p):
    tl.store(p + (1 << 40), 1.0)

t = torch.zeros(1, device="cuda")
try:
    store_far_away[(1,)](t)
    torch.cuda.synchronize()
except Exception as exc:
    try:
        reraise_if_fatal(exc, "the test's faulting kernel")
    except CudaContextLost as lost:
        print("LOST", lost)
        raise SystemExit(0)
    raise SystemExit(3)
raise SystemExit(4)
"""


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: a real device fault, in a child process")
def test_a_device_fault_is_raised_as_a_lost_context_naming_where(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = tmp_path / "fault.py"  # a file: @triton.jit reads its function's source, which `python -c` has none of
    script.write_text(_FAULT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
    assert r.returncode == 0, (r.returncode, r.stdout[-500:], r.stderr[-1500:])
    assert "CUDA context lost at the test's faulting kernel" in r.stdout
