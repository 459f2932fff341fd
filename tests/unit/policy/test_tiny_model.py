"""The locally built tiny model: deterministic, loadable by the Auto classes, a working chat template."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mindforge.policy.doubles.tiny import build_tiny_model, ensure_tiny_model
from tests.conftest import require_module

transformers = require_module("transformers")


def _digests(path: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(path.iterdir())}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=0)


def test_same_seed_same_bytes_other_seed_other_weights(built: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again", seed=0)
    assert _digests(again) == _digests(built)
    other = _digests(build_tiny_model(tmp_path / "other", seed=1))
    assert other["model.safetensors"] != _digests(built)["model.safetensors"]
    assert other["tokenizer.json"] == _digests(built)["tokenizer.json"]


def test_loads_with_auto_classes(built: Path) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(str(built))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(built))
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (64, 2, 4)
    assert 1500 <= len(tok) <= 4096 and cfg.vocab_size == len(tok)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    # byte-level BPE: any text round-trips, including what was never in the corpus
    for text in ['{"cmd": "ls -la | grep x"}\n\t', "naïve café — 漢字 🚀", "<tool_call>\n{}\n</tool_call>"]:
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    assert tok.convert_tokens_to_ids("<tool_call>") != tok.unk_token_id


def test_chat_template_roles(built: Path) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(str(built))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [{"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}],
        },
        {"role": "tool", "content": "a.txt"},
        {"role": "tool", "content": "b.txt"},
        {"role": "assistant", "content": "done"},
    ]
    text = tok.apply_chat_template(messages, tokenize=False)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        '<|im_start|>assistant\nok\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\na.txt\n</tool_response>\n<tool_response>\nb.txt\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\ndone<|im_end|>\n"
    )
    prompt = tok.apply_chat_template(messages[:2], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    with_tools = tok.apply_chat_template(messages[1:2], tools=tools, add_generation_prompt=True, tokenize=False)
    assert with_tools.startswith("<|im_start|>system\nYou are a helpful assistant.\n\n# Tools")
    assert '"name": "read_file"' in with_tools and "<|im_start|>user\nhi" in with_tools


def test_ensure_builds_once(tmp_path: Path) -> None:
    path = ensure_tiny_model(tmp_path / "cache")
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny_model(tmp_path / "cache") == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]  # no temporary leftovers
