"""``mindforge policy serve`` refuses clearly when the model cannot be had."""

from __future__ import annotations

import huggingface_hub.constants
import pytest
from typer.testing import CliRunner

from mindforge.cli.policy import app


def test_unreachable_hub_says_so_and_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    # a closed local port stands for a hub that cannot be reached, on any machine
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    result = CliRunner().invoke(app, ["serve", "--model", "mindforge-tests/not-a-cached-model", "--port", "0"])
    assert result.exit_code == 2
    assert (
        "cannot reach the Hugging Face hub to load mindforge-tests/not-a-cached-model; use --model smollm2 for the "
        "bundled SmolLM2-135M-Instruct (offline), or --model tiny for the offline tiny model that exercises the loop "
        "but will not solve tasks"
    ) in result.output


def test_missing_model_directory_exits_2(tmp_path) -> None:
    result = CliRunner().invoke(app, ["serve", "--model", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such model directory or GGUF file" in result.output


def test_directory_without_config_exits_2(tmp_path) -> None:
    result = CliRunner().invoke(app, ["serve", "--model", str(tmp_path)])
    assert result.exit_code == 2 and "not a Hugging Face model directory (no config.json)" in result.output


def test_llamacpp_engine_needs_a_gguf_file_and_unknown_engines_are_refused() -> None:
    result = CliRunner().invoke(app, ["serve", "--engine", "llamacpp", "--model", "tiny", "--port", "0"])
    assert result.exit_code == 2 and "--engine llamacpp serves a GGUF file; --model 'tiny' is not one" in result.output
    result = CliRunner().invoke(app, ["serve", "--engine", "vllm", "--model", "tiny", "--port", "0"])
    assert result.exit_code == 2 and "unknown engine 'vllm' (choose transformers, llamacpp)" in result.output
