"""Where a policy server may listen and who may call it (no socket: the app is called in-process).

The rules live in :mod:`mindforge.policy.server.auth`, which the embedded server and the
scripted double both go through; the key is a ``SecretStr`` everywhere it is held.
"""

from __future__ import annotations

import pickle

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from mindforge.agent.endpoint import resolve_endpoint
from mindforge.cli.policy import app as policy_cli
from mindforge.hcp import load_contract
from mindforge.listen import is_loopback, probe_host
from mindforge.payloads.ray_tasks import SandboxSettings
from mindforge.policy.doubles.scripted import PolicyScript, create_scripted_app, start_scripted_policy
from mindforge.policy.server.auth import UnprotectedBindError, check_bind, protect
from mindforge.policy.server.runner import ServerHandle
from mindforge.policy.server.server import start_policy_server
from mindforge.settings import Settings, get_settings
from tests.conftest import REPO

KEY = "sk-test-5f1c0ffee"
CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch):
    """Settings with ``MINDFORGE_POLICY_API_KEY`` set (the cache cleared before and after)."""
    monkeypatch.setenv("MINDFORGE_POLICY_API_KEY", KEY)
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


@pytest.fixture
def no_key_env(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MINDFORGE_POLICY_API_KEY", raising=False)
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


LOOPBACK = ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "::ffff:127.0.0.1"]
BEYOND = ["0.0.0.0", "::", "::ffff:192.0.2.7", "192.0.2.7", "gpu-host"]


@pytest.mark.parametrize(("host", "loopback"), [(h, True) for h in LOOPBACK] + [(h, False) for h in BEYOND])
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_all_interfaces_are_probed_on_loopback() -> None:
    assert probe_host("0.0.0.0") == "127.0.0.1" and probe_host("192.0.2.7") == "192.0.2.7"


@pytest.mark.parametrize("key", [None, "", SecretStr("")])
def test_beyond_loopback_without_a_key_is_refused_naming_the_setting(key) -> None:
    check_bind("127.0.0.1", key)  # loopback needs none
    with pytest.raises(UnprotectedBindError, match="MINDFORGE_POLICY_API_KEY") as err:
        check_bind("0.0.0.0", key)
    assert "settings' policy_api_key" in str(err.value) and "0.0.0.0" in str(err.value)
    check_bind("0.0.0.0", "k")  # a key lets it through


def test_both_servers_refuse_before_binding_or_loading(no_key_env) -> None:
    with pytest.raises(UnprotectedBindError):
        start_scripted_policy({"rules": []}, host="0.0.0.0")
    with pytest.raises(UnprotectedBindError):
        ServerHandle(create_scripted_app(PolicyScript()), host="0.0.0.0")
    # the real server refuses before it resolves the model: a model that does not exist is never looked at
    with pytest.raises(UnprotectedBindError):
        start_policy_server("/nonexistent/model", host="0.0.0.0")


def test_cli_refuses_to_serve_beyond_loopback_without_a_key(no_key_env) -> None:
    result = CliRunner().invoke(policy_cli, ["serve", "--model", "/nonexistent/model", "--host", "0.0.0.0"])
    assert result.exit_code == 2, result.output
    assert "MINDFORGE_POLICY_API_KEY" in result.output and "refusing to serve" in result.output
    assert "loading" not in result.output  # refused before the model


def _protected_app(host: str = "0.0.0.0"):
    app = create_scripted_app(PolicyScript(default={"content": "hello"}))
    protect(app, host, SecretStr(KEY))
    return app


@pytest.mark.parametrize("header", [None, "Bearer wrong-key", f"Basic {KEY}", f"Bearer {KEY}x", "Bearer "])
def test_requests_without_the_right_key_get_an_openai_shaped_401(header: str | None) -> None:
    client = TestClient(_protected_app())
    headers = {"Authorization": header} if header is not None else {}
    chat = client.post("/v1/chat/completions", json=CHAT, headers=headers)
    answers = (client.get("/v1/models", headers=headers), chat)
    for resp in answers:
        assert resp.status_code == 401
        err = resp.json()["error"]
        assert err["type"] == "AuthenticationError" and err["code"] == 401 and "Bearer" in err["message"]
        assert KEY not in resp.text and resp.headers["www-authenticate"] == "Bearer"


def test_the_right_key_is_answered_even_on_loopback() -> None:
    client = TestClient(_protected_app("127.0.0.1"))
    ok = client.post("/v1/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "hello"
    assert client.get("/v1/models", headers={"authorization": f"bearer {KEY}"}).status_code == 200
    assert client.get("/v1/models").status_code == 401  # a key, once set, is checked on loopback too


def test_the_key_is_not_in_the_apps_middleware_repr() -> None:
    app = _protected_app()
    assert KEY not in repr(app.user_middleware) and "**********" in repr(app.user_middleware)


def test_settings_hold_the_key_as_a_secret(key_env) -> None:
    settings = key_env
    assert settings.policy_api_key is not None and settings.policy_api_key.get_secret_value() == KEY
    for shown in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert KEY not in shown
    assert Settings().bind_host == "127.0.0.1"


def test_the_ray_payload_carries_the_key_masked(key_env) -> None:
    sandbox = SandboxSettings.from_settings(key_env)
    assert KEY not in repr(sandbox) and KEY not in sandbox.model_dump_json()
    back = pickle.loads(pickle.dumps(sandbox))  # what Ray does with a task's arguments
    assert back.policy_api_key is not None and back.policy_api_key.get_secret_value() == KEY
    assert back.to_settings().policy_api_key == back.policy_api_key


def test_the_policy_endpoint_gets_the_policy_key_and_no_other_endpoint_does(
    key_env, monkeypatch: pytest.MonkeyPatch
) -> None:
    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    monkeypatch.setenv(contract.model.api_key_env, "sk-contracts-own")
    assert resolve_endpoint(contract) == (key_env.policy_url, KEY)
    assert resolve_endpoint(contract, "http://gpu-host:8000/v1") == ("http://gpu-host:8000/v1", KEY)
    assert resolve_endpoint(contract, api_key="explicit")[1] == "explicit"
    # the shipped contracts read their URL from MINDFORGE_POLICY_URL, settings' own variable: still the policy endpoint
    assert contract.model.base_url_env == "MINDFORGE_POLICY_URL"
    monkeypatch.setenv("MINDFORGE_POLICY_URL", "http://gpu-host:8001/v1")
    get_settings.cache_clear()
    assert resolve_endpoint(contract) == ("http://gpu-host:8001/v1", KEY)
    # an endpoint only the contract names gets the contract's key, never the policy key
    other = contract.model_copy(update={"model": contract.model.model_copy(update={"base_url_env": "OTHER_URL"})})
    monkeypatch.setenv("OTHER_URL", "https://api.example.test/v1")
    assert resolve_endpoint(other) == ("https://api.example.test/v1", "sk-contracts-own")


def test_a_ray_task_passes_the_workers_key_where_its_own_settings_lack_it(no_key_env) -> None:
    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    url, key = resolve_endpoint(contract, "http://127.0.0.1:8000/v1", policy_key=SecretStr(KEY))
    assert key == KEY
