"""kernels/lab/sweep_floor.py's pure parts (no GPU): candidate lists and the table it prints."""

from tests._kernels_env import torch  # noqa: F401 (sets TRITON_INTERPRET before triton is imported)

# isort: split
from kernels.lab import sweep_floor  # noqa: E402
from kernels.ops.launch import config_text  # noqa: E402


def test_every_tail_candidate_has_its_one_launch_twin():
    """The sweep's gate/up table compares each split-K-tail config with the same config without it."""
    gated = [config_text(c) for c in sweep_floor.unique_configs(sweep_floor.GATED_CANDIDATES)]
    down = [config_text(c) for c in sweep_floor.unique_configs(sweep_floor.DOWN_CONFIGS)]
    assert len(gated) == len(sweep_floor.GATED_CANDIDATES) and len(down) == len(sweep_floor.DOWN_CONFIGS)
    tails = [t for t in gated if t.endswith(" TAIL")]
    assert tails and all(t.removesuffix(" TAIL") in gated for t in tails)


def test_table_sorts_fastest_first_and_keeps_failures():
    rows = {
        "slow": {"us": 200.0, "spread_us": 1.0, "sm_mhz": 1755.0, "power_w": 690.0},
        "fast": {"us": 100.0, "spread_us": 2.5, "sm_mhz": None, "power_w": None},
        "broken": {"passes": [], "error": "OutOfResources: shared memory", "sm_mhz": None, "power_w": None},
    }
    lines = sweep_floor.table("t", rows, flop=1e11, floor_us=90.0, errs={"fast": 1.5e-3})
    body = [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| candidate")]
    assert body[0] == "| fast | 100.0 | 2.5 | 1000 | 1.111 | – | – | 1.5e-03 |"
    assert body[1] == "| slow | 200.0 | 1.0 | 500 | 2.222 | 1755 | 690 | – |"
    assert body[2] == "| broken | did not run: OutOfResources: shared memory |"
