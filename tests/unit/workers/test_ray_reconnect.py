"""The Ray Client reconnect's pure parts: when a session counts as lost, and the wait for a head to listen."""

from __future__ import annotations

import socket

import pytest

import workers.main as worker_main


def test_only_a_ray_client_session_can_be_lost(monkeypatch) -> None:
    monkeypatch.setattr(worker_main, "_RAY_ADDRESS", [])
    assert worker_main.ray_session_lost() is False  # never connected here
    monkeypatch.setattr(worker_main, "_RAY_ADDRESS", ["127.0.0.1:6379"])
    assert worker_main.ray_session_lost() is False  # a driver of a head reached directly keeps no session
    monkeypatch.setattr(worker_main, "_RAY_ADDRESS", ["local"])
    assert worker_main.ray_session_lost() is False
    monkeypatch.setattr(worker_main, "_RAY_ADDRESS", ["ray://127.0.0.1:10001"])
    assert worker_main.ray_session_lost() is True  # a Ray Client address with no session in this process


def test_the_reconnect_waits_for_the_client_server_to_listen() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        worker_main._wait_for_client_server(f"ray://127.0.0.1:{port}", timeout_sec=5.0)
    with pytest.raises(ConnectionError, match="nothing listens"):
        worker_main._wait_for_client_server(f"ray://127.0.0.1:{port}", timeout_sec=0.2)
