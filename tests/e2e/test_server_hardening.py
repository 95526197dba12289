"""The real server's exposure: Host allow-list against DNS rebinding, no file watcher, offline.

A raw WebSocket upgrade, as a rebinding page's script would send it: the Host is the attacker's name (its DNS now
points at 127.0.0.1) and the Origin matches that Host, so the browser's same-origin checks pass. Only the Host
allow-list (`server.allowedHosts` in .streamlit/config.toml) stands between it and the app.
"""

from __future__ import annotations

import base64
import os
import socket
from urllib.parse import urlparse

import pytest

from tests.e2e import harness as h

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]


def _upgrade(url: str, host: str) -> str:
    u = urlparse(url)
    key = base64.b64encode(os.urandom(16)).decode()
    req = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(req.encode())
        return s.recv(4096).decode("latin-1").split("\r\n", 1)[0]


def test_foreign_host_cannot_open_the_websocket():
    with h.streamlit_server(use_config_watcher=True) as url:
        port = urlparse(url).port
        assert " 101 " in _upgrade(url, f"127.0.0.1:{port}")  # the app's own name still works
        assert " 101 " in _upgrade(url, f"localhost:{port}")
        for foreign in (f"evil.example:{port}", "attacker.test", f"127.0.0.1.nip.io:{port}"):
            status = _upgrade(url, foreign)
            assert " 101 " not in status and " 403 " in status, (foreign, status)


def test_config_turns_the_file_watcher_off_and_fetches_nothing():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    cfg = tomllib.loads((h.ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["fileWatcherType"] == "none"
    assert cfg["server"]["runOnSave"] is False
    assert cfg["browser"]["gatherUsageStats"] is False
    assert "localhost" in cfg["server"]["allowedHosts"] and "*" not in cfg["server"]["allowedHosts"]
    app = (h.ROOT / "app_core" / "main.py").read_text()  # the script body app.py and `fuselens app` run
    assert 'page_icon=":' not in app  # a :material:/emoji favicon is fetched from a CDN
