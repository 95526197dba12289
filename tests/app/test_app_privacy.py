"""Uploads and the server's disk and memory, through the real app (AppTest, the sidebar's real uploader):

* an upload's analysed tables are not written to the on-disk cache unless the user ticks the sidebar's checkbox
  (the sidebar promises "nothing is written to disk");
* parses share a memory budget: one that would pass it while another runs waits, then is refused with one line.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import require_data
from tests.support import app_support as s

BERT = s.ROOT / "tests" / "data" / "tracelens" / "h100_bert-small_eager.json.gz"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("FUSELENS_CACHE_DIR", str(d))
    return d


def _upload_key(data: bytes) -> str:
    from analyzer.readers.cache import content_key

    return content_key(data)


def _entries_of(d, key: str) -> list:
    return sorted(p.name for p in d.glob(f"{key}-*.fltc")) if d.is_dir() else []


@pytest.mark.slow
def test_uploads_are_not_cached_on_disk_unless_the_user_opts_in(cache_dir):
    require_data(BERT)
    data = BERT.read_bytes()
    key = _upload_key(data)
    at = s.app()
    s.upload(at, ("bert.json.gz", data))
    assert "bert" in s.labels(at)
    assert _entries_of(cache_dir, key) == []  # the promise: nothing of the upload on disk
    help_text = at.sidebar.checkbox(key="fl_keep_uploads").help
    assert "trace cache holds" in help_text and "bound" in help_text  # the disk use is shown where the choice is
    at.sidebar.button(key=f"fl_rm_{key}").click().run()
    at.sidebar.checkbox(key="fl_keep_uploads").check().run()
    s.upload(at, ("bert.json.gz", data))
    assert "bert" in s.labels(at)
    names = _entries_of(cache_dir, key)
    assert len(names) == 2 and any(n.endswith("-summary.fltc") for n in names), names  # trace and summary


def test_the_parse_budget_queues_then_releases():
    from app_core.state import ParseBudget

    b = ParseBudget(total=100, wait_s=30)
    order = []

    def second():
        with b.reserve("b", 80):
            order.append("b in")

    with b.reserve("a", 80):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        assert order == [] and b.running == 1  # b waits: 80 + 80 > 100
        order.append("a out")
    t.join(10)
    assert order == ["a out", "b in"] and b.used == 0 and b.running == 0
    with b.reserve("alone", 10_000):  # a parse alone always runs: the loader's cap bounds it
        assert b.running == 1


def test_the_parse_budget_refuses_with_one_line_after_waiting():
    from app_core.state import BudgetRefused, ParseBudget

    b = ParseBudget(total=100, wait_s=0.5)
    with b.reserve("a", 80), pytest.raises(BudgetRefused) as err, b.reserve("big.json.gz", 80):
        pass
    line = str(err.value)
    assert line.startswith("big.json.gz: not parsed") and "\n" not in line and "FUSELENS_PARSE_BUDGET_BYTES" in line
    assert b.used == 0 and b.running == 0


@pytest.mark.slow
def test_an_upload_over_the_budget_while_another_parses_is_one_line(monkeypatch, cache_dir):
    """The real app: another session's parse holds the server's budget; this upload waits, then says why."""
    from app_core import state

    at = s.app()
    monkeypatch.setenv("FUSELENS_PARSE_BUDGET_BYTES", "1000")
    monkeypatch.setenv("FUSELENS_PARSE_WAIT_S", "1")
    with state.PARSE_BUDGET.reserve("other session's trace", 900):
        s.upload(at, ("bert.json.gz", BERT.read_bytes()))
    errs = s.texts(at, "error")
    assert any(e.startswith("bert.json.gz: not parsed: the server is parsing 1 other trace(s)") for e in errs), errs
    assert "bert" not in s.labels(at)
    s.upload(at, ("bert.json.gz", BERT.read_bytes()))  # the budget free again: it loads
    assert "bert" in s.labels(at)
