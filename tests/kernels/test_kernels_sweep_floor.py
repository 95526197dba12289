"""kernels/lab/sweep_floor.py's pure parts (no GPU): candidate lists and the table it prints."""

from tests.kernels._kernels_env import torch  # noqa: F401 (sets TRITON_INTERPRET before triton is imported)

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


def test_turns_alternate_direction_so_drift_hits_every_candidate_alike(monkeypatch):
    """A card that heats up over a table must not always time the same candidate last: pass 2 runs in reverse.
    The GPU timer is replaced by one that charges each call by its position in time (a steady drift), so a candidate
    whose mean differs from the others' was favoured by its place in the order."""
    clock = iter(range(100))
    monkeypatch.setattr(sweep_floor, "median_us", lambda fn, **kw: {"median_us": 100.0 + next(clock)})

    class Marks:
        def mark(self, *a):
            pass

        def per_variant(self, phase):
            return {}

    cands = {name: ((), lambda: None) for name in ("a", "b", "c", "d")}
    rows = sweep_floor.timed_in_turns(cands, n_iter=1, sampler=Marks(), passes=2)
    assert [r["passes"] for r in rows.values()] == [[100.0, 107.0], [101.0, 106.0], [102.0, 105.0], [103.0, 104.0]]
    assert {r["us"] for r in rows.values()} == {103.5}
