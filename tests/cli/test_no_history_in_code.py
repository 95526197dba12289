"""No run, round, session or issue IDs in the code: a comment states the fact with its number and points to a
results file or a docs section; the history lives in docs/history/ and git."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

# "run 9b", "round 2", "Round B", "session 6", "issue 13", "issue #12", "stop 31", "S6-x": the forms the code held
HISTORY_ID = re.compile(
    r"\b(?:[Rr]un|[Rr]ound|[Ss]ession|[Ii]ssue|[Ss]top) ?#?[0-9]+[a-z]?\b|\b[Rr]ound [A-C]\b|\bS[0-9]+-[A-Za-z0-9]"
)


def _python_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    this = "tests/cli/test_no_history_in_code.py"  # its own examples below
    return [f for f in out.stdout.split() if not f.startswith("tests/data/") and f != this]


def test_no_history_ids_in_python_files():
    hits = []
    for f in _python_files():
        for n, line in enumerate((ROOT / f).read_text(encoding="utf-8").splitlines(), start=1):
            if HISTORY_ID.search(line):
                hits.append(f"{f}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_pattern_finds_each_form():
    for text in ("(run 9b, H100)", "round 2", "Round B on the H200", "session 6", "issue 13 item 4", "issue #12",
                 "history row S6-x"):  # fmt: skip
        assert HISTORY_ID.search(text), text
    for text in ("run_utc", "rounds over every row", "tests/data/ncu_warm_h100_round0", "a 2-run set", "issue a line"):
        assert not HISTORY_ID.search(text), text
