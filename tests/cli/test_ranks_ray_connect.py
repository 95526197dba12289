"""`analyzer ranks --engine ray --address …` with nothing listening: one line and exit 2 within seconds (Ray's own
retries took 10+ minutes for a GCS address and ~31 s for ray://)."""

from __future__ import annotations

import contextlib
import importlib.util
import re
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


def _ranks(addr: str, timeout: int = 120) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "analyzer", "ranks", str(RANKS), "--engine", "ray", "--address", addr],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return p, time.monotonic() - t0


def test_a_server_that_is_not_ray_is_one_line_within_the_timeout():
    """the Ray dashboard's HTTP port (or any web server) given as --address hung for minutes."""
    import http.server
    import threading

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for addr in (f"127.0.0.1:{srv.server_port}", f"ray://127.0.0.1:{srv.server_port}"):
            p, took = _ranks(addr)
            assert p.returncode == 2, p.stderr
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
            assert f"127.0.0.1:{srv.server_port} is not a Ray" in lines[0], lines
            assert took < 30, took
    finally:
        srv.shutdown()


def test_a_silent_listener_is_answered_after_the_timeout():
    """A socket that accepts and never answers (a black hole behind a proxy): the gRPC deadline bounds it."""
    import os

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        t0 = time.monotonic()
        env = {**os.environ, "FUSELENS_RAY_CONNECT_TIMEOUT_S": "2"}
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "analyzer",
                "ranks",
                str(RANKS),
                "--engine",
                "ray",
                "--address",
                f"127.0.0.1:{port}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        took = time.monotonic() - t0
    assert p.returncode == 2 and "is not a Ray GCS" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert took < 25, took


def test_a_grpc_server_without_rays_service_is_refused():
    from concurrent import futures

    import grpc

    from analyzer.errors import TraceError
    from analyzer.ranks.ray_engine import reachable

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(TraceError, match="a gRPC server without Ray's service"):
            reachable(f"127.0.0.1:{port}", timeout_s=5)
    finally:
        server.stop(0)


@pytest.mark.slow
def test_a_real_ray_head_passes_the_check():
    """The check on the real thing: `ray start --head` in its own session (stopped by its process group, never
    `ray stop`, which would stop every Ray on the machine)."""
    import os
    import shutil
    import signal
    import tempfile

    from analyzer.ranks.ray_engine import reachable

    temp = tempfile.mkdtemp(prefix="fl-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes

    ray_bin = shutil.which("ray")
    if ray_bin is None:
        pytest.skip("no ray CLI")
    port = _closed_port()
    head = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--block",
            f"--temp-dir={temp}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                reachable(f"127.0.0.1:{port}", timeout_s=3)  # also: the address Ray rewrites it to is the same GCS
                break
            except Exception:
                if time.monotonic() > deadline or head.poll() is not None:
                    raise
                time.sleep(1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)  # SIGTERM makes Ray drain for 30 s first
        head.wait(30)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_loopback_only_listener_that_ray_would_leave_is_refused():
    """ray.init rewrites 127.0.0.1 to this node's interface address and connects there. A GCS-like
    gRPC service bound to loopback only (nothing of it on the interface address) is refused with one line."""
    from concurrent import futures

    import grpc

    from analyzer.errors import TraceError
    from analyzer.ranks.ray_engine import reachable

    try:
        from ray._private.services import resolve_ip_for_localhost

        there = resolve_ip_for_localhost("127.0.0.1")
    except Exception:
        pytest.skip("this Ray does not rewrite loopback addresses")
    if there in ("127.0.0.1", "localhost"):
        pytest.skip("no interface address on this machine")

    def cluster_id(request, context):
        return b"\n\x10" + b"x" * 16

    handler = grpc.method_handlers_generic_handler(
        "ray.rpc.NodeInfoGcsService", {"GetClusterId": grpc.unary_unary_rpc_method_handler(cluster_id)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(TraceError, match=f"Ray would connect to {re.escape(there)}:{port} instead"):
            reachable(f"127.0.0.1:{port}", timeout_s=3)
    finally:
        server.stop(0)
