"""Long fuzz run: ≥10,000 generated/mutated traces through load → summarize → diff, collecting
EVERY distinct failure instead of stopping at the first (pytest would), with the smallest input seen for each.

    python bench/fuzz_long.py                   # 10,000 examples, random seed, prints a Markdown table
    python bench/fuzz_long.py -n 20000 --seed 7 --out bench/results/fuzz.md

A failure is anything but a Trace/DiffError with a one-line message naming the file, a table breaking its column
contract, non-strict JSON from to_json(), or an example over the time bound. Same strategies and checks as
tests/analyzer/test_fuzz.py (which runs a derandomized ~2,600 in CI).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.analyzer import test_fuzz as tf  # noqa: E402
from tests.analyzer.fuzz_strategies import fuzz_bytes, valid_bytes  # noqa: E402

# An example using more CPU than this counts as a hang-class failure (tests use hypothesis' deadline). CPU time, not
# wall time: on shared cores a niced run can be starved for seconds, which says nothing about the analyzer.
SLOW_CPU_S = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--examples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--out", type=Path, help="also write the Markdown result here")
    ap.add_argument("--save", type=Path, default=Path("/tmp/fuselens_fuzz_failures"), help="smallest input per failure")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # pandas deprecation chatter is not what this run measures
    rng_seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")

    from analyzer.diff import diff_runs
    from analyzer.errors import DiffError, TraceError

    base = tf.base_summary()  # a small real run (MI300 compiled block): a diff against it costs ~0.1 s
    stages = collections.Counter()
    failures: dict[tuple, dict] = {}
    times: list[float] = []

    def record(stage: str, err: BaseException | str, data: bytes) -> None:
        if isinstance(err, BaseException):
            frames = [f for f in traceback.extract_tb(err.__traceback__) if "/analyzer/" in f.filename]
            where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
            key = (stage, type(err).__name__, where)
            text = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
        else:
            key, text = (stage, "property", err[:80]), err[:200]
        f = failures.setdefault(key, {"count": 0, "data": data, "text": text})
        f["count"] += 1
        if len(data) < len(f["data"]):
            f["data"], f["text"] = data, text

    def run_one(data: bytes) -> None:
        t0 = time.process_time()
        stage = "load"
        try:
            trace = tf.load(data)
            stages["loaded" if trace is not None else "load: TraceError"] += 1
            if trace is None:
                return
            stage = "summarize"
            s = tf.summarize_or_none(trace)
            stages["summarized" if s is not None else "summarize: TraceError"] += 1
            if s is None:
                return
            stage = "diff"
            for a, b in ((base, s),) if len(data) % 2 else ((s, base),):  # fuzzed run as candidate or as base
                try:
                    tf.check_strict_json(diff_runs(a, [b], labels=["base", "fuzz"]).to_json())
                    stages["diffed"] += 1
                except (DiffError, TraceError) as err:
                    assert "\n" not in str(err), f"multi-line {type(err).__name__}"
                    stages["diff: DiffError/TraceError"] += 1
        except AssertionError as err:
            record(stage, f"property: {err}", data)
        except Exception as err:  # noqa: BLE001 — collecting bugs is the point
            record(stage, err, data)
        finally:
            dt = time.process_time() - t0
            times.append(dt)
            if dt > SLOW_CPU_S:
                record(stage, f"slow: {dt:.1f} s of CPU", data)

    @seed(rng_seed)
    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(data=st.one_of(fuzz_bytes(avoid_known=False), fuzz_bytes(avoid_known=False), valid_bytes()))
    def fuzz(data):
        run_one(data)

    t0 = time.time()
    fuzz()
    wall = time.time() - t0
    times.sort()
    lines = [
        "# Long fuzz run",
        "",
        f"- command: `python bench/fuzz_long.py -n {args.examples} --seed {rng_seed}`",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        f"- examples: {len(times):,} in {wall:.0f} s wall ({len(times) / max(wall, 1e-9):.0f}/s, load average"
        f" {os.getloadavg()[0]:.1f} at the end); CPU per example: median {times[len(times) // 2] * 1000:.0f} ms,"
        f" p99 {times[int(len(times) * 0.99)] * 1000:.0f} ms, max {times[-1]:.2f} s",
        "- outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(stages.items())),
        f"- distinct failures: {len(failures)}",
        "",
    ]
    if failures:
        args.save.mkdir(parents=True, exist_ok=True)
        lines.insert(-1, f"- smallest input of each failure saved as `{args.save}/fail_N.bin` (N = table row, from 0)")
        lines += ["| stage | error | where | count | smallest input (bytes, repr) |", "|---|---|---|---|---|"]
        for n, ((stage, _kind, where), f) in enumerate(sorted(failures.items(), key=lambda kv: -kv[1]["count"])):
            (args.save / f"fail_{n}.bin").write_bytes(f["data"])
            rep = repr(f["data"][:160]).replace("|", "\\|")
            text = f["text"].replace("|", "\\|")
            lines.append(f"| {stage} | {text} | {where} | {f['count']} | {len(f['data'])}: `{rep}` |")
    out = "\n".join(lines) + "\n"
    print(out)
    if args.out:
        args.out.write_text(out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
