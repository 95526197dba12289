"""No run, round, session or issue IDs in the code: a comment states the fact with its number and points to a
results file or a docs section; the history lives in docs/history/ and git."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

# a run, round, session, issue or stop with its number or letter, and the history tables' "S<n>-<tag>" rows
HISTORY_ID = re.compile(
    r"\b(?:[Rr]un|[Rr]ound|[Ss]ession|[Ii]ssue|[Ss]top) ?#?[0-9]+[a-z]?\b|\b[Rr]ound [A-C]\b|\bS[0-9]+-[A-Za-z0-9]"
)


def _python_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if not f.startswith("tests/data/")]


def test_no_history_ids_in_python_files():
    hits = []
    for f in _python_files():
        for n, line in enumerate((ROOT / f).read_text(encoding="utf-8").splitlines(), start=1):
            if HISTORY_ID.search(line):
                hits.append(f"{f}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_pattern_finds_each_form():
    # each form spelled from its word and number, so this file holds no citation itself
    forms = [("run", "9b"), ("round", "2"), ("Round", "B on the H200"), ("session", "6"), ("issue", "13 item 4"),
             ("issue", "#12"), ("history row", "S" + "6-x")]  # fmt: skip
    for word, rest in forms:
        text = f"{word} {rest}"
        assert HISTORY_ID.search(text), text
    for text in ("run_utc", "rounds over every row", "tests/data/ncu_warm_h100_round0", "a 2-run set", "issue a line"):
        assert not HISTORY_ID.search(text), text
