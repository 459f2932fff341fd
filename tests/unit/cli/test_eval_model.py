"""``mindforge eval --model``: the served name must be the contract's model.id, checked before any trial."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mindforge.cli.main import app
from mindforge.errors import InputError
from tests.conftest import BUNDLED_TASKS, LLAMACPP_EXTRA, REPO, require_module


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


def test_engine_defaults_to_the_main_jobs_llamacpp_for_a_gguf_model(tmp_path) -> None:
    """``auto`` (eval's and quickstart's default) picks llama.cpp for SmolLM2's GGUF; transformers for a directory."""
    require_module("llama_cpp", LLAMACPP_EXTRA)
    from mindforge.cli.common import choose_engine
    from mindforge.policy.engines.models import ResolvedModel, smollm2_gguf_path

    gguf = ResolvedModel.model_construct(spec="smollm2", name="smollm2", gguf_path=str(smollm2_gguf_path()))
    folder = ResolvedModel.model_construct(spec=str(tmp_path), name="m", gguf_path=None)
    assert choose_engine("auto", gguf) == "llamacpp"
    assert choose_engine("transformers", gguf) == "transformers"
    assert choose_engine("auto", folder) == "transformers"
    with pytest.raises(InputError, match="llamacpp serves a GGUF file"):
        choose_engine("llamacpp", folder)
    with pytest.raises(InputError, match="unknown engine 'vllm'"):
        choose_engine("vllm", gguf)


def test_eval_refuses_llamacpp_for_a_model_without_gguf_before_loading_it(settings) -> None:
    require_module("transformers")
    result = _eval(str(REPO / "hcp_contracts" / "tiny.toml"), "--model", "tiny", "--engine", "llamacpp")
    assert isinstance(result.exception, InputError)
    assert "llamacpp serves a GGUF file; --model 'tiny' has none" in str(result.exception)
    alone = _eval(str(REPO / "hcp_contracts" / "tiny.toml"), "--engine", "llamacpp")
    assert isinstance(alone.exception, InputError) and "give --model" in str(alone.exception)
