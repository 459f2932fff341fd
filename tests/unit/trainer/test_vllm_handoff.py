"""vLLM serving with runtime LoRA (docs/vllm.md), where vLLM and a CUDA device are present.

Starts ``vllm serve`` on the tiny local model with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and hands a GRPO-trained adapter to it with
MindForge's own calls (:func:`mindforge.policy.handoff.hand_off`: load under a versioned
name, probe a chat completion under that name); loading the same name and path again is a
no-op and binding the name to other weights is refused. Skipped, with the reason, where
vLLM is not installed or there is no CUDA device (CI and this project's CPU hosts): the
same calls run against the embedded server in tests/integration/test_policy_server.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

#: a CUDA device is here (torch itself is installed by set-up everywhere: only the device may be missing)
HAS_CUDA = torch.cuda.is_available()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here"),
    pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device here (vLLM serves on a GPU)"),
]


def test_vllm_loads_probes_and_keeps_a_revision_name(trained_adapter, yes_no_samples, tiny_model_dir, tmp_path) -> None:
    from mindforge.payloads.training import TrainerConfig
    from mindforge.policy.handoff import AdapterNameConflictError, hand_off, load_adapter, served_adapters
    from mindforge.policy.server.runner import free_port, wait_until_ready
    from mindforge.trainer.grpo import train_grpo

    config = TrainerConfig(lora_rank=4, lora_alpha=8, learning_rate=2e-2, batch_size=4, max_steps=1, seed=1)
    other = train_grpo(tiny_model_dir, yes_no_samples, config, tmp_path / "other").adapter_dir
    port = free_port()
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_dir),
        "--served-model-name", "tiny", "--enable-lora", "--max-lora-rank", "8", "--max-loras", "2",
        "--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.3", "--enforce-eager",
    ]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    base_url = f"http://127.0.0.1:{port}/v1"
    with (tmp_path / "vllm.log").open("wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_ready(base_url, 600, proc)
            record = hand_off(base_url, "tiny-g0-r0", trained_adapter.adapter_dir)
            assert (record.name, record.load, record.probe_model) == ("tiny-g0-r0", "loaded", "tiny-g0-r0")
            assert "tiny-g0-r0" in served_adapters(base_url)
            assert load_adapter(base_url, "tiny-g0-r0", trained_adapter.adapter_dir) == "already_loaded"
            with pytest.raises(AdapterNameConflictError):
                load_adapter(base_url, "tiny-g0-r0", other)
        finally:
            proc.terminate()
            proc.wait(60)
