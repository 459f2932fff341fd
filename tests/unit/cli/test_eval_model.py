"""``mindforge eval --model``: the served name must be the contract's model.id, checked before any trial."""

from __future__ import annotations

from typer.testing import CliRunner

from mindforge.cli.main import app
from mindforge.errors import InputError
from tests.conftest import BUNDLED_TASKS, REPO, require_module


def _eval(*args: str):
    return CliRunner().invoke(
        app, ["eval", "--tasks", str(BUNDLED_TASKS / "log-5xx-report"), "--contract", *args]
    )


def test_model_and_base_url_together_are_refused(settings) -> None:
    result = _eval(str(REPO / "hcp_contracts" / "tiny.toml"), "--model", "tiny", "--base-url", "http://127.0.0.1:9/v1")
    assert isinstance(result.exception, InputError) and "not both" in str(result.exception)


def test_served_name_other_than_the_contract_model_id_is_refused(settings) -> None:
    require_module("transformers")
    contract = REPO / "hcp_contracts" / "baseline.toml"
    result = _eval(str(contract), "--model", "tiny")
    assert isinstance(result.exception, InputError)
    assert str(result.exception) == (
        f"{contract}: model.id: is 'Qwen/Qwen2.5-0.5B-Instruct' but --model tiny is served as 'tiny'"
    )
