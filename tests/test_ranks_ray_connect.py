"""`analyzer ranks --engine ray --address …` with nothing listening: one line and exit 2 within seconds (issue 13
item 8; Ray's own retries took 10+ minutes for a GCS address and ~31 s for ray://)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

RANKS = ROOT / "tests" / "data" / "ranks" / "hta_trace_filter"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_nothing_listening_fails_fast_with_one_line(address):
    addr = address.format(port=_closed_port())
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "analyzer", "ranks", str(RANKS), "--engine", "ray", "--address", addr],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - t0
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to 127.0.0.1:" in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert took < 20, took  # interpreter + imports; the connect itself is refused in milliseconds


def test_address_parsing():
    from analyzer.errors import TraceError
    from analyzer.ranks.ray_engine import reachable

    port = _closed_port()
    for addr in (f"[::1]:{port}", f"ray://localhost:{port}/", f"localhost:{port}"):
        with pytest.raises(TraceError, match="cannot connect"):
            reachable(addr, timeout_s=2)
    with pytest.raises(TraceError, match="not a number"):
        reachable("head:abc")
    reachable("auto")  # names no socket: left to Ray
